"""Hard negatives for the PRM: right solutions of the run's own instructions with one error put in, labelled step
by step by the world's step verifier from the error on (``[reward_model] prm_hard_negatives``).

Why: the SFT model's samples give few wrong steps of each kind, and the wrong ones it does write are mostly of one
kind (the tiny teacher's early stop), so a PRM trained on samples alone can learn a shortcut — on the tiny preset it
scored by the number of steps. A right solution and the same solution with one step slipped differ in that step
only: the pair teaches the arithmetic. Each chosen instruction gives its right solution (every step right) and one
edit of a kind taken in turn (``worlds/counterfactuals.HARD_NEGATIVES``: a slipped step, a slipped answer, a stop
one step early, the answer cut), the slip's step and size drawn at random.

The probes edit held-out problems with fixed +1 edits; these come from the instruction pool (never the held-out
set) and vary step, size and kind, so the probes still measure something the training did not copy. The deciding
figure stays the reward against truth on PPO's own samples, which no edit produced.
"""

from __future__ import annotations

import random
from typing import Any, Sequence

from rleif_kit.worlds.counterfactuals import HARD_NEGATIVES


def hard_negative_examples(instructions: Sequence[dict], world: Any, n: int, seed: int) -> list[dict]:
    """Up to ``n`` edited solutions and the right ones they came from, as PRM examples ``{id, instruction_id,
    question, solution, labels, source}`` labelled by the world's step verifier. The instructions that carry a
    step-by-step ``answer`` are taken in a seeded order, each giving its answer (every step right) and one edit of
    it, the two side by side; ``n`` beyond their number takes another pass, the edit's kind turning. An
    instruction whose answer the verifier does not call right gives nothing, nor does an edit the verifier still
    calls right (the verifier decides, not the edit's intent)."""
    pool = [r for r in instructions if isinstance(r.get("answer"), str) and r["answer"].strip()]
    rng = random.Random(seed)
    rng.shuffle(pool)
    kinds = list(HARD_NEGATIVES)
    records, solutions, meta = [], [], []
    for i in range(n if pool else 0):
        j, turn = i % len(pool), i // len(pool)
        r = pool[j]
        gold = r["answer"].strip()
        kind = kinds[(j + turn) % len(kinds)]
        for what, text in (("gold", gold), (kind, HARD_NEGATIVES[kind](gold, rng))):
            if text is not None:
                records.append(r)
                solutions.append(text)
                meta.append(what)
    labelled = list(zip(records, solutions, meta, world.step_labels_batch(records, solutions)))
    right = {r["id"] for r, _, what, labels in labelled if what == "gold" and labels and all(labels)}
    out = []
    for r, text, what, labels in labelled:
        if r["id"] not in right or not labels or all(labels) != (what == "gold"):
            continue  # a pair needs its right half; an edit the verifier still calls right teaches nothing
        out.append({"id": f"{r['id']}-hn{len(out)}-{what}", "instruction_id": r["id"], "question": r["text"],
                    "solution": text, "labels": list(labels), "source": f"hard_negative:{what}"})
    return out
