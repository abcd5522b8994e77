"""The ``[diagnostics]`` section: every threshold a health check reads (``checks/verdicts.py``, ``checks/probes.py``)
and the failure shares past which a stage that sent requests ends stopped (``checks/stage_failures.py``). Kept
beside ``sections.py``, which re-exports it, as one more frozen dataclass of the same kind.
"""

from __future__ import annotations

from dataclasses import dataclass

from rleif_kit.core.fields import non_negative, opt, positive, unit
from rleif_kit.core.sections_base import _Section


@dataclass(frozen=True)
class DiagnosticsConfig(_Section):
    sft_min_gain: float = opt(0.05, "SFT must raise held-out accuracy over the untrained model by this much "
                                    "(absolute) to be ok; no gain at all fails", unit)
    step_marker_min_share: float = opt(0.9, "share of SFT examples with explicit step markers below which "
                                            "the step-format check fails (the PRM needs steps)", unit)
    step_marker_sample: int = opt(10, "SFT examples sampled by the step-format check; 0 = all", non_negative)
    min_evolve_temperature: float = opt(0.9, "evolution temperature below which the diversity check warns "
                                             "(low temperature evolves near-copies)", non_negative)
    max_top_operator_share: float = opt(0.5, "share of the kept set owed to the top two operators above which "
                                             "the diversity check warns (IRM overfits to templates)", unit)
    score_mean_min: float = opt(0.4, "healthy reward-model scores (IRM, PRM) have a mean at least this", unit)
    score_mean_max: float = opt(0.7, "... and at most this", unit)
    score_std_min: float = opt(0.1, "... and a standard deviation above this (scores that do not vary say nothing)",
                               unit)
    collapse_mean: float = opt(0.9, "a mean above this (or below 1 minus it) with a variance under collapse_var "
                                    "fails: the model has overfit and scores everything alike", unit)
    collapse_var: float = opt(0.01, "variance under which such scores count as collapsed", unit)
    low_ra_healthy_min: float = opt(0.2, "healthy share of rA < 0.5 (PRM calls an answer bad) is at least this",
                                    unit)
    low_ra_healthy_max: float = opt(0.4, "... and at most this (above: warn, the PRM rejects most answers)", unit)
    ab_min_gain: float = opt(0.03, "PPO must beat SFT on held-out accuracy by this much (absolute); a gain whose "
                                   "95% paired-bootstrap interval straddles it is warn", unit)
    low_ra_fail: float = opt(0.1, "a share of rA < 0.5 below this fails: the PRM passes everything and r = rI*rA "
                                  "has collapsed to the IRM alone", unit)
    low_ra_steps: int = opt(200, "check 2 reads the share of rA < 0.5 over this many PPO steps from the start of "
                                 "05_ppo/log.jsonl", positive)
    score_sample: int = opt(100, "check 1 scores this many evolved instructions (IRM) and solutions (PRM)", positive)
    kl_warn: float = opt(5.0, "a per-sequence KL above this in the first kl_steps PPO steps is warn", positive)
    kl_blowup: float = opt(10.0, "... and above this fails: the KL blew up (lower lr, raise kl_coef)", positive)
    kl_steps: int = opt(300, "PPO steps, from the start, the KL blow-up check reads", positive)
    duplicate_share_warn: float = opt(0.4, "share of instructions dedup removed as duplicates above which the "
                                           "duplicate check warns (evolutions repeat each other)", unit)
    duplicate_share_fail: float = opt(0.7, "... and above which it fails", unit)
    evolve_failure_warn: float = opt(0.02, "share of evolutions still failed (API errors after retries) above "
                                           "which the failure check warns", unit)
    evolve_failure_fail: float = opt(0.1, "... and above which it fails; past it 01_evolve also ends stopped (exit "
                                          "4, no done marker: a rerun retries the failed ones)", unit)
    judge_failure_fail: float = opt(0.1, "share of judge labels (IRM rankings, PRM step labels) failed above which "
                                         "04 stops before training (exit 4: a rerun retries them)", unit)
    probe_pairs: int = opt(200, "counterfactual probes: right solutions (PRM) and instructions (IRM) edited per "
                                "probe", positive)
    probe_ok: float = opt(0.8, "a probe is ok when at least this share of its pairs moves the right way (down for a "
                               "wrong answer, an early stop, ...; not at all for a meaning-preserving edit)", unit)
    probe_fail: float = opt(0.4, "... and fails at this share or below (a reward blind to the edit ties every "
                                 "pair: 0), or when a wrong edit raises the score significantly. Chance is 0.5; the "
                                 "line sits below it so that a reward at chance on a subtle edit warns instead of "
                                 "flipping with 200 pairs' noise", unit)
    probe_same_tolerance: float = opt(0.05, "a meaning-preserving edit counts as not moving the score when the "
                                            "change is at most this", unit)
    truth_auc_ok: float = opt(0.7, "reward against truth: the reward's ROC AUC over right vs wrong responses "
                                   "(the policy's own samples, where a verifier judges them) is ok from this", unit)
    truth_auc_fail: float = opt(0.55, "... and fails below this (0.5 is chance: the reward does not rank right "
                                      "answers above wrong ones)", unit)

    def cross_problems(self):
        bands = [("low_ra_healthy_min", self.low_ra_fail, self.low_ra_healthy_min),
                 ("low_ra_healthy_max", self.low_ra_healthy_min, self.low_ra_healthy_max),
                 ("score_mean_max", self.score_mean_min, self.score_mean_max),
                 ("kl_blowup", self.kl_warn, self.kl_blowup),
                 ("duplicate_share_fail", self.duplicate_share_warn, self.duplicate_share_fail),
                 ("evolve_failure_fail", self.evolve_failure_warn, self.evolve_failure_fail),
                 ("probe_ok", self.probe_fail, self.probe_ok),
                 ("truth_auc_ok", self.truth_auc_fail, self.truth_auc_ok)]
        return [(key, f"a value >= {low:g} (the line below it)") for key, low, high in bands if high < low]
