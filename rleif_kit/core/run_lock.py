"""One run per output directory: an advisory lock (``<output_dir>/.rleif.lock``) held while a command writes there.

Two ``rleif run`` (or ``rleif evolve``, ``python -m rleif_kit.sft`` ...) on one output directory would both
resume from the same files and write every id twice. The first takes an exclusive ``flock`` on the lock file
and writes who it is (pid, start time, command); the second fails at once with one line naming them. The
kernel drops a ``flock`` when its process ends, however it ends, so a lock left by a killed run is free and the
next run takes it over; the file's stale text is then rewritten.

Who takes it: ``rleif run`` for the whole run, and every stage command run from a shell (``run_entry_point``
and ``rleif evolve/eval`` switch :data:`LOCK_ON_SETUP` on, and ``setup()`` then locks). The processes a
holder starts — the notebooks' kernels, accelerate's ranks — inherit ``RLEIF_RUN_LOCK`` naming the held
directory and do not lock again. Notebooks opened by hand in JupyterLab do not lock (a kernel lives on after
its cells ran, and would hold the directory for as long).
"""

from __future__ import annotations

import fcntl
import json
import os
import sys
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Iterator

LOCK_FILE = ".rleif.lock"
ENV = "RLEIF_RUN_LOCK"
LOCK_ON_SETUP = False  # set by the shell entry points: setup() then takes the lock for the process's lifetime
_held: dict[Path, int] = {}  # directory -> open descriptor holding its lock


class RunLocked(RuntimeError):
    """Another live process holds the output directory."""


def _inherited(output_dir: Path) -> bool:
    held = os.environ.get(ENV)
    if not held:
        return False
    held_dir = Path(held)
    return output_dir == held_dir or held_dir in output_dir.parents


def acquire(output_dir: str | Path, command: str | None = None) -> None:
    """Lock ``output_dir`` for this process (a no-op when this process, or the run that started it, holds it).
    Raises RunLocked naming the holder when another process does."""
    out = Path(output_dir).resolve()
    if out in _held or _inherited(out):
        return
    out.mkdir(parents=True, exist_ok=True)
    fd = os.open(out / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = _describe(os.read(fd, 4096))
        os.close(fd)
        raise RunLocked(f"{out} is in use by another run ({holder}): wait for it to finish, or give this run "
                        "another [base] output_dir") from None
    info = {"pid": os.getpid(), "started": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "command": command or " ".join([Path(sys.argv[0]).name, *sys.argv[1:]])}
    os.ftruncate(fd, 0)
    os.pwrite(fd, (json.dumps(info) + "\n").encode(), 0)
    _held[out] = fd
    os.environ[ENV] = str(out)  # the kernels and ranks this process starts share the lock


def release(output_dir: str | Path) -> None:
    out = Path(output_dir).resolve()
    fd = _held.pop(out, None)
    if fd is not None:
        os.close(fd)  # closing drops the flock; the file stays (unlinking it would race a waiting run)
        if os.environ.get(ENV) == str(out):
            del os.environ[ENV]


@contextmanager
def locking(enabled: bool = True) -> Iterator[None]:
    """For one shell command: ``setup()`` locks the output directory (when ``enabled``); every lock taken inside
    is released at the end, so a process that runs several commands (a test session) holds nothing after."""
    global LOCK_ON_SETUP
    before, held_before = LOCK_ON_SETUP, set(_held)
    LOCK_ON_SETUP = enabled
    try:
        yield
    finally:
        LOCK_ON_SETUP = before
        for directory in set(_held) - held_before:
            release(directory)


def _describe(raw: bytes) -> str:
    try:
        info = json.loads(raw.decode("utf-8"))
        return f"pid {info['pid']}, started {info['started']}: {info['command']}"
    except (ValueError, KeyError, TypeError):
        return "a process that has not written its name yet"
