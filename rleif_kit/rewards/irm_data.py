"""Preference pairs for the instruction reward model (IRM), from sibling sets of evolved variants.

A fan-out (``evolution.fanout.run_fanout``) evolves one instruction into k variants with distinct operators.
A judge ranks each sibling set on definition (clear and complete), precision (solvable, unambiguous)
and integrity (consistent, no leaked template text); a ranking of k becomes k·(k-1)/2 pairs.

On a programmatic world (the arithmetic one) the judge is the world's ``sibling_quality``: the evolver records the
defect it injected, so quality is known exactly — the CPU demo gets real labels without an endpoint.
Variants of equal quality give no pair (there is no preference to learn between them).
"""

from __future__ import annotations

from itertools import combinations
from typing import Any, Callable, Sequence

from rleif_kit.core.reward_math import balance_pairs

def pairs_from_scores(siblings: Sequence[dict], scores: Sequence[float]) -> list[dict]:
    """Every (better, worse) pair of a sibling set; ties give no pair."""
    pairs = []
    for (a, sa), (b, sb) in combinations(zip(siblings, scores), 2):
        if sa == sb:
            continue
        chosen, rejected = (a, b) if sa > sb else (b, a)
        pairs.append({"group": chosen.get("sibling_group"), "chosen": chosen["id"], "rejected": rejected["id"],
                      "chosen_text": chosen["text"], "rejected_text": rejected["text"],
                      "operator": chosen["operator"]})
    return pairs


def programmatic_judge(cfg: Any, world: Any) -> bool:
    """Whether the IRM's sibling rankings come from the world's own judge (its evolver made them offline)."""
    return world.evolves_offline(cfg)


def quality_pairs(fanout: Sequence[dict], quality: Callable[[dict], float], seed: int = 0) -> list[dict]:
    """Pairs from every sibling group of a fan-out, by a programmatic judge's ``quality`` of each sibling,
    deduplicated and balanced across operators."""
    groups: dict[str, list[dict]] = {}
    for r in fanout:
        groups.setdefault(r["sibling_group"], []).append(r)
    pairs = []
    for siblings in groups.values():
        siblings = sorted(siblings, key=lambda r: r["id"])
        pairs += pairs_from_scores(siblings, [quality(r) for r in siblings])
    return balance_pairs(pairs, key="operator", seed=seed)
