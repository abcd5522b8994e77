"""Health checks, each returning a :class:`Verdict`: ok / warn / fail, the numbers, the thresholds, advice.

Every stage runs its own checks here; the diagnostics notebook and ``rleif doctor`` show them all.
Thresholds come from the ``[diagnostics]`` config section, never from constants in a check.
"""

from __future__ import annotations

import random
import re
from dataclasses import asdict, dataclass, field
from typing import Any, Sequence

from rleif_kit.sections import DiagnosticsConfig

STATUSES = ("ok", "warn", "fail")
# "Step 3:" / "step 3." / "Step 3)" anywhere, or a list item "3." / "3)" after a space or line start;
# group 1 or 2 holds the number
# (lookarounds, so "= 8.\n2. ..." keeps the newline before "2." for the next marker)
STEP_MARKER = re.compile(r"(?:^|(?<=\s))(?:Step\s*(\d+)\s*[:.)]|(\d+)[.)](?=\s))", re.IGNORECASE)


@dataclass(frozen=True)
class Verdict:
    """The outcome of one check, with everything a person needs to act on it."""

    check: str
    status: str
    numbers: dict[str, Any] = field(default_factory=dict)
    thresholds: dict[str, Any] = field(default_factory=dict)
    advice: str = ""
    source: str = ""  # the artifact the numbers came from

    def __post_init__(self):
        if self.status not in STATUSES:
            raise ValueError(f"status must be one of {STATUSES}, got {self.status!r}")

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def line(self) -> str:
        nums = ", ".join(f"{k}={_fmt(v)}" for k, v in self.numbers.items())
        return f"[{self.status.upper():4}] {self.check}: {nums}" + (f" — {self.advice}" if self.advice else "")


def _fmt(v: Any) -> str:
    return f"{v:.3g}" if isinstance(v, float) else str(v)


def check_sft_learning(acc_before: float, acc_after: float, cfg: DiagnosticsConfig,
                       source: str = "03_sft/eval.jsonl") -> Verdict:
    """Did SFT teach anything? Compare held-out accuracy before and after training."""
    gain = round(acc_after - acc_before, 12)  # 0.35 - 0.30 is 0.0499999...: a 5-point gain must meet 0.05
    numbers = {"accuracy_before": acc_before, "accuracy_after": acc_after, "gain": gain}
    thresholds = {"sft_min_gain": cfg.sft_min_gain}
    if gain >= cfg.sft_min_gain:
        return Verdict("sft_learning", "ok", numbers, thresholds, source=source)
    status = "fail" if gain <= 0 else "warn"
    advice = ("SFT did not raise held-out accuracy: check the prompt format matches evaluation, the data has "
              "step-by-step answers, and raise [sft] max_steps/epochs or lr.")
    return Verdict("sft_learning", status, numbers, thresholds, advice, source)


def has_step_markers(solution: str) -> bool:
    """True when a solution shows explicit steps ("Step 1:", "1." / "1)" lists) — two or more of them,
    numbered 1 then 2 (a sentence ending in a number, "... = 8. Then ...", is not a step), or one
    solution that opens with "Step 1"."""
    numbers = [int(a or b) for a, b in STEP_MARKER.findall(solution)]
    if 1 in numbers and 2 in numbers[numbers.index(1) + 1:]:
        return True
    return solution.strip().lower().startswith("step 1")


def check_step_format(responses: Sequence[str], cfg: DiagnosticsConfig, seed: int = 0,
                      source: str = "03_sft/train.jsonl") -> Verdict:
    """The PRM scores step by step: a solution without explicit steps becomes one step and rA is always 1."""
    pool = list(responses)
    k = cfg.step_marker_sample
    sample = pool if k == 0 or k >= len(pool) else random.Random(seed).sample(pool, k)
    share = sum(map(has_step_markers, sample)) / len(sample) if sample else 0.0
    numbers = {"sampled": len(sample), "share_with_steps": share}
    thresholds = {"step_marker_min_share": cfg.step_marker_min_share}
    if share >= cfg.step_marker_min_share:
        return Verdict("step_format", "ok", numbers, thresholds, source=source)
    advice = ("Too few solutions have explicit steps: normalise them to 'Step 1: ... The answer is: X' or "
              "rewrite them through the evolution model before SFT.")
    return Verdict("step_format", "fail", numbers, thresholds, advice, source)


def check_evolve_temperature(temperature: float, cfg: DiagnosticsConfig,
                             source: str = "[evol_instruct] temperature") -> Verdict:
    """Evolving at a low temperature makes near-copies: dedup then removes most of them."""
    numbers, thresholds = {"temperature": temperature}, {"min_evolve_temperature": cfg.min_evolve_temperature}
    if temperature >= cfg.min_evolve_temperature:
        return Verdict("evolve_temperature", "ok", numbers, thresholds, source=source)
    return Verdict("evolve_temperature", "warn", numbers, thresholds,
                   f"Sampling temperature {temperature:g} is below {cfg.min_evolve_temperature:g}: raise it, "
                   "or evolutions repeat each other and dedup removes them.", source)


def check_kept_floor(kept: int, min_kept: int, up_ratio: float, source: str = "02_dedup/instructions.jsonl") -> Verdict:
    """Too few instructions survive dedup: the reward models and PPO will see too little variety."""
    numbers, thresholds = {"kept": kept}, {"min_kept": min_kept}
    if kept >= min_kept:
        return Verdict("kept_floor", "ok", numbers, thresholds, source=source)
    advice = (f"Only {kept} instructions survived dedup (floor {min_kept}): lower evolve_up_ratio to 0.6 "
              f"(now {up_ratio:g}) so fewer upward evolutions collapse into near-copies, and check the "
              "temperature is >= 0.9.")
    return Verdict("kept_floor", "warn", numbers, thresholds, advice, source)


def check_operator_share(kept_per_operator: dict[str, int], cfg: DiagnosticsConfig,
                         source: str = "02_dedup/dedup_report.json") -> Verdict:
    """A kept set dominated by a few evolution templates is the known cause of IRM overfitting."""
    total = sum(kept_per_operator.values())
    top = sorted(kept_per_operator.values(), reverse=True)[:2]
    share = sum(top) / total if total else 0.0
    numbers = {"top_two_share": share, "operators": len(kept_per_operator)}
    thresholds = {"max_top_operator_share": cfg.max_top_operator_share}
    if share <= cfg.max_top_operator_share:
        return Verdict("operator_share", "ok", numbers, thresholds, source=source)
    return Verdict("operator_share", "warn", numbers, thresholds,
                   "Two operators make up most of the kept set: the IRM may learn templates, not quality. "
                   "Balance evolve_up_ratio / evolve_down_ratio or add operators.", source)


def _mean_var(values: Sequence[float]) -> tuple[float, float]:
    mean = sum(values) / len(values)
    return mean, sum((v - mean) ** 2 for v in values) / len(values)


def check_score_distribution(name: str, scores: Sequence[float], cfg: DiagnosticsConfig, source: str = "") -> Verdict:
    """Reward-health check 1: do the reward model's scores spread over a useful range?

    Healthy: mean in [score_mean_min, score_mean_max] and std > score_std_min. A mean beyond
    collapse_mean (or below 1 - collapse_mean) with variance < collapse_var fails: the model gives
    everything the same score (for the IRM, the sign of overfitting to the ranking data).
    """
    check = f"{name.lower()}_distribution"
    thresholds = {"mean": [cfg.score_mean_min, cfg.score_mean_max], "std_min": cfg.score_std_min,
                  "collapse_mean": cfg.collapse_mean, "collapse_var": cfg.collapse_var}
    if not scores:
        return Verdict(check, "fail", {"n": 0}, thresholds, f"No {name} scores to check: score a sample first.", source)
    mean, var = _mean_var(scores)
    numbers = {"n": len(scores), "mean": mean, "std": var ** 0.5}
    if cfg.score_mean_min <= mean <= cfg.score_mean_max and var ** 0.5 > cfg.score_std_min:
        return Verdict(check, "ok", numbers, thresholds, source=source)
    collapsed = var < cfg.collapse_var and not 1 - cfg.collapse_mean <= mean <= cfg.collapse_mean
    where = ("scores everything alike (it has overfit)" if collapsed else
             "scores spread too little" if var ** 0.5 <= cfg.score_std_min else
             f"mean {mean:.2f} is outside {cfg.score_mean_min:g}-{cfg.score_mean_max:g}")
    advice = {"IRM": "raise dedup strength (lower [evol_instruct] dedup_threshold) or diversify the ranking data "
                     "(more sibling groups, more operators).",
              "PRM": "label more solutions with real errors (raise prm_samples or prm_sample_temperature), "
                     "check the labels, or train longer."}
    return Verdict(check, "fail" if collapsed else "warn", numbers, thresholds,
                   f"The {name} {where}: " + advice.get(name.upper(), "check its training data."), source)


def check_low_ra_share(answer_scores: Sequence[float], cfg: DiagnosticsConfig, source: str = "") -> Verdict:
    """Reward-health check 2: how often does the PRM call an answer bad (rA < 0.5)?

    Healthy: between low_ra_healthy_min and low_ra_healthy_max. Below low_ra_fail the PRM passes
    nearly everything and ``r = rI * rA`` is the IRM alone (plain RLHF): fail.
    """
    thresholds = {"healthy": [cfg.low_ra_healthy_min, cfg.low_ra_healthy_max], "fail_below": cfg.low_ra_fail}
    if not answer_scores:
        return Verdict("low_ra_share", "fail", {"n": 0}, thresholds, "No rA scores to check.", source)
    share = sum(a < 0.5 for a in answer_scores) / len(answer_scores)
    numbers = {"n": len(answer_scores), "share_ra_below_0.5": share}
    if cfg.low_ra_healthy_min <= share <= cfg.low_ra_healthy_max:
        return Verdict("low_ra_share", "ok", numbers, thresholds, source=source)
    if share < cfg.low_ra_fail:
        return Verdict("low_ra_share", "fail", numbers, thresholds,
                       "The PRM passes almost every answer: r = rI*rA has collapsed to the IRM alone. Retrain the "
                       "PRM on solutions with real errors, or check its labels.", source)
    advice = ("The PRM passes most answers: its signal is weak; check its held-out AUC." if share < cfg.low_ra_healthy_min
              else "The PRM rejects most answers: PPO will mostly learn from negative reward; check the PRM's "
                   "calibration and the SFT model's accuracy.")
    return Verdict("low_ra_share", "warn", numbers, thresholds, advice, source)


def check_ab(sft_correct: Sequence[bool], ppo_correct: Sequence[bool], cfg: DiagnosticsConfig,
             source: str = "", seed: int = 0) -> Verdict:
    """Reward-health check 3: did PPO beat SFT on the same held-out items?

    ok when the gain reaches ``ab_min_gain`` and its 95% paired-bootstrap interval is above 0; fail when
    the whole interval lies below ``ab_min_gain`` (a drop is never ok); warn when the interval is too wide
    to tell.
    """
    from rleif_kit.metrics import paired_bootstrap

    gain, low, high = paired_bootstrap(sft_correct, ppo_correct, seed=seed)
    n = len(sft_correct)
    numbers = {"n": n, "sft_accuracy": sum(map(bool, sft_correct)) / n, "ppo_accuracy": sum(map(bool, ppo_correct)) / n,
               "gain": gain, "ci95": [low, high]}
    thresholds = {"ab_min_gain": cfg.ab_min_gain}
    if gain >= cfg.ab_min_gain and low > 0:
        return Verdict("sft_vs_ppo", "ok", numbers, thresholds, source=source)
    advice = (f"PPO gained {100 * gain:+.1f} points (95% interval {100 * low:+.1f} to {100 * high:+.1f}): "
              "the reward is probably not working, not training too short — look at the IRM/PRM score "
              "distributions and the share of rA < 0.5 first.")
    if high < cfg.ab_min_gain:
        return Verdict("sft_vs_ppo", "fail", numbers, thresholds, advice, source)
    return Verdict("sft_vs_ppo", "warn", numbers, thresholds,
                   advice if gain < cfg.ab_min_gain else "The gain's interval is too wide to tell: evaluate more items.",
                   source)


def format_verdicts(verdicts: Sequence[Verdict]) -> str:
    """One line per verdict, for notebooks and the CLI."""
    return "\n".join(v.line() for v in verdicts) if verdicts else "(no checks)"
