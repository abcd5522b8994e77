"""Sandbox slots: each program running at once in this process holds one slot, and each slot its own uid.

Why: when the evaluator runs as root, a program runs under an unprivileged uid of its own, so its process limit
counts only it and every process it leaves behind can be found and killed by uid. Two programs sharing a uid at
once would share that limit, and one's cleanup would kill the other. So slots come from one pool per process
(evaluation, PPO's scorer and an evolution's test check may all run programs from different threads), and each
slot's uid is claimed once with a file lock no other evaluator on the machine can take.
"""

from __future__ import annotations

import os
import threading

UID_BASE = 60100  # per-slot uids start here; uids that have a passwd entry are skipped

_free_slots: set[int] = set()
_slot_count = 0
_SLOT_LOCK = threading.Lock()


def _acquire_slot() -> int:
    """The lowest slot no run of this process holds (a new one when all are busy)."""
    global _slot_count
    with _SLOT_LOCK:
        if _free_slots:
            slot = min(_free_slots)
            _free_slots.discard(slot)
            return slot
        _slot_count += 1
        return _slot_count - 1


def _release_slot(slot: int) -> None:
    with _SLOT_LOCK:
        _free_slots.add(slot)


_slot_uids: dict[int, int] = {}
_held_locks: list[int] = []
_UID_LOCK = threading.Lock()


def _slot_uid(slot: int) -> int:
    """This process's uid for ``slot``: claimed once, held (by a file lock) until the process exits."""
    with _UID_LOCK:
        if slot not in _slot_uids:
            _slot_uids[slot] = _claim_uid(set(_slot_uids.values()))
        return _slot_uids[slot]


def _claim_uid(taken: set[int]) -> int:
    """The first uid from UID_BASE with no passwd entry (no real user is ever touched) that no other
    evaluator on this machine holds: two evaluations at once must not share a uid, or one's process
    limit and leftover cleanup would hit the other's programs."""
    import fcntl
    import pwd
    import tempfile

    for uid in range(UID_BASE, UID_BASE + 4096):
        if uid in taken:
            continue
        try:
            pwd.getpwuid(uid)
            continue
        except KeyError:
            pass
        lock = os.path.join(tempfile.gettempdir(), f"rleif-sandbox-uid-{uid}.lock")
        fd = os.open(lock, os.O_CREAT | os.O_RDWR | getattr(os, "O_NOFOLLOW", 0), 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            continue
        _held_locks.append(fd)
        return uid
    raise RuntimeError(f"no free sandbox uid in {UID_BASE}..{UID_BASE + 4095}")
