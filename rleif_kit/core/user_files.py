"""Reading a file the user named (a params TOML, settings.json, seeds, data, samples): the one place that says
what such a file may be.

Only a regular file is opened (a FIFO would block the read forever, ``/dev/zero`` would fill memory), a whole file
is read only up to a size, JSON and TOML are nested no deeper than a bound (Python's parsers recurse and die with a
RecursionError deep down), and text that cannot be sent (a lone surrogate, ``"\\ud800"``, is valid JSON but no
UTF-8 encodes it) is refused when the file is read, before a request is built. Each refusal is one line naming the
file (and the line and field where there is one).
"""

from __future__ import annotations

import json
import os
import stat
import tomllib
from pathlib import Path
from typing import Any

MAX_FILE_BYTES = 64 << 20  # a whole file read into memory: a params TOML or settings.json is a few KiB
MAX_DEPTH = 64  # JSON / TOML nesting: the kit's own files nest 4 deep; Python's parsers die near 1,000


class UserFileError(ValueError):
    """A file the user gave (seeds, SFT or PRM data, samples, settings, a config) is not what it must be: the
    message names it."""


def check_regular(path: str | os.PathLike[str], what: str = "", kind: str = "a file") -> Path:
    """``path`` when it names a regular file (a symlink to one counts); else UserFileError: not found, a directory,
    or a FIFO, device or socket (``kind``: what the file should be, for the line)."""
    path, label = Path(path), f"{what}: " if what else ""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        raise UserFileError(f"{label}file not found: {path}") from None
    except NotADirectoryError:
        raise UserFileError(f"{label}file not found: {path} (a part of the path is a file)") from None
    except OSError as exc:
        raise UserFileError(f"{label}{path}: cannot be read: {exc.strerror}") from None
    if stat.S_ISDIR(mode):
        raise UserFileError(f"{label}{path} is a directory, not {kind}")
    if not stat.S_ISREG(mode):
        raise UserFileError(f"{label}{path} is not a regular file (a FIFO, a device or a socket): expected {kind}")
    return path


def open_user_file(path: str | os.PathLike[str], what: str = "", kind: str = "a file"):
    """A binary file object for a regular file (:func:`check_regular`); opened without blocking, and checked again
    once open, so a FIFO put in its place between the two cannot hang the read."""
    path, label = check_regular(path, what, kind), f"{what}: " if what else ""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError as exc:
        raise UserFileError(f"{label}{path}: cannot be read: {exc.strerror}") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise UserFileError(f"{label}{path} is not a regular file (a FIFO, a device or a socket): expected {kind}")
    return os.fdopen(fd, "rb")


def read_user_text(path: str | os.PathLike[str], what: str = "", kind: str = "a file",
                   limit: int = MAX_FILE_BYTES) -> str:
    """The whole of a regular UTF-8 text file of at most ``limit`` bytes."""
    label = f"{what}: " if what else ""
    with open_user_file(path, what, kind) as f:
        data = f.read(limit + 1)
    if len(data) > limit:
        raise UserFileError(f"{label}{path}: larger than {limit >> 20} MiB: not {kind}")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise UserFileError(f"{label}{path}:{line}: not a text file (invalid UTF-8 at byte {exc.start}): "
                            f"expected {kind}") from None


def parse_json(text: str, where: str, **kw: Any) -> Any:
    """``json.loads(text, **kw)``, its nesting bounded (:data:`MAX_DEPTH`) and its text sendable
    (:func:`unsendable`); ``where`` ("file" or "file:line") starts the error. JSONDecodeError passes through, for
    the caller's own wording."""
    try:
        value = json.loads(text, **kw)
    except RecursionError:
        raise UserFileError(f"{where}: JSON nested deeper than {MAX_DEPTH} levels") from None
    _check_value(value, where, "JSON", text)
    return value


def parse_toml(text: str, where: str) -> dict:
    """``tomllib.loads(text)``, bounded and checked as :func:`parse_json`; TOMLDecodeError passes through."""
    try:
        value = tomllib.loads(text)
    except RecursionError:
        raise UserFileError(f"{where}: TOML nested deeper than {MAX_DEPTH} levels") from None
    _check_value(value, where, "TOML", text)
    return value


def _check_value(value: Any, where: str, kind: str, text: str) -> None:
    """Nesting and sendable text; each walk runs only where ``text`` could hold what it looks for."""
    if sum(map(text.count, "[{")) > MAX_DEPTH and depth(value) > MAX_DEPTH:
        raise UserFileError(f"{where}: {kind} nested deeper than {MAX_DEPTH} levels")
    bad = unsendable(value) if "\\u" in text else None  # a lone surrogate is written as an escape
    if bad:
        raise UserFileError(f"{where}: {bad}: text that cannot be sent (a lone surrogate, not a character UTF-8 "
                            "can encode): fix that text")


def depth(value: Any) -> int:
    """How deep lists and objects nest in ``value`` (a scalar: 0); iterative, so any depth can be measured."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, d = stack.pop()
        if isinstance(item, dict):
            deepest = max(deepest, d)
            stack.extend((v, d + 1) for v in item.values())
        elif isinstance(item, list):
            deepest = max(deepest, d)
            stack.extend((v, d + 1) for v in item)
    return deepest


def first_unsendable(value: Any) -> tuple[str, int, str] | None:
    """The first string (or key) in ``value`` UTF-8 cannot encode (a lone surrogate): (where it is, e.g.
    ``turns[1].content`` or ``"a.b (a key)"``; the character's 0-based index; the character, escaped), else None.
    Iterative, so any depth is walked. The one check every reader of user text and the chat client share."""
    stack: list[tuple[Any, str]] = [(value, "")]
    while stack:
        item, at = stack.pop()
        if isinstance(item, str):
            try:
                item.encode("utf-8")
            except UnicodeEncodeError as exc:
                return at, exc.start, item[exc.start:exc.end].encode("unicode_escape").decode("ascii")
        elif isinstance(item, dict):
            for k, v in reversed(list(item.items())):
                name = f"{at}.{k}" if at else str(k)
                stack.append((v, name))
                stack.append((k, f"{name} (a key)"))
        elif isinstance(item, (list, tuple)):
            stack.extend((v, f"{at}[{i}]") for i, v in reversed(list(enumerate(item))))
    return None


def unsendable(value: Any) -> str | None:
    """Where in ``value`` a string (or key) holds a lone surrogate — "field 'turns[1].content' (character 4)" —
    else None."""
    found = first_unsendable(value)
    if found is None:
        return None
    at, index, _ = found
    if at.endswith(" (a key)"):
        parent = at[:-len(" (a key)")].rpartition(".")[0]
        return f"a key in '{parent or '(top)'}' (character {index + 1})"
    return (f"field '{at}'" if at else "a value") + f" (character {index + 1})"
