"""One row of ``05_ppo/log.jsonl`` per PPO step, and the guard that reads it (``trainer.py`` runs both).

The row: the reward's figures (mean, spread, rI, rA, the low-rA share, reward against truth where a verifier
judges the responses), the KL and its coefficient, entropy, response length, the update's losses and
diagnostics (``clip_frac``, ``approx_kl``, ``explained_variance``, ``kl_after``) and where the step's time went
(``ppo/phases.py``).
"""

from __future__ import annotations

import math
import statistics

from rleif_kit.checks.probes import truth_log_fields
from rleif_kit.ppo import ppo_math as pm
from rleif_kit.ppo.rewards import term_log_fields
from rleif_kit.ppo.rollout import Rollout

KL_ADVICE = ("lower [ppo] lr (1e-6 for 7B), raise kl_coef (0.1), keep clip_range 0.2, and use rollout_batch >= 64 "
             "for 7B")


def step_record(step: int, scores: dict, roll: Rollout, update: dict, kl_coef: float) -> dict:
    """One log row: reward mean/std, mean rI and rA, share of rA < 0.5, KL per sequence, entropy, ..., and where
    a verifier judges the responses, reward against truth: the AUC of rA and of r over right vs wrong responses
    (``rA_truth_auc``, ``r_truth_auc``; None when the batch is all right or all wrong), their mean rewards, and
    the share right."""
    kl = pm.sequence_kl(roll.logp, roll.ref_logp, roll.response_mask)
    r = scores["reward"]
    return {"step": step, "reward_mean": statistics.fmean(r), "reward_std": statistics.pstdev(r),
            "rI_mean": statistics.fmean(scores["rI"]), "rA_mean": statistics.fmean(scores["rA"]),
            "low_rA_share": sum(a < 0.5 for a in scores["rA"]) / len(r),
            "flagged_share": sum(scores["flagged"]) / len(r), "kl": kl.mean().item(), "kl_coef": kl_coef,
            "entropy": roll.entropy, "response_len": roll.response_mask.sum(dim=1).mean().item(), **update,
            **truth_log_fields(scores.get("correct", []), scores), **term_log_fields(scores)}


def guard(row: dict, kl_limit: float) -> str:
    """'' when the step is healthy; else why the run must stop."""
    keys = ("kl", "kl_after", "policy_loss", "value_loss", "reward_mean")
    bad = [k for k in keys if not math.isfinite(row.get(k, 0.0))]
    if bad:
        return f"step {row['step']}: {', '.join(bad)} not finite — {KL_ADVICE}"
    kl = max(row["kl"], row.get("kl_after", row["kl"]))
    if kl > kl_limit:
        return f"step {row['step']}: KL {kl:.2f} passed the limit {kl_limit:g} — {KL_ADVICE}"
    return ""
