"""The math world's probe set: held-out GSM8k / MATH test items with their gold solutions in the step format.

Why the test sets: the probes need right solutions the reward models never trained on, and the test items are
held out by construction — stage 00 drops every seed and SFT row that copies one, stage 02 every evolved
instruction. Their gold solutions (GSM8k's ``answer`` text, MATH's ``solution``) are normalised by the same rules
as the SFT data (``stepwise.normalise_gsm8k`` / ``normalise_solution``); an item the rules cannot put in steps is
left out. The counterfactual edits (``worlds/counterfactuals.py``) then apply as they do in the arithmetic world.
The data step writes the set (``paths.probe_set``); the gate and 07 read it.
"""

from __future__ import annotations

import random
from typing import Any

from rleif_kit.worlds.counterfactuals import drop_number
from rleif_kit.worlds.math.data import load_gsm8k, load_math
from rleif_kit.worlds.math.stepwise import NormaliseError, normalise_gsm8k, normalise_solution

PROBE_SET_SIZE = 300  # per benchmark: the probes sample [diagnostics] probe_pairs of them


def probe_items(bench: str, path: Any, seed: int = 0, n: int = PROBE_SET_SIZE) -> tuple[list[dict], int]:
    """(probe records ``{"id", "text", "solution", "gold", "source"}``, items left out) from one test file."""
    records = load_gsm8k(path) if bench == "gsm8k" else load_math(path)
    out, skipped = [], 0
    for r in records:
        try:
            solution = (normalise_gsm8k(r["solution"]) if bench == "gsm8k"
                        else normalise_solution(r["solution"], gold=r["gold"]))
        except NormaliseError:
            skipped += 1
            continue
        out.append({"id": f"{bench}:{r['id']}", "text": r["question"], "solution": solution, "gold": r["gold"],
                    "source": bench})
    if len(out) > n:
        out = random.Random(f"{seed}-probes-{bench}").sample(out, n)
    return out, skipped


def number_removed_pairs(items: list[dict]) -> dict[str, list[tuple[str, str]]]:
    """(question, the question with one number dropped) — an edit that must lower rI in any world."""
    pairs = [(r["text"], d) for r in items if (d := drop_number(r["text"])) is not None]
    return {"number_removed": pairs} if pairs else {}
