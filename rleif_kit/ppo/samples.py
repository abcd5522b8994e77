"""A few of PPO's rollouts, kept to be read: the first ones of the first step (the SFT policy, before any update)
and of the last (the trained policy), each with its instruction, response, rI, rA, r and KL.

``log.jsonl`` says how the means moved; these rows show what moved them — a response the reward liked, one it
did not, and whether the trained policy's answers still read like solutions. The trainer calls
:func:`save_rollout_samples` once per step; it writes only on the first and the last step (or the step the KL
guard stopped at), on the main process, into ``05_ppo/rollouts.jsonl``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

from rleif_kit.core import distributed as dist
from rleif_kit.core.jsonl import read_jsonl, write_jsonl
from rleif_kit.core.paths import RunPaths
from rleif_kit.core.stages import PPO
from rleif_kit.core.tables import Note, missing, text_table
from rleif_kit.ppo import ppo_math as pm

SAMPLES = 4  # rollouts kept per saved step: enough to see a good and a bad one, few enough to read


def sample_rows(step: int, batch: Sequence[dict], responses: Sequence[str], scores: dict, kl: Sequence[float],
                n: int = SAMPLES) -> list[dict]:
    """The first ``n`` rollouts of one step as records (``instruction_id``: the instruction's own id)."""
    return [{"step": step, "instruction_id": r["id"], "question": r["text"], "response": responses[i],
             "rI": scores["rI"][i], "rA": scores["rA"][i], "r": scores["reward"][i], "kl": kl[i],
             "flagged": scores["flagged"][i]} for i, r in enumerate(batch[:n])]


def save_rollout_samples(path: Path, step: int, last_step: int, stopped: bool, batch: Sequence[dict], roll: Any,
                         scores: dict, n: int = SAMPLES) -> None:
    """Keep step ``step``'s first ``n`` rollouts when it is the first step, the last, or the one the guard stopped
    at; a rerun of a step replaces its rows (a resumed run redoes the step it crashed in), step 0 all of them."""
    if not dist.is_main() or (step not in (0, last_step) and not stopped):
        return
    kl = pm.sequence_kl(roll.logp[:n], roll.ref_logp[:n], roll.response_mask[:n]).tolist()  # KL per sequence
    # step 0 starts a fresh training: an earlier run's rows (its last step) go; a resumed run redoes one step
    rows = [r for r in read_jsonl(path) if r["step"] != step] if path.exists() and step > 0 else []
    write_jsonl(path, sorted(rows + sample_rows(step, batch, roll.responses, scores, kl, n), key=lambda r: r["step"]))


def _when(step: int) -> str:
    """Which policy sampled a step's rollouts: step s comes from the policy after s updates."""
    return f"step {step}: " + ("before training (the SFT policy)" if step == 0 else f"after {step} updates")


def _response(row: dict) -> str:
    return row["response"] + ("\n(no steps found: rA = 0)" if row["flagged"] else "")


def rollout_table(paths: RunPaths) -> Any:
    """The saved rollouts, first step then last: when (which policy sampled them), question, response, rI, rA,
    r = the reward formula of the two, and the response's KL to the reference (the sum over its tokens)."""
    if not paths.ppo_rollouts.exists():
        return missing(paths.rel(paths.ppo_rollouts), PPO, "rollouts")
    rows = list(read_jsonl(paths.ppo_rollouts))
    if not rows:
        return Note(f"{paths.rel(paths.ppo_rollouts)} is empty: PPO saved no rollout.")
    table = [{"when": _when(r["step"]), "question": r["question"], "response": _response(r), "rI": r["rI"],
              "rA": r["rA"], "r": r["r"], "KL": r["kl"]} for r in rows]
    return text_table(table, wrap=("question", "response"), gradient=("rI", "rA"))
