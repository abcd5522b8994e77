"""The Trainer's checkpoints (``checkpoint-N/``): the last complete one to resume from, an incomplete one set aside.

transformers writes a checkpoint's files in order and ``trainer_state.json`` last, so a folder whose state file is
missing or does not parse was cut short (a full disk, a kill mid-save). Its own ``get_last_checkpoint`` takes the
highest N regardless, and every rerun then fails on it; :func:`resume_checkpoint` moves such a folder aside to
``incomplete-checkpoint-N`` (a name the Trainer neither resumes from nor rotates away), says so, and returns the
last complete one. :func:`needed_bytes` sizes a checkpoint for the full-disk line.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from rleif_kit.core import distributed as dist
from rleif_kit.core.disk import size_of

_NAME = re.compile(r"^checkpoint-(\d+)$")
STATE = "trainer_state.json"  # written last of a checkpoint's files (transformers' Trainer._save_checkpoint)


def _checkpoints(directory: Path) -> list[tuple[int, Path]]:
    """``(N, folder)`` of every ``checkpoint-N`` folder in ``directory``, highest N first."""
    if not directory.is_dir():
        return []
    found = [(int(m.group(1)), p) for p in directory.iterdir() if (m := _NAME.match(p.name)) and p.is_dir()]
    return sorted(found, reverse=True)


def complete(folder: Path) -> bool:
    """A checkpoint the Trainer finished writing: its ``trainer_state.json`` is there and is a JSON object."""
    try:
        return isinstance(json.loads((folder / STATE).read_text(encoding="utf-8")), dict)
    except (OSError, ValueError):
        return False


def _aside(folder: Path) -> Path:
    target, n = folder.with_name(f"incomplete-{folder.name}"), 1
    while target.exists():
        n += 1
        target = folder.with_name(f"incomplete-{folder.name}-{n}")
    return target


def resume_checkpoint(directory: Path) -> str | None:
    """The last complete checkpoint in ``directory`` (None: start afresh). On the main rank every incomplete one
    above it is renamed ``incomplete-checkpoint-N`` with a printed note; the other ranks pass over them (call it
    under ``dist.main_first()`` where several ranks run)."""
    for step, folder in _checkpoints(directory):
        if complete(folder):
            return str(folder)
        if dist.is_main():
            target = _aside(folder)
            folder.rename(target)
            print(f"note: {folder} is incomplete (no readable {STATE}: its save was cut short); moved to "
                  f"{target.name}, resuming from the last complete checkpoint")
    return None


def needed_bytes(directory: Path) -> int | None:
    """About what one more checkpoint in ``directory`` takes: the size of the last complete one (None: none yet)."""
    done = next((folder for _, folder in _checkpoints(directory) if complete(folder)), None)
    return size_of(done) or None if done is not None else None
