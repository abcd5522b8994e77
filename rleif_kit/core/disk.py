"""A full disk, said in one line: the path being written, the free space there and, when known, the space needed.

A write that runs out of space surfaces in three shapes: Python's ``OSError`` with errno 28 (ENOSPC, or 122, a
quota), sqlite's ``OperationalError: database or disk is full``, and torch's writer's ``RuntimeError: [enforce fail
at inline_container.cc:...] . unexpected pos ...``, which carries no errno. The writers of checkpoints, models,
caches and records wrap their writes in :func:`writing`, which turns each shape into
:class:`~rleif_kit.core.exits.DiskFull` (exit 5). Torch's is told by the free space left after it failed, not by its
text alone: a writer's failure with room to spare keeps its own traceback.
"""

from __future__ import annotations

import errno
import os
import shutil
import sqlite3
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator

from rleif_kit.core.exits import DiskFull

__all__ = ["DiskFull", "writing", "out_of_space", "disk_full", "unnamed", "free_there", "free_bytes", "size_of"]

#: after torch's writer failed, less free space than this (or than the write needed) means the disk was full
LOW_SPACE = 64 << 20
_ERRNOS = (errno.ENOSPC, errno.EDQUOT)
_TORCH_WRITER = ("inline_container", "PytorchStreamWriter", "unexpected pos")


def free_bytes(path: str | os.PathLike[str]) -> int | None:
    """Free bytes on the file system holding ``path`` (or its nearest existing folder); None when unknown."""
    p = Path(path).absolute()
    for candidate in (p, *p.parents):
        try:
            return shutil.disk_usage(candidate).free
        except OSError:
            continue
    return None


def size_of(path: str | os.PathLike[str]) -> int:
    """Bytes in the file at ``path``, or in every file under the folder at ``path``; 0 when there is none."""
    p = Path(path)
    try:
        if p.is_file():
            return p.stat().st_size
        return sum(f.stat().st_size for f in p.rglob("*") if f.is_file())
    except OSError:
        return 0


def _size(n: int) -> str:
    return f"{n / (1 << 30):.1f} GiB" if n >= 10 << 30 else f"{n / (1 << 20):.0f} MiB"


def _shown(path: Path) -> str:
    try:
        return str(path.absolute().relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def free_there(path: str | os.PathLike[str]) -> str:
    """``"12 MiB free there"`` for the file system holding ``path``."""
    free = free_bytes(path)
    return f"{_size(free)} free there" if free is not None else "free space unknown"


def disk_full(path: str | os.PathLike[str], needed: int | None = None) -> DiskFull:
    """The one-line error for a write to ``path`` that ran out of space (``needed``: bytes the write takes)."""
    need = f"; it needs about {_size(needed)}" if needed else ""
    return DiskFull(f"no space left on device writing {_shown(Path(path))} ({free_there(path)}{need}): free some "
                    "space and rerun; what was written before is kept and the stage resumes")


def out_of_space(err: BaseException, path: str | os.PathLike[str] | None = None, needed: int | None = None) -> bool:
    """Whether ``err`` (or an error it came from) is a write that ran out of space. Torch's writer says only
    "unexpected pos": that counts when less than ``max(needed, LOW_SPACE)`` is free at ``path`` after it."""
    seen: list[BaseException] = []
    e: BaseException | None = err
    while e is not None and len(seen) < 8 and not any(e is s for s in seen):
        seen.append(e)
        if isinstance(e, OSError) and e.errno in _ERRNOS:
            return True
        if isinstance(e, sqlite3.DatabaseError) and (getattr(e, "sqlite_errorname", "") == "SQLITE_FULL"
                                                     or "disk is full" in str(e)):
            return True
        if isinstance(e, RuntimeError) and path is not None and any(t in str(e) for t in _TORCH_WRITER):
            free = free_bytes(path)
            return free is not None and free < max(needed or 0, LOW_SPACE)
        e = e.__cause__ or e.__context__
    return False


@contextmanager
def writing(path: str | os.PathLike[str] | Callable[[], str | os.PathLike[str]],
            needed: int | Callable[[], int | None] | None = None) -> Iterator[None]:
    """Run a write to ``path``; running out of space raises :class:`DiskFull` naming it (or the file the error
    names, when that lies elsewhere). ``path`` and ``needed`` (the bytes the write takes) may be functions, asked
    only after a failure (e.g. the checkpoint a Trainer was saving when it failed)."""
    try:
        yield
    except DiskFull:
        raise
    except (OSError, RuntimeError, sqlite3.DatabaseError) as err:
        where = Path(path() if callable(path) else path)
        size = needed() if callable(needed) else needed
        if not out_of_space(err, where, size):
            raise
        named = getattr(err, "filename", None)  # a file elsewhere (not ``path``'s, nor its temp sibling's) is named
        if isinstance(named, (str, os.PathLike)) and where.absolute() not in Path(named).absolute().parents \
                and Path(named).absolute().parent != where.absolute().parent:
            where = Path(named)
        raise disk_full(where, size) from err


def unnamed(err: BaseException) -> DiskFull | None:
    """For a write that no :func:`writing` wrapped: the one-line error when ``err`` ran out of space (naming the file
    when the error does), else None."""
    if isinstance(err, DiskFull) or not out_of_space(err):
        return err if isinstance(err, DiskFull) else None
    named = getattr(err, "filename", None)
    if isinstance(named, (str, os.PathLike)):
        return disk_full(named)
    return DiskFull(f"no space left on device ({err}): free some space and rerun; what was written before is kept "
                    "and the stage resumes")
