"""The held-out splits of the reward models: whole sibling groups (IRM) and whole questions (PRM), so a
reward model is never measured on what it trained on. 04 trains on one side; 04 and 07 score the other."""

from __future__ import annotations

import random
from typing import Sequence


def split_by_group(pairs: Sequence[dict], heldout_share: float, seed: int) -> tuple[list[dict], list[dict]]:
    """Hold out whole sibling groups, so held-out accuracy measures unseen instructions."""
    groups = sorted({str(p["group"]) for p in pairs})
    random.Random(seed).shuffle(groups)
    held = set(groups[: max(1, round(len(groups) * heldout_share))]) if groups else set()
    return [p for p in pairs if str(p["group"]) not in held], [p for p in pairs if str(p["group"]) in held]


def split_by_question(examples: Sequence[dict], heldout_share: float, seed: int) -> tuple[list[dict], list[dict]]:
    """Hold out whole questions: a PRM must not be measured on a question it trained on."""
    return split_by_group([{**e, "group": e["question"]} for e in examples], heldout_share, seed)
