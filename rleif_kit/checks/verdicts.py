"""Health checks, each returning a :class:`Verdict`: ok / warn / fail, the numbers, the thresholds, advice.

Every stage runs its own checks here; the diagnostics notebook and ``rleif doctor`` show them all.
Thresholds come from the ``[diagnostics]`` config section, never from constants in a check.
"""

from __future__ import annotations

import random
import re
import textwrap
from typing import Any, Mapping, Sequence

from rleif_kit.checks.stage_failures import cause_of
from rleif_kit.core.metrics import paired_bootstrap
from rleif_kit.core.paths import RELATIVE
from rleif_kit.core.config import DiagnosticsConfig
from rleif_kit.core.verdict import Verdict, fmt_number
from rleif_kit.worlds.base import STEP_BY_STEP
from rleif_kit.worlds.prompts import ALPACA_HEADER

# "Step 3:" / "step 3." / "Step 3)" anywhere, or a list item "3." / "3)" after a space or line start;
# group 1 or 2 holds the number
# (lookarounds, so "= 8.\n2. ..." keeps the newline before "2." for the next marker)
STEP_MARKER = re.compile(r"(?:^|(?<=\s))(?:Step\s*(\d+)\s*[:.)]|(\d+)[.)](?=\s))", re.IGNORECASE)


def check_sft_learning(acc_before: float, acc_after: float, cfg: DiagnosticsConfig,
                       source: str = str(RELATIVE.sft_heldout("after")), world: Any = STEP_BY_STEP) -> Verdict:
    """Did SFT teach anything? Compare the held-out score (``world.score_name``: accuracy, pass@1) before and after
    training; the advice names the world's answer format."""
    gain = round(acc_after - acc_before, 12)  # 0.35 - 0.30 is 0.0499999...: a 5-point gain must meet 0.05
    numbers = {"accuracy_before": acc_before, "accuracy_after": acc_after, "gain": gain}
    thresholds = {"sft_min_gain": cfg.sft_min_gain}
    if gain >= cfg.sft_min_gain:
        return Verdict("sft_learning", "ok", numbers, thresholds, source=source)
    status = "fail" if gain <= 0 else "warn"
    answers = ("step-by-step answers" if world.shows_steps is None
               else f"answers in the {world.name} world's format ({world.format_name})")
    advice = (f"SFT did not raise held-out {world.score_name}: check the prompt format matches evaluation, the data "
              f"has {answers}, and raise [sft] max_steps/epochs or lr.")
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
                      source: str = str(RELATIVE.sft_data), world: Any = STEP_BY_STEP) -> Verdict:
    """The PRM scores step by step: a solution without explicit steps becomes one step and rA is always 1. The
    world says what its steps look like (``World.shows_steps``: step markers; a code world: a function in a
    code block that parses)."""
    pool = list(responses)
    k = cfg.step_marker_sample
    sample = pool if k == 0 or k >= len(pool) else random.Random(seed).sample(pool, k)
    shows = has_step_markers if world.shows_steps is None else world.shows_steps
    share = sum(map(shows, sample)) / len(sample) if sample else 0.0
    numbers = {"sampled": len(sample), "share_with_steps": share}
    thresholds = {"step_marker_min_share": cfg.step_marker_min_share}
    if share >= cfg.step_marker_min_share:
        return Verdict("step_format", "ok", numbers, thresholds, source=source)
    advice = ("Too few solutions have explicit steps: normalise them to 'Step 1: ... The answer is: X' or "
              "rewrite them through the evolution model before SFT." if world.shows_steps is None else
              f"Too few solutions are in the {world.name} world's format ({world.format_name}): rewrite them through "
              "the evolution model before SFT.")
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


def check_kept_floor(kept: int, min_kept: int, up_ratio: float,
                     source: str = str(RELATIVE.dedup_instructions)) -> Verdict:
    """Too few instructions survive dedup: the reward models and PPO will see too little variety."""
    numbers, thresholds = {"kept": kept}, {"min_kept": min_kept}
    if kept >= min_kept:
        return Verdict("kept_floor", "ok", numbers, thresholds, source=source)
    advice = (f"Only {kept} instructions survived dedup (floor {min_kept}): lower evolve_up_ratio to 0.6 "
              f"(now {up_ratio:g}) so fewer upward evolutions collapse into near-copies, and check the "
              "temperature is >= 0.9.")
    return Verdict("kept_floor", "warn", numbers, thresholds, advice, source)


def _top_two_share(counts: Mapping[str, int]) -> float:
    total = sum(counts.values())
    return sum(sorted(counts.values(), reverse=True)[:2]) / total if total else 0.0


def check_operator_share(kept_per_operator: Mapping[str, int], cfg: DiagnosticsConfig,
                         source: str = str(RELATIVE.dedup_report),
                         drawn_per_operator: Mapping[str, int] | None = None) -> Verdict:
    """A kept set dominated by a few evolution templates is the known cause of IRM overfitting.

    The top two operators' share of the kept set warns above ``max_top_operator_share`` only when dedup made it:
    when it is no more than the same share of the evolutions drawn (``drawn_per_operator``, dedup's "in" per
    operator), or than an even split's (2 of 4 operators own half whatever happens), it is what the world's
    operators and ``evolve_up_ratio`` ask for — a property of the operator mix, not a problem of this run — and the
    verdict is ok with a note saying so and how to change the mix if wanted."""
    share = _top_two_share(kept_per_operator)
    operators = sum(1 for n in kept_per_operator.values() if n > 0)
    numbers: dict[str, Any] = {"top_two_share": share, "operators": len(kept_per_operator)}
    thresholds = {"max_top_operator_share": cfg.max_top_operator_share}
    if share <= cfg.max_top_operator_share:
        return Verdict("operator_share", "ok", numbers, thresholds, source=source)
    even = min(1.0, 2 / operators) if operators else 1.0
    drawn = _top_two_share(drawn_per_operator) if drawn_per_operator else None
    if drawn is not None:
        numbers["drawn_top_two_share"] = drawn
    expected = max(even, drawn if drawn is not None else even)
    if share <= expected + 1e-12:
        why = (f"{share:.0%} of the kept set comes from the top two operators, no more than the operator mix draws "
               f"({drawn:.0%} of the evolutions)" if drawn is not None and drawn >= even else
               f"with {operators} operators the top two own at least {even:.0%} of any kept set ({share:.0%} here)")
        return Verdict("operator_share", "ok", numbers, thresholds,
                       f"Informational: {why}: a property of the world's operators and [evol_instruct] "
                       "evolve_up_ratio, not something dedup did. For a more even mix, lower evolve_up_ratio or add "
                       "operators.", source)
    made = (f" Dedup made it so ({drawn:.0%} of the evolutions drawn, {share:.0%} of those kept): the other "
            "operators' evolutions were removed as near-copies more often." if drawn is not None else "")
    advice = (f"Two operators make up most of the kept set: the IRM may learn templates, not quality.{made} Balance "
              "evolve_up_ratio / evolve_down_ratio or add operators.")
    return Verdict("operator_share", "warn", numbers, thresholds, advice, source)


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
    if not answer_scores:
        return _low_ra_verdict(None, {"n": 0}, cfg, source)
    share = sum(a < 0.5 for a in answer_scores) / len(answer_scores)
    return _low_ra_verdict(share, {"n": len(answer_scores), "share_ra_below_0.5": share}, cfg, source)


def check_low_ra_log(log: Sequence[dict], cfg: DiagnosticsConfig, source: str = str(RELATIVE.ppo_log)) -> Verdict:
    """Check 2 from the PPO log: the mean of each step's share of rA < 0.5 over the first
    ``low_ra_steps`` steps (every step scores one rollout batch, so steps weigh alike)."""
    shares = [float(r["low_rA_share"]) for r in log if r["step"] < cfg.low_ra_steps and "low_rA_share" in r]
    if not shares:
        return _low_ra_verdict(None, {"steps": 0}, cfg, source)
    share = round(sum(shares) / len(shares), 12)  # 200 steps at 0.4 sum to 0.4000000000000002
    return _low_ra_verdict(share, {"steps": len(shares), "share_ra_below_0.5": share}, cfg, source)


def _low_ra_verdict(share: float | None, numbers: dict, cfg: DiagnosticsConfig, source: str) -> Verdict:
    thresholds = {"healthy": [cfg.low_ra_healthy_min, cfg.low_ra_healthy_max], "fail_below": cfg.low_ra_fail}
    if share is None:
        return Verdict("low_ra_share", "fail", numbers, thresholds, "No rA scores to check.", source)
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


def check_step_credit(step_counts: Sequence[int], placed_share: float | None, gaps: Sequence[float],
                      source: str = "") -> Verdict:
    """``[ppo] reward_granularity = "step"``, before the first update: do the step parts of r sum to r on the gate's
    sample (``gaps``: |parts - r| per response; the split telescopes, so anything above float rounding is a bug), do
    the responses have steps to split r over (``step_counts``: steps per response), and were the step ends found
    among the sampled tokens (``placed_share``)? No threshold to tune: each warning is an all-or-nothing case in
    which the step level trains exactly as the solution level does."""
    n = len(step_counts)
    multi = sum(c >= 2 for c in step_counts)
    numbers = {"responses": n, "multi_step_share": multi / n if n else None,
               "steps_mean": sum(step_counts) / n if n else None, "steps_placed_share": placed_share,
               "max_sum_gap": max(gaps, default=0.0)}
    return _step_credit_verdict(numbers, source)


def check_step_credit_log(log: Sequence[dict], source: str = str(RELATIVE.ppo_log)) -> Verdict | None:
    """The step level over a PPO run, from its log's step columns; None at the solution level (no such columns)."""
    rows = [r for r in log if r.get("steps_mean") is not None or "early_credit_mean" in r]
    if not rows:
        return None
    numbers: dict = {"steps": len(rows)}
    for key in ("steps_mean", "steps_placed_share", "early_credit_mean"):
        values = [r[key] for r in rows if r.get(key) is not None]
        numbers[key] = sum(values) / len(values) if values else None
    return _step_credit_verdict(numbers, source)


def _step_credit_verdict(numbers: dict, source: str) -> Verdict:
    steps, placed, gap = numbers.get("steps_mean"), numbers.get("steps_placed_share"), numbers.get("max_sum_gap", 0.0)
    if gap > 1e-5:
        return Verdict("step_credit", "fail", numbers, {}, f"The step parts of r do not add up to r (largest gap "
                       f"{gap:.2g}): the step level would train on another reward than the solution level. Use [ppo] "
                       "reward_granularity = 'solution' and report it.", source)
    if not steps or steps <= 1.0 or numbers.get("multi_step_share") == 0:
        return Verdict("step_credit", "warn", numbers, {}, "No response has two steps or more: each keeps all of r on "
                       "its last token, so the step level trains exactly as the solution level does (a one-statement "
                       "program is one step). Nothing to fix; use 'solution' to say so.", source)
    if placed == 0:
        return Verdict("step_credit", "warn", numbers, {}, "No step end was found among the sampled tokens, so every "
                       "part of r fell on the last token: check that the tokenizer decodes the sampled tokens to the "
                       "text the PRM scored.", source)
    return Verdict("step_credit", "ok", numbers, {}, source=source)


def check_ab(sft_correct: Sequence[bool], ppo_correct: Sequence[bool], cfg: DiagnosticsConfig,
             source: str = "", seed: int = 0) -> Verdict:
    """Reward-health check 3: did PPO beat SFT on the same held-out items?

    ok when the gain reaches ``ab_min_gain`` and its 95% paired-bootstrap interval is above 0; fail when
    the whole interval lies below ``ab_min_gain`` (a drop is never ok); warn when the interval is too wide
    to tell.
    """
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


_VALUE_ADVICE = ("Raise [ppo] vf_coef (now {vf_coef:g}; 0.5 is cleanrl's) so the value loss weighs more, or ppo_epochs "
                 "(now {ppo_epochs}) so the head fits each batch's returns longer; a larger rollout_batch (now "
                 "{rollout_batch}) gives it steadier targets. The head starts untrained (a fresh Linear): a run "
                 "of a few dozen steps may end before it learns, so run longer (total_steps) before reading it. "
                 "If the value loss climbs instead, lower lr (now {lr:g}).")


def check_value_head(log: Sequence[dict], cfg: DiagnosticsConfig, ppo: Any,
                     source: str = str(RELATIVE.ppo_log)) -> Verdict | None:
    """Does PPO's value head predict the returns? The mean explained variance (1 - Var(returns - values) /
    Var(returns), logged per step before the update) over the last fifth of the steps that have one: ok from
    ``value_ev_warn``, warn below it, fail below ``value_ev_fail``. A negative value means the head does worse
    than predicting the mean return, so GAE's advantages carry its error as noise and the policy learns from a
    noisier signal than with no baseline at all. ``ppo``: the run's ``[ppo]`` section, whose values the advice
    names. None for a log without the figure (GRPO has no value head; a log written before it was logged)."""
    values = [float(r["explained_variance"]) for r in log if r.get("explained_variance") is not None]
    if not values:
        return None
    k = max(1, len(values) // 5)
    last, first = sum(values[-k:]) / k, sum(values[:k]) / k
    numbers = {"steps": len(values), "explained_variance_first": first, "explained_variance_last": last,
               "lowest": min(values)}
    thresholds = {"warn_below": cfg.value_ev_warn, "fail_below": cfg.value_ev_fail, "over": "the last fifth"}
    if last >= cfg.value_ev_warn:
        return Verdict("value_head", "ok", numbers, thresholds, source=source)
    trend = f"falling from {first:+.2f} in the first fifth" if first > last else f"{first:+.2f} in the first fifth"
    meaning = ("worse than predicting the mean return: its error adds noise to every advantage" if last < 0 else
               "it explains little of the returns")
    advice = (f"The value head's explained variance is {last:+.2f} over the last {k} steps ({trend}): {meaning}, so "
              "the policy learns from a noisier signal. " + _VALUE_ADVICE.format(
                  vf_coef=ppo.vf_coef, ppo_epochs=ppo.ppo_epochs, rollout_batch=ppo.rollout_batch, lr=ppo.lr))
    status = "fail" if last < cfg.value_ev_fail else "warn"
    return Verdict("value_head", status, numbers, thresholds, advice, source)


def check_duplicate_rate(total: int, duplicates: int, cfg: DiagnosticsConfig, *, temperature: float,
                         dedup_threshold: float, up_ratio: float, source: str = str(RELATIVE.dedup_report)) -> Verdict:
    """Troubleshooting: how many instructions did dedup remove as near-copies of kept ones?

    ok up to ``duplicate_share_warn``, warn up to ``duplicate_share_fail``, fail above: evolutions that
    repeat each other waste requests, and the survivors lean on a few templates.
    """
    share = duplicates / total if total else 0.0
    numbers = {"instructions": total, "duplicates": duplicates, "duplicate_share": share}
    thresholds = {"warn_above": cfg.duplicate_share_warn, "fail_above": cfg.duplicate_share_fail}
    if share <= cfg.duplicate_share_warn:
        return Verdict("duplicate_rate", "ok", numbers, thresholds, source=source)
    advice = (f"Dedup removed {share:.0%} as duplicates: evolve at temperature >= 0.9 (now {temperature:g}), dedup "
              f"at 0.85 (dedup_threshold now {dedup_threshold:g}; on template-heavy data like generated problems "
              f"a higher one), and lower evolve_up_ratio to 0.6 (now {up_ratio:g}).")
    status = "fail" if share > cfg.duplicate_share_fail else "warn"
    return Verdict("duplicate_rate", status, numbers, thresholds, advice, source)


_KL_ADVICE = "lower [ppo] lr (1e-6 for 7B), raise kl_coef to 0.1, keep clip_range 0.2 and use rollout_batch >= 64."


def check_kl_blowup(log: Sequence[dict], cfg: DiagnosticsConfig, source: str = str(RELATIVE.ppo_log)) -> Verdict:
    """Troubleshooting: did the KL to the SFT policy blow up early in PPO?

    The largest per-sequence KL of the first ``kl_steps`` steps: fail above ``kl_blowup`` (or when a KL
    is not finite), warn above ``kl_warn``.
    """
    rows = [r for r in log if r["step"] < cfg.kl_steps and r.get("kl") is not None]
    thresholds = {"warn_above": cfg.kl_warn, "fail_above": cfg.kl_blowup, "steps": cfg.kl_steps}
    if not rows:
        return Verdict("kl_blowup", "warn", {"steps": 0}, thresholds, "The PPO log has no KL values.", source)
    worst = max(rows, key=lambda r: r["kl"] if r["kl"] == r["kl"] else float("inf"))  # NaN counts as the worst
    kl = float(worst["kl"])
    numbers = {"steps": len(rows), "max_kl": kl, "at_step": worst["step"]}
    if kl <= cfg.kl_warn:
        return Verdict("kl_blowup", "ok", numbers, thresholds, source=source)
    status = "warn" if kl <= cfg.kl_blowup else "fail"  # a NaN fails both comparisons: fail
    return Verdict("kl_blowup", status, numbers, thresholds,
                   f"KL reached {kl:.3g} at step {worst['step']}: the policy runs away from SFT; " + _KL_ADVICE, source)


# stage_failures' causes (one reading of the error strings) under the names this check's advice uses
FAILURE_CAUSES = {"timeout": "timeout", "rate limited": "rate_limit", "connection": "connection",
                  "http 5xx": "server_error", "http 4xx": "client_error", "empty response": "empty_response"}


def failure_cause(error: str | None) -> str:
    """The cause of an API failure from its message, as ``checks/stage_failures.cause_of`` reads it."""
    return FAILURE_CAUSES.get(cause_of(error), "other")


def check_evolve_failures(causes: dict[str, int], decided: int, cfg: DiagnosticsConfig, *, concurrency: int,
                          source: str = str(RELATIVE.evolve_failed)) -> Verdict:
    """Troubleshooting: evolutions still failed after their retries, by cause.

    ``causes`` counts the failed evolutions (one per id, by its last error); ``decided`` the kept and
    eliminated ones. ok up to ``evolve_failure_warn`` of all, warn up to ``evolve_failure_fail``, fail above.
    """
    failed = sum(causes.values())
    share = failed / (failed + decided) if failed + decided else 0.0
    numbers = {"failed": failed, "decided": decided, "failed_share": share, "by_cause": dict(causes)}
    thresholds = {"warn_above": cfg.evolve_failure_warn, "fail_above": cfg.evolve_failure_fail}
    if share <= cfg.evolve_failure_warn:
        return Verdict("evolve_failures", "ok", numbers, thresholds, source=source)
    top = max(causes, key=causes.get)
    advice = {"timeout": f"requests time out: lower [evol_instruct] concurrency (now {concurrency}) or raise "
                         "api.timeout in settings.json",
              "rate_limit": f"the endpoint rate-limits: lower [evol_instruct] concurrency (now {concurrency})",
              "connection": "the endpoint is unreachable at times: check it with rleif check-api",
              "server_error": "the server returns errors: check its logs",
              "client_error": "the server rejects requests: check the model name and max_new_tokens"}.get(
        top, "see the error messages in failed.jsonl")
    status = "fail" if share > cfg.evolve_failure_fail else "warn"
    return Verdict("evolve_failures", status, numbers, thresholds,
                   f"{failed} evolutions failed, mostly {top}: {advice}; then rerun 01_evolve, which resumes and "
                   "retries them.", source)


def check_prompt_consistency(sft_prompts: Sequence[str | Mapping[str, Any]], eval_cot: bool,
                             source: str = str(RELATIVE.sft_data), world: Any = STEP_BY_STEP) -> Verdict:
    """Troubleshooting: SFT trained on the exact prompt evaluation asks with (a few points hang on it).

    Each SFT prompt must equal the world's ``train_prompt(its instruction, cot=eval_cot)``; any that does not fails.
    An item is a prompt, or an SFT example (``prompt``, ``instruction`` and ``input`` when it has one).
    """
    opener = ALPACA_HEADER + "### Instruction:\n"
    kinds = {"same": 0, "other_cot": 0, "other_format": 0}
    for item in sft_prompts:
        prompt = item if isinstance(item, str) else item["prompt"]
        given = None if isinstance(item, str) else item.get("instruction")
        extra = "" if isinstance(item, str) else item.get("input") or ""
        head, _, _ = prompt.rpartition("\n\n### Response:")
        instruction = given if given is not None else head[len(opener):] if head.startswith(opener) else None
        if instruction is not None and prompt == world.train_prompt(instruction, cot=eval_cot, input=extra):
            kinds["same"] += 1
        elif instruction is not None and prompt == world.train_prompt(instruction, cot=not eval_cot, input=extra):
            kinds["other_cot"] += 1
        else:
            kinds["other_format"] += 1
    numbers = {"sampled": len(sft_prompts), "same_as_eval": kinds["same"], "other_cot": kinds["other_cot"],
               "other_format": kinds["other_format"], "eval_cot": eval_cot}
    if sft_prompts and kinds["same"] == len(sft_prompts):
        return Verdict("prompt_consistency", "ok", numbers, {"same_as_eval": "all"}, source=source)
    advice = ("No SFT prompts to compare." if not sft_prompts else
              "SFT prompts differ from the evaluation prompt (" + ("the CoT opener \"Let's think step by step.\" "
              "differs: rerun 03_sft with the [eval] cot_prompt evaluation uses" if kinds["other_cot"] else
              "not the Alpaca/WizardMath format of rleif_kit.worlds.prompts") + "); scores drop by points.")
    return Verdict("prompt_consistency", "fail", numbers, {"same_as_eval": "all"}, advice, source)


def known_prompt_difference(world: Any, benchmarks: Sequence[str], source: str) -> Verdict:
    """The published recipe trains under one prompt and evaluates under a benchmark's own (WizardCoder: Alpaca's
    prompt_no_input vs HumanEval's "Create a Python script for this problem:"): known and intended, so ok."""
    return Verdict("prompt_consistency", "ok", {"benchmarks": ", ".join(benchmarks), "known_difference": True},
                   {"same_as_eval": "the recipe's own prompts"}, world.prompt_note + ".", source)


def format_verdict_table(verdicts: Sequence[Verdict], advice_width: int = 100) -> str:
    """A fixed-width table (check, status, numbers, source; the advice wrapped below), for the CLI."""
    rows = [(v.check, v.status.upper(), ", ".join(f"{k}={fmt_number(val)}" for k, val in v.numbers.items()), v.source)
            for v in verdicts]
    header = ("check", "status", "numbers", "source")
    widths = [max(len(r[i]) for r in rows + [header]) for i in range(3)]
    lines = []
    for row, v in zip([header] + rows, [None, *verdicts]):
        lines.append("  ".join(c.ljust(w) for c, w in zip(row, widths)) + "  " + row[3])
        if v is not None and v.advice:
            indent = " " * (widths[0] + 2)
            lines += textwrap.wrap(v.advice, advice_width, initial_indent=indent + "-> ",
                                   subsequent_indent=indent + "   ")
    return "\n".join(line.rstrip() for line in lines)


def format_verdicts(verdicts: Sequence[Verdict]) -> str:
    """One line per verdict, for notebooks and the CLI."""
    return "\n".join(v.line() for v in verdicts) if verdicts else "(no checks)"


def ab_verdict(rows_a: Sequence[Mapping[str, Any]], rows_b: Sequence[Mapping[str, Any]], diagnostics: Any,
               source: str = "", seed: int = 0):
    """check_ab (paired bootstrap) of B over A on the items both answered; None when they share none."""
    b = {r["id"]: bool(r["correct"]) for r in rows_b}
    pairs = [(bool(r["correct"]), b[r["id"]]) for r in rows_a if r["id"] in b]
    if not pairs:
        return None
    return check_ab([p[0] for p in pairs], [p[1] for p in pairs], diagnostics, source, seed=seed)


def check_reward_terms(terms: Mapping[str, Sequence], source: str = "") -> Verdict | None:
    """The verifiable terms of the reward (``rV``, ``rF``; None when the formula names neither): each one's mean,
    and the share of records the verifier could not judge, which PPO scores rV = 0. Warns when most could not
    be judged (rV is then mostly its fallback: the reward reads the data's gaps, not the answers), and when a
    term is the same for every response (it then adds nothing PPO can climb)."""
    if not terms.get("rV") and not terms.get("rF"):
        return None
    numbers: dict[str, Any] = {}
    advice = []
    for name in ("rV", "rF"):
        values = list(terms.get(name) or [])
        if values:
            numbers[f"{name}_mean"] = sum(values) / len(values)
            if len(set(values)) == 1:
                advice.append(f"{name} is {values[0]:g} for every response: it adds nothing to climb")
    missing = list(terms.get("rV_missing") or [])
    if missing:
        numbers["rV_missing_share"] = sum(missing) / len(missing)
        if numbers["rV_missing_share"] > 0.5:
            advice.append(f"the verifier could not judge {numbers['rV_missing_share']:.0%} of the records (no gold "
                          "answer: evolved tasks), which get rV = 0")
    status = "warn" if advice else "ok"
    text = "; ".join(advice)
    return Verdict("reward_terms", status, numbers, {"rV_missing_share": "<= 0.5"},
                   text + ("." if text else ""), source)
