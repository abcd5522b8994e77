"""What the reward models learn from, saved as JSON Lines datasets beside them in ``04_reward_models/``.

``irm_pairs.jsonl`` — one preference pair of sibling instructions per line, in TRL's preference format with an
implicit prompt (what the IRM's RewardTrainer sees; a TRL user hands the file to ``RewardTrainer`` as it is):

- ``chosen``, ``rejected``: the instruction texts of the better and the worse variant, which the IRM scores (no
  prompt around them: the instruction is what is judged, so there is no ``prompt`` column)
- ``chosen_id``, ``rejected_id``: their variant ids (records of ``irm_fanout.jsonl``); not TRL's tokenised
  ``chosen_ids`` / ``rejected_ids``
- ``id``: ``<chosen_id>><rejected_id>``, the pair's two variant ids
- ``group``: the sibling group (the id of the instruction the variants were evolved from)
- ``operator``: the evolution operator of the chosen variant (pairs are balanced across operators)
- ``split``: ``train`` or ``heldout`` (held-out pairs come from sibling groups never trained on)

``prm_steps.jsonl`` — one labelled solution per line, in TRL's stepwise-supervision format (what the PRM's Trainer
sees):

- ``prompt``: the question (the kit's PRM reads it inside the policy's prompt template, as PPO shows it)
- ``completions``: the solution cut where the run's world ends each step (the last one runs to the end: through the
  answer line of a step-by-step solution, the rest of a program's response)
- ``labels``: one boolean per step, true = the step is right
- ``id``: the solution's id (a sampled one is ``<instruction id>-s<k>``)
- ``instruction_id``: the instruction it solves (null for rows of ``[reward_model] prm_data``)
- ``solution``: the whole solution as trained on, in the world's answer format
- ``source``: who labelled it: ``verifier`` (the world's step verifier), ``judged`` (the PRM judge) or ``prm_data``
- ``split``: ``train`` or ``heldout`` (held-out solutions answer questions never trained on)

Files written before these names (ids in ``chosen`` / ``rejected`` beside ``chosen_text`` / ``rejected_text``;
``question`` and ``steps``) are not read back: nothing resumes from them, 04 rewrites both when it trains, and the
IRM view leaves out its "kept" column for such a file (``examples.py``).

The held-out side is whole sibling groups (IRM, :func:`split_by_group`) and whole questions (PRM,
:func:`split_by_question`), so a reward model is never measured on what it trained on; 04 and 07 score that side.

Both read with ``datasets.load_dataset("json", data_files=...)``; the model cards say the same. Under
``[base] launcher = "accelerate"`` the launched ranks read their training rows back from these files.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any, Sequence

from rleif_kit.core import distributed as dist
from rleif_kit.core.jsonl import write_jsonl
from rleif_kit.core.paths import RunPaths
from rleif_kit.rewards.reward import solution_step_ends
from rleif_kit.worlds.base import STEP_BY_STEP

PAIR_FIELDS = {
    "chosen, rejected": "the instruction texts of the better and the worse variant, which the IRM scores (TRL's "
                        "preference format, implicit prompt: no prompt around them)",
    "chosen_id, rejected_id": "their variant ids (records of `irm_fanout.jsonl`)",
    "id": "`<chosen_id>><rejected_id>`: the pair's two variant ids",
    "group": "the sibling group: the id of the instruction both variants were evolved from",
    "operator": "the evolution operator of the chosen variant (pairs are balanced across operators)",
    "split": "`train` or `heldout` (held-out pairs come from sibling groups never trained on)",
}
STEP_FIELDS = {
    "prompt": "the question (TRL's stepwise-supervision format; the kit's PRM reads it inside the policy's prompt)",
    "completions": "the solution cut where the run's world ends each step, as the PRM reads its labels (the last one "
                   "runs to the end: through the answer line of a step-by-step solution, the rest of a program's "
                   "response)",
    "labels": "one boolean per step, true = the step is right",
    "id": "the solution's id (a sampled one is `<instruction id>-s<k>`)",
    "instruction_id": "the instruction it solves (null for rows of `[reward_model] prm_data`)",
    "solution": "the whole solution as trained on",
    "source": "who labelled it: `verifier`, `judged` (the PRM judge) or `prm_data`",
    "split": "`train` or `heldout` (held-out solutions answer questions never trained on)",
}


def pair_id(pair: dict) -> str:
    return f"{pair['chosen_id']}>{pair['rejected_id']}"


def pair_rows(train: Sequence[dict], heldout: Sequence[dict]) -> list[dict]:
    """The IRM's pairs as dataset rows (fields of ``PAIR_FIELDS``; extra keys of a pair are kept)."""
    return [{"id": pair_id(p), "group": p.get("group"), **p, "split": split}
            for split, rows in (("train", train), ("heldout", heldout)) for p in rows]


def solution_steps(solution: str, world: Any = STEP_BY_STEP) -> list[str]:
    """The solution cut where the PRM reads each step's label (:func:`solution_step_ends`, as ``world`` splits it)."""
    ends = solution_step_ends(solution, world)
    return [solution[a:b].strip() for a, b in zip([0] + ends[:-1], ends)]


def step_rows(train: Sequence[dict], heldout: Sequence[dict], world: Any = STEP_BY_STEP) -> list[dict]:
    """The PRM's examples as dataset rows (fields of ``STEP_FIELDS``), their steps as ``world`` splits them."""
    return [{"prompt": e["question"], "completions": solution_steps(e["solution"], world),
             "labels": [bool(x) for x in e["labels"]], "id": str(e.get("id", "")),
             "instruction_id": e.get("instruction_id"), "solution": e["solution"], "source": e.get("source"),
             "split": split}
            for split, rows in (("train", train), ("heldout", heldout)) for e in rows]


def training_examples(which: str, rows: list[dict]) -> list[dict]:
    """The rows of ``rm_rows(which)`` as ``train_irm`` / ``train_prm`` take them. The file holds either the rows a
    launch wrote to train on (the kit's own examples) or the dataset saved beside the model: a pair is the same in
    both, a PRM row of the dataset gets its ``question`` back from ``prompt``."""
    if which != "prm":
        return rows
    return [r if "question" in r else {**r, "question": r["prompt"]} for r in rows]


def save_rows(paths: RunPaths, which: str, rows: list[dict]) -> Path:
    """``irm_pairs.jsonl`` / ``prm_steps.jsonl`` on the main rank (written whole, atomically: launched ranks may be
    reading the copy they were started with)."""
    path = paths.rm_rows(which)
    if dist.is_main():
        write_jsonl(path, rows)
    return path


def fields_markdown(fields: dict[str, str]) -> str:
    return "\n".join(f"- `{name}`: {what}" for name, what in fields.items())


# ------------------------------------------------------------------ the held-out splits

def split_by_group(pairs: Sequence[dict], heldout_share: float, seed: int) -> tuple[list[dict], list[dict]]:
    """Hold out whole sibling groups, so held-out accuracy measures unseen instructions."""
    groups = sorted({str(p["group"]) for p in pairs})
    random.Random(seed).shuffle(groups)
    held = set(groups[: max(1, round(len(groups) * heldout_share))]) if groups else set()
    return [p for p in pairs if str(p["group"]) not in held], [p for p in pairs if str(p["group"]) in held]


def split_by_question(examples: Sequence[dict], heldout_share: float, seed: int) -> tuple[list[dict], list[dict]]:
    """Hold out whole questions: a PRM must not be measured on a question it trained on."""
    return split_by_group([{**e, "group": e["question"]} for e in examples], heldout_share, seed)
