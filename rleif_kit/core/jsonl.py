"""Crash-safe, append-only JSONL: the on-disk format of every long-running stage.

Why: a 15k-instruction evolution run that dies at 40% must resume, not start over, and a SIGKILL
(or a closed laptop) at any moment must leave neither a corrupt file nor a duplicated id.  The
rules that give that:

* :class:`JsonlWriter` writes each record as ONE ``os.write`` of ``json + "\\n"`` on an unbuffered
  file, so a record is in the file (page cache, survives a killed process) as soon as ``write``
  returns; ``os.fsync`` every ``fsync_every`` records bounds what a power loss can take.
* The only damage a crash can do is a torn LAST line.  :func:`read_jsonl` ignores it and
  :func:`repair_torn_tail` (run by every writer before appending) removes it, so the reader and
  the writer agree on which records exist: a resumed run redoes exactly the torn one.
* A last line without its newline that still parses as a whole JSON object is the complete
  record (a prefix of an object is never valid JSON), so it is kept and the newline is added.
* A write that runs out of space stops with one line naming the file (``core.disk``, exit 5); what it wrote
  of the record is a torn tail, repaired as above by the rerun.
* A bad line anywhere else is real corruption, not a crash: :func:`read_jsonl` raises naming
  ``file:line`` instead of silently dropping data.

Resume pattern::

    done = read_ids(path)
    with JsonlWriter(path) as out:
        for rec in todo:
            if rec["id"] not in done:
                out.write(process(rec))
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Iterable, Iterator

from rleif_kit.core.disk import writing
from rleif_kit.core.user_files import UserFileError, open_user_file, parse_json

__all__ = ["JsonlWriter", "read_jsonl", "repair_torn_tail", "read_ids", "write_jsonl", "read_user_jsonl",
           "UserFileError", "KitFileError"]

_CHUNK = 1 << 16


class KitFileError(ValueError):
    """A file the kit writes is not a file (a directory stands at its path, or a file at its folder's): one line
    naming the path and the fix, instead of a traceback from deep inside a stage."""


def kit_file_error(path: str | os.PathLike[str]) -> KitFileError:
    """The error for a kit file whose path is taken by something else (see :class:`KitFileError`)."""
    path = Path(path)
    if path.is_dir():
        return KitFileError(f"{path} is a directory, where the kit keeps a file: move that directory away (or delete "
                            "it) and rerun; the kit makes the file again")
    blocker = next((p for p in path.parents if p.exists() and not p.is_dir()), path.parent)
    return KitFileError(f"{blocker} is a file, where the kit needs a directory (for {path.name}): move that file "
                        "away (or delete it) and rerun")


class JsonlWriter:
    """Append records to ``path``, one JSON object per line; a context manager.

    The parent directory is created; a torn tail left by an earlier crash is repaired first, so
    the first new record starts on its own line.
    """

    def __init__(self, path: str | os.PathLike[str], fsync_every: int = 500):
        if not isinstance(fsync_every, int) or fsync_every < 1:
            raise ValueError(f"fsync_every must be an integer >= 1, got {fsync_every!r}")
        self.path = Path(path)
        self.fsync_every = fsync_every
        self.count = 0  # records written by this writer
        try:
            with writing(self.path):
                self.path.parent.mkdir(parents=True, exist_ok=True)
                created = not self.path.exists()
                self.repaired = repair_torn_tail(self.path)
                self._fd: int | None = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        except (IsADirectoryError, NotADirectoryError, FileExistsError):
            raise kit_file_error(self.path) from None
        if created:
            _fsync_dir(self.path.parent)

    def write(self, record: dict) -> None:
        """Append one record (written through to the OS before returning)."""
        if self._fd is None:
            raise ValueError(f"{self.path}: write to a closed JsonlWriter")
        line = (json.dumps(record, ensure_ascii=False) + "\n").encode("utf-8")
        view = memoryview(line)
        with writing(self.path):  # a full disk: one line; the part written is a torn tail the rerun repairs
            while view:  # os.write may write less than asked (rare, e.g. a full disk or a signal)
                view = view[os.write(self._fd, view):]
            self.count += 1
            if self.count % self.fsync_every == 0:
                os.fsync(self._fd)

    def close(self) -> None:
        """Flush to disk (fsync) and close; closing twice is harmless."""
        if self._fd is None:
            return
        fd, self._fd = self._fd, None
        try:
            with writing(self.path):
                os.fsync(fd)
        finally:
            os.close(fd)

    def __enter__(self) -> "JsonlWriter":
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def read_jsonl(path: str | os.PathLike[str]) -> Iterator[dict]:
    """Stream the records of ``path``; a missing file yields nothing.

    A torn last line (cut short, or not valid JSON) is skipped; a bad line before the last one
    raises ``ValueError("<file>:<line>: ...")``.  Blank lines are skipped.
    """
    path = Path(path)
    try:
        f = open(path, "rb")
    except FileNotFoundError:
        return
    except (IsADirectoryError, NotADirectoryError):
        raise kit_file_error(path) from None
    with f:
        pending: tuple[int, bytes] | None = None  # a bad line, fatal only if another line follows
        for lineno, raw in enumerate(f, start=1):
            if pending is not None:  # a line follows the bad one, so it was not a torn tail
                _raise_bad_line(path, *pending)
            if not raw.strip():
                continue
            record = _parse(raw)
            if record is None:
                pending = (lineno, raw)
            else:
                yield record


MAX_LINE_BYTES = 64 << 20  # one record of a user's file; a longer "line" is a binary or a one-line dump


def read_user_jsonl(path: str | os.PathLike[str], what: str = "") -> Iterator[tuple[str, dict]]:
    """``("file:line", record)`` for each non-blank line of a JSONL file the USER gave: strict, no line skipped.

    The checkpoint reader's tolerance for a torn last line (:func:`read_jsonl`) is for files the kit wrote
    itself; an input file with a broken line, even the last, is simply broken. Raises UserFileError, naming the
    file (and ``what`` it is for), for: a missing path, a directory, a FIFO or device (``core/user_files.py``), a
    line that is not UTF-8 text, not JSON, nested deeper than 64 levels, not a JSON object, longer than 64 MiB, or
    holding text that cannot be sent (a lone surrogate: named by its field, before anything is sent).
    """
    path = Path(path)
    label = f"{what}: " if what else ""
    f = open_user_file(path, what, "a JSONL file")
    with f:
        lineno = 0
        while True:
            raw = f.readline(MAX_LINE_BYTES + 1)
            if not raw:
                return
            lineno += 1
            where = f"{path}:{lineno}"
            if len(raw) > MAX_LINE_BYTES:
                raise UserFileError(f"{where}: a line longer than {MAX_LINE_BYTES >> 20} MiB: not a JSONL file "
                                    "(one JSON object per line)")
            if not raw.strip():
                continue
            if b"\x00" in raw:
                raise UserFileError(f"{where}: NUL bytes: a binary file, not JSONL text (one JSON object per line)")
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise UserFileError(f"{where}: not UTF-8 text (byte {exc.start} of the line): expected one JSON "
                                    "object per line") from None
            try:
                record = parse_json(text, f"{label}{where}")
            except UserFileError:
                raise
            except ValueError as exc:
                hint = " (a JSON array is not JSONL: one object per line)" if lineno == 1 and \
                    text.lstrip().startswith("[") else ""
                raise UserFileError(f"{where}: invalid JSON ({exc}){hint}") from None
            if not isinstance(record, dict):
                hint = " (a JSON array is not JSONL: one object per line)" if isinstance(record, list) else ""
                raise UserFileError(f"{where}: expected a JSON object, got {type(record).__name__}{hint}")
            yield where, record


def _parse(raw: bytes) -> dict | None:
    """The JSON object on one line, or None when the line is not one."""
    try:
        record = json.loads(raw)
    except ValueError:  # JSONDecodeError, and UnicodeDecodeError for a cut multi-byte character
        return None
    return record if isinstance(record, dict) else None


def _raise_bad_line(path: Path, lineno: int, raw: bytes) -> None:
    try:
        json.loads(raw)
        reason = "not a JSON object"
    except ValueError as exc:
        reason = f"invalid JSON ({exc})"
    raise ValueError(f"{path}:{lineno}: {reason}; only the last line of a JSONL file may be damaged "
                     f"(a torn write), so this file is corrupt: fix or delete that line")


def repair_torn_tail(path: str | os.PathLike[str]) -> bool:
    """Cut a damaged last line off ``path``; True when the file was changed.

    Damaged = no trailing newline, or not a JSON object.  A last line that is a complete JSON
    object but lacks its newline gets the newline instead (it is the whole record).
    """
    path = Path(path)
    try:
        f = open(path, "r+b")
    except FileNotFoundError:
        return False
    except (IsADirectoryError, NotADirectoryError):
        raise kit_file_error(path) from None
    with f:
        size = f.seek(0, os.SEEK_END)
        if size == 0:
            return False
        start = _last_line_start(f, size)
        f.seek(start)
        last = f.read()
        if last.strip() and _parse(last) is None:
            f.truncate(start)
        elif not last.endswith(b"\n"):
            f.write(b"\n")
        else:
            return False
        f.flush()
        os.fsync(f.fileno())
        return True


def _last_line_start(f: Any, size: int) -> int:
    """Offset where the last line starts (ignoring a newline in the very last byte)."""
    end = size - 1  # the final byte may be the last line's own newline
    while end > 0:
        begin = max(0, end - _CHUNK)
        f.seek(begin)
        cut = f.read(end - begin).rfind(b"\n")
        if cut >= 0:
            return begin + cut + 1
        end = begin
    return 0


def read_ids(path: str | os.PathLike[str], key: str = "id") -> set[str]:
    """The ``key`` values (as strings) of the records in ``path``: what a resumed run skips."""
    return {str(record[key]) for record in read_jsonl(path) if key in record}


def write_jsonl(path: str | os.PathLike[str], records: Iterable[dict]) -> None:
    """Write a whole file atomically (temp file + ``os.replace``): for small derived files.

    A crash leaves either the old file or the new one, never half of the new one.
    """
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        raise kit_file_error(path) from None
    if path.is_dir():
        raise kit_file_error(path)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        with writing(path), open(tmp, "w", encoding="utf-8", newline="\n") as f:
            for record in records:
                f.write(json.dumps(record, ensure_ascii=False) + "\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    _fsync_dir(path.parent)


def _fsync_dir(directory: Path) -> None:
    """Make a new directory entry durable (POSIX); a no-op where directories cannot be opened."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
