"""Preference pairs for the instruction reward model (IRM), from sibling sets of evolved variants.

A fan-out (``evolve.fanout.run_fanout``) evolves one instruction into k variants with distinct operators.
A judge ranks each sibling set on definition (clear and complete), precision (solvable, unambiguous)
and integrity (consistent, no leaked template text); a ranking of k becomes k·(k-1)/2 pairs.

On a programmatic world (the arithmetic one) the judge is the world's ``sibling_quality``: the evolver records the
defect it injected, so quality is known exactly — the CPU demo gets real labels without an endpoint.
Variants of equal quality give no pair (there is no preference to learn between them). A judged ranking
becomes pairs by :func:`ranking_to_pairs`; :func:`balance_pairs` keeps one operator from winning by its template.
"""

from __future__ import annotations

import random
from itertools import combinations
from typing import Any, Callable, Sequence


def pairs_from_scores(siblings: Sequence[dict], scores: Sequence[float]) -> list[dict]:
    """Every (better, worse) pair of a sibling set; ties give no pair."""
    pairs = []
    for (a, sa), (b, sb) in combinations(zip(siblings, scores), 2):
        if sa == sb:
            continue
        chosen, rejected = (a, b) if sa > sb else (b, a)
        pairs.append(sibling_pair(chosen, rejected))
    return pairs


def sibling_pair(chosen: dict, rejected: dict) -> dict:
    """One preference pair of two siblings in TRL's preference format: the texts in ``chosen`` / ``rejected`` (what
    the IRM scores, no prompt around them), the variant ids beside them in ``chosen_id`` / ``rejected_id``."""
    return {"group": chosen.get("sibling_group"), "chosen": chosen["text"], "rejected": rejected["text"],
            "chosen_id": chosen["id"], "rejected_id": rejected["id"], "operator": chosen["operator"]}


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


def ranking_to_pairs(ranked_ids: Sequence[str]) -> list[tuple[str, str]]:
    """Every (chosen, rejected) pair a best-first ranking implies: k items give k(k-1)/2.

    A repeated id would make a pair of an item with itself (or contradict the order), so it
    raises instead of producing a pair the reward model cannot learn from.
    """
    ids = list(ranked_ids)
    if len(set(ids)) != len(ids):
        raise ValueError(f"ranking repeats an id: {ids}")
    return [(ids[i], ids[j]) for i in range(len(ids)) for j in range(i + 1, len(ids))]


def balance_pairs(pairs: list[dict], key: str = "operator", seed: int = 0) -> list[dict]:
    """Dedupe (chosen, rejected) pairs, then cap each ``key`` group at 2x the smallest group.

    ``key`` names the chosen item's evolution operator. If one operator's variants win most
    pairs, the IRM can score well by recognising that operator's template instead of judging
    the instruction. Capping at the *smallest* group would make them exactly even but throw
    most data away when one operator is rare; 2x keeps the imbalance too small to be a
    shortcut while keeping far more pairs. The sample is seeded and keeps the input order.
    Pairs without ``key`` form one group of their own (``None``).
    """
    seen, unique = set(), []
    for pair in pairs:
        ident = (pair["chosen_id"], pair["rejected_id"])
        if ident not in seen:
            seen.add(ident)
            unique.append(pair)
    groups: dict[object, list[int]] = {}
    for i, pair in enumerate(unique):
        groups.setdefault(pair.get(key), []).append(i)
    if not groups:
        return []
    cap = 2 * min(len(idx) for idx in groups.values())
    rng, keep = random.Random(seed), set()
    for name in sorted(groups, key=str):  # fixed order, so the seed alone decides the sample
        idx = groups[name]
        keep.update(idx if len(idx) <= cap else rng.sample(idx, cap))
    return [p for i, p in enumerate(unique) if i in keep]
