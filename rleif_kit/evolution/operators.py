"""Evol-Instruct operators: which ones exist, their direction, and the seeded draw of one per step.

Upward operators make an instruction harder, downward ones easier (WizardMath evolves both ways so
the data spans difficulty levels). The draw for a record depends only on its root id and round, so
a rerun — or a resumed run — makes exactly the same choices, whatever order requests finish in.
"""

from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Operator:
    name: str
    direction: str  # "up" or "down"
    weight: float = 1.0


MATH_OPERATORS = (
    Operator("add_constraint", "up"), Operator("concretize", "up"), Operator("more_steps", "up"),
    Operator("deepen", "up"), Operator("simplify", "down"), Operator("new_topic", "down"),
)
CODE_OPERATORS = (
    Operator("add_requirement", "up"), Operator("rarer_requirement", "up"), Operator("more_reasoning", "up"),
    Operator("misdirection", "up"), Operator("complexity", "up", weight=0.25),  # "rarely", as in WizardCoder
    Operator("simplify", "down"), Operator("new_topic", "down"),
)


def operators_for(domain: str) -> tuple[Operator, ...]:
    return CODE_OPERATORS if domain == "code" else MATH_OPERATORS


def seeded_rng(*parts: object) -> random.Random:
    """A Random seeded from the parts' text, stable across processes (unlike ``hash()``)."""
    digest = hashlib.sha256("\x1f".join(map(str, parts)).encode()).digest()
    return random.Random(int.from_bytes(digest[:8], "big"))


def choose_operator(root_id: str, round_: int, operators: tuple[Operator, ...], up_ratio: float,
                    seed: int = 0) -> Operator:
    """One operator for ``root_id`` in ``round_``: up with probability ``up_ratio``, then by weight."""
    rng = seeded_rng(seed, root_id, round_, "operator")
    direction = "up" if rng.random() < up_ratio else "down"
    pool = [op for op in operators if op.direction == direction] or list(operators)
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
        pool = [op for op in operators if op.direction == direction and op not in chosen]
        pool = pool or [op for op in operators if op not in chosen]
        chosen.append(rng.choices(pool, weights=[op.weight for op in pool])[0])
    return chosen


def child_id(root_id: str, round_: int, operator: str) -> str:
    """Deterministic id of an evolved record: from its root, its round and its operator."""
    return f"{root_id}-r{round_}-{operator}"


def load_templates(prompts_dir: Path, domain: str) -> dict[str, str]:
    """Operator name → template text (with ``{instruction}``), from ``<prompts_dir>/<domain>/<name>.txt``."""
    folder = Path(prompts_dir) / domain
    templates = {}
    for op in operators_for(domain):
        path = folder / f"{op.name}.txt"
        if not path.exists():
            raise FileNotFoundError(f"operator template missing: {path}")
        text = path.read_text(encoding="utf-8")
        if "{instruction}" not in text:
            raise ValueError(f"{path}: the template must contain {{instruction}}")
        templates[op.name] = text
    return templates
