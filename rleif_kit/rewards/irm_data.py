"""Preference pairs for the instruction reward model (IRM), from sibling sets of evolved variants.

A fan-out (``evolution.fanout.run_fanout``) evolves one instruction into k variants with distinct operators.
A judge ranks each sibling set on definition (clear and complete), precision (solvable, unambiguous)
and integrity (consistent, no leaked template text); a ranking of k becomes k·(k-1)/2 pairs.

On the arithmetic world the judge is programmatic (``arith_quality``): the evolver records the
defect it injected, so quality is known exactly — the CPU demo gets real labels without an endpoint.
Variants of equal quality give no pair (there is no preference to learn between them).
"""

from __future__ import annotations

from itertools import combinations
from typing import Sequence

from rleif_kit.core.reward_math import balance_pairs

# Weights of the arithmetic judge: garbled text or a refusal is worst, then leaked template wording or
# an unchanged copy (integrity), then an unsolvable or ambiguous problem, then one outside the
# configured complexity range. Eliminated variants take part: they are the clearest negatives.
FORMED, NO_LEAK, SOLVABLE, IN_RANGE = 8, 4, 2, 1


def arith_quality(record: dict, min_steps: int = 1, max_steps: int = 5) -> int:
    """Quality score of one arithmetic variant (higher is better), from what the evolver recorded."""
    defect = record.get("defect")
    problem = record.get("problem")
    well_formed = problem is not None and defect not in ("malformed", "refusal")
    steps = len(problem["ops"]) if problem else 0
    return (FORMED * well_formed + NO_LEAK * (defect not in ("leaked_template", "no_change"))
            + SOLVABLE * (record.get("answer") is not None and defect not in ("unsolvable", "ambiguous"))
            + IN_RANGE * (min_steps <= steps <= max_steps))


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


def arith_irm_pairs(fanout: Sequence[dict], min_steps: int = 1, max_steps: int = 5, seed: int = 0) -> list[dict]:
    """Pairs from every sibling group of a fan-out, deduplicated and balanced across operators."""
    groups: dict[str, list[dict]] = {}
    for r in fanout:
        groups.setdefault(r["sibling_group"], []).append(r)
    pairs = []
    for siblings in groups.values():
        siblings = sorted(siblings, key=lambda r: r["id"])
        pairs += pairs_from_scores(siblings, [arith_quality(r, min_steps, max_steps) for r in siblings])
    return balance_pairs(pairs, key="operator", seed=seed)
