"""Evol-Instruct operators: the seeded draw of one per step (a world says which exist: ``World.operators``).

Upward operators make an instruction harder, downward ones easier (WizardMath evolves both ways so
the data spans difficulty levels). The draw for a record depends only on its root id and round, so
a rerun — or a resumed run — makes exactly the same choices, whatever order requests finish in.
"""

from __future__ import annotations

import hashlib
import random

from rleif_kit.worlds.base import Operator, reweighted  # noqa: F401 - the stages draw from reweighted()


def seeded_rng(*parts: object) -> random.Random:
    """A Random seeded from the parts' text, stable across processes (unlike ``hash()``)."""
    digest = hashlib.sha256("\x1f".join(map(str, parts)).encode()).digest()
    return random.Random(int.from_bytes(digest[:8], "big"))


def _pool(operators, direction: str, chosen=()) -> list[Operator]:
    """The operators of ``direction`` (in-breadth ones count for both), else any, none already chosen."""
    pool = [op for op in operators if op.direction in (direction, "breadth") and op not in chosen]
    return pool or [op for op in operators if op not in chosen]


def choose_operator(root_id: str, round_: int, operators: tuple[Operator, ...], up_ratio: float,
                    seed: int = 0) -> Operator:
    """One operator for ``root_id`` in ``round_``: up with probability ``up_ratio``, then by weight."""
    rng = seeded_rng(seed, root_id, round_, "operator")
    direction = "up" if rng.random() < up_ratio else "down"
    pool = _pool(operators, direction)
    return rng.choices(pool, weights=[op.weight for op in pool])[0]


def distinct_operators(root_id: str, round_: int, operators: tuple[Operator, ...], k: int, up_ratio: float,
                       seed: int = 0) -> list[Operator]:
    """``k`` different operators for a fan-out (the sibling sets IRM rankings are built from)."""
    if k > len(operators):
        raise ValueError(f"fan-out of {k} needs {k} distinct operators; only {len(operators)} exist")
    rng = seeded_rng(seed, root_id, round_, "fanout")
    chosen: list[Operator] = []
    while len(chosen) < k:
        direction = "up" if rng.random() < up_ratio else "down"
        pool = _pool(operators, direction, chosen)
        chosen.append(rng.choices(pool, weights=[op.weight for op in pool])[0])
    return chosen


def child_id(root_id: str, round_: int, operator: str) -> str:
    """Deterministic id of an evolved record: from its root, its round and its operator."""
    return f"{root_id}-r{round_}-{operator}"
