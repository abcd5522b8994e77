"""Counterfactual probes and reward-against-truth: does the reward move when, and only when, the answer does?

A reward can have a healthy distribution (check 1) and a healthy share of rA < 0.5 (check 2) and still be
blind to the answer: the tiny PRM trained with its last label before the answer gave the same rA to a right
answer, a wrong one and none. These checks look at what the reward *reads*:

- **Probes.** Score pairs that differ in one controlled way (``worlds/counterfactuals.py``): for a "down" edit
  (wrong answer, corrupted step, answer cut, early stop) the share of pairs whose score drops, for a "same"
  edit (operands commuted, number formatting) the share whose score stays within ``probe_same_tolerance``;
  and the mean change with a 95% bootstrap interval. The IRM gets the same treatment with instructions made
  unsolvable or ambiguous.
- **Reward against truth.** Where a verifier knows which responses are right: the ROC AUC of the reward over
  right vs wrong responses, and their mean rewards. A reward that does not rank right answers above wrong
  ones on the policy's own samples fails, whatever its distribution looks like.

Pure functions over scores; the callers (the PPO gate, ``rleif doctor``, 07) score the pairs.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, replace
from typing import Any, Callable, Sequence

from rleif_kit.core.config import DiagnosticsConfig
from rleif_kit.core.metrics import mean_interval, truth_figures
from rleif_kit.core.verdict import Verdict
from rleif_kit.worlds import counterfactuals as cf

# Each probe's edit — what changed, as "when ..." reads it — and what to do when the score reads it wrong: one
# entry per edit of every world (worlds/counterfactuals.py, worlds/code/edits.py) and per instruction edit (the IRM).
# ``probe_verdict`` puts them after what the probe measured: which way the score moved and by how much.
PRM_ADVICE: dict[str, tuple[str, str]] = {
    "wrong_answer": ("only the final answer is wrong",
                     "The PRM does not read the answer: check that its last label sits on the answer line and marks a "
                     "wrong answer's step wrong, and that its training solutions include wrong answers (raise "
                     "prm_samples or prm_sample_temperature)."),
    "last_step_slip": ("the last step's result is wrong (and the answer with it)",
                       "The PRM checks the form, not the computation. A token classifier learns the check from one "
                       "label per step: [reward_model] prm_head = 'likelihood' reads it where the SFT model computes "
                       "it (on the tiny preset: 51% -> 85% of pairs), else more labelled slips or a larger base."),
    "corrupt_step": ("an intermediate result is wrong",
                     "The PRM scores the form of a step, not its computation. [reward_model] prm_head = 'likelihood' "
                     "reads each result where the SFT model computes it (on the tiny preset: 51% -> 96% of "
                     "pairs), else more labelled slips or a larger base."),
    "cut_answer": ("the answer line is missing",
                   "The PRM rewards steps, not answers, and PPO can learn to leave the answer out. Label a solution "
                   "without an answer wrong at its last step, add right solutions and their edits ([reward_model] "
                   "prm_hard_negatives), or read the end of the text with prm_head = 'likelihood'."),
    "early_stop": ("the solution stops one step early",
                   "PPO will learn to stop early. The labels must mark an early stop's last step wrong; a PRM that "
                   "scores by the number of steps (short solutions are right more often) shows here first. Right "
                   "solutions that go on to the end ([reward_model] prm_hard_negatives) taught the tiny PRM where "
                   "to stop (20% -> 99%)."),
    "commute": ("only the operands of a step are swapped, a + b as b + a",
                "The PRM keys on surface form. Train it on more varied solutions; a generative PRM inherits its "
                "model's computation, which may be surer of one order than the other: [reward_model] prm_same_edits "
                "= true trains it on every right solution rewritten by each meaning-preserving edit, this one "
                "included."),
    "number_format": ("only the final answer is written with thousands separators, 1200 as 1,200",
                      "The PRM keys on how the number is written, not its value: its training answers are written "
                      "one way. Put answers written both ways in its training data (GSM8k's own answers use "
                      "separators), or with prm_head = 'likelihood' set [reward_model] prm_same_edits = true, which "
                      "trains it on this edit too. PPO can only exploit it if the policy writes separators: if its "
                      "SFT answers never do and every other probe passes, [ppo] force = true starts PPO knowingly."),
    "off_by_one": ("a loop bound or a constant of the program is off by one",
                   "The reward does not read what the program computes, only how it looks: reward the program by "
                   "its tests ([ppo] reward_formula = 'rI * rV', the execution reward the code presets use); a "
                   "learned PRM needs more failing programs in its training data."),
    "wrong_sign": ("the program returns the negated result",
                   "The reward does not read what the program computes, only how it looks: reward the program by "
                   "its tests ([ppo] reward_formula = 'rI * rV'); a learned PRM needs more failing programs in its "
                   "training data."),
    "cut_code": ("the program's last line is cut off",
                 "The reward passes a truncated program, and PPO can learn to stop early: reward the program by its "
                 "tests ([ppo] reward_formula = 'rI * rV'); if replies are cut in training, raise [ppo] "
                 "max_new_tokens."),
    "rename": ("only the function's first parameter is renamed",
               "The reward keys on names, not behaviour: PPO may learn to pick the names it likes rather than "
               "right programs. The execution reward (rI * rV) does not move under a rename; a learned PRM needs "
               "more varied programs, or prm_head = 'likelihood' with [reward_model] prm_same_edits = true, which "
               "trains it on renamed copies of right programs."),
    "comment": ("only a comment line is added above the return",
                "The reward keys on surface form (comments), not behaviour: PPO may learn to add or drop comments "
                "for reward. The execution reward (rI * rV) does not move under a comment; a learned PRM needs more "
                "varied programs, or prm_head = 'likelihood' with [reward_model] prm_same_edits = true, which "
                "trains it on commented copies of right programs."),
}
IRM_ADVICE: dict[str, tuple[str, str]] = {
    "unsolvable": ("what the instruction needs to be solved is made vague",
                   "The IRM does not read the task (it may score templates). Diversify its ranking data: more "
                   "sibling groups and operators."),
    "number_removed": ("the instruction's first number is deleted",
                       "The IRM does not read the task. Diversify its ranking data: more sibling groups and "
                       "operators."),
    "ambiguous": ("the instruction asks about something it never mentions",
                  "The IRM does not read the task. Diversify its ranking data: more sibling groups and operators."),
}


def probe_advice(model: str, stats: "ProbeStats", tolerance: float) -> str:
    """What a probe that is not ok measured, in words — for a lowering edit whether the score rose (it prefers the
    edited text), stayed put or dropped too seldom; for a meaning-preserving one whether it rose or fell — and what
    to do about that probe (``PRM_ADVICE`` / ``IRM_ADVICE``; an edit of a world the tables lack is named)."""
    irm = model.upper() == "IRM"
    what, todo = (IRM_ADVICE if irm else PRM_ADVICE).get(
        stats.name, (f"the {stats.name.replace('_', ' ')} edit is made",
                     f"Look at the pairs of the {stats.name} probe: the score reads the edit wrong."))
    score = "rI" if irm else "the score"
    by = f"{stats.mean_delta:+.3f} on average"
    if stats.direction == "same":
        way = ("moves both ways" if abs(stats.mean_delta) <= tolerance else
               "rises" if stats.mean_delta > 0 else "falls")
        return (f"{score} {way} when {what} ({by}; it must stay within {tolerance:g}, and moved more on "
                f"{1 - stats.moved_right:.0%} of pairs), though the meaning is the same. {todo}")
    if stats.ci95[0] > 0:
        return (f"{score} rises when {what} ({by}): the reward prefers the broken one, and PPO will climb towards "
                f"it. {todo}")
    if abs(stats.mean_delta) <= TIE:
        return f"{score} does not move when {what} (it ties): the reward ignores this edit. {todo}"
    if stats.mean_delta > 0:
        return f"{score} does not drop when {what} ({by}: it rises on more pairs than it falls). {todo}"
    return f"{score} drops on too few pairs when {what} ({by}). {todo}"


TIE = 1e-6  # a change this small is float noise of batching (padding), not the reward moving


@dataclass(frozen=True)
class ProbeStats:
    name: str
    direction: str  # "down": the edit must lower the score; "same": it must not move it
    n: int
    moved_right: float  # share of pairs ordered correctly (down: strictly lower; same: within the tolerance)
    mean_delta: float  # mean(edited - original)
    ci95: tuple[float, float]


def probe_stats(name: str, direction: str, original: Sequence[float | None], edited: Sequence[float | None],
                tolerance: float, seed: int = 0) -> ProbeStats | None:
    """The probe's figures over the pairs both scored; None when no pair was scored. A tie counts as not moved
    (for a "down" edit that is the failure: a reward blind to the edit gives the pair the same score)."""
    if direction not in ("down", "same"):
        raise ValueError(f"direction must be 'down' or 'same', got {direction!r}")
    deltas = [e - o for o, e in zip(original, edited) if o is not None and e is not None]
    if not deltas:
        return None
    right = [d < -TIE for d in deltas] if direction == "down" else [abs(d) <= tolerance for d in deltas]
    mean, low, high = mean_interval(deltas, seed=seed)
    return ProbeStats(name, direction, len(deltas), sum(right) / len(right), mean, (low, high))


def probe_verdict(model: str, stats: ProbeStats, cfg: DiagnosticsConfig, source: str = "") -> Verdict:
    """ok when the share moved the right way reaches ``probe_ok`` (and, for a "down" edit, the mean change's
    interval lies below 0); fail at ``probe_fail`` or below, or when a "down" edit's mean change is significantly
    UP (its whole interval above 0: the reward prefers the broken solution); warn between."""
    check = f"{model.lower()}_probe_{stats.name}"
    numbers = {"pairs": stats.n, "moved_right": stats.moved_right, "mean_change": stats.mean_delta,
               "ci95": [stats.ci95[0], stats.ci95[1]]}
    thresholds = {"ok_at": cfg.probe_ok, "fail_at_or_below": cfg.probe_fail, "direction": stats.direction}
    if stats.direction == "same":
        thresholds["tolerance"] = cfg.probe_same_tolerance
    significant = stats.direction == "same" or stats.ci95[1] < 0
    if stats.moved_right >= cfg.probe_ok and significant:
        return Verdict(check, "ok", numbers, thresholds, source=source)
    advice = probe_advice(model, stats, cfg.probe_same_tolerance)
    wrong_way = stats.direction == "down" and stats.ci95[0] > 0
    status = "fail" if stats.moved_right <= cfg.probe_fail or wrong_way else "warn"
    what = "moved down" if stats.direction == "down" else "stayed put"
    return Verdict(check, status, numbers, thresholds,
                   f"{stats.moved_right:.0%} of {stats.n} pairs {what} (mean change {stats.mean_delta:+.3f}, 95% "
                   f"interval {stats.ci95[0]:+.3f} to {stats.ci95[1]:+.3f}): {advice}", source)


AnswerScorer = Callable[[Sequence[dict], Sequence[str]], Sequence["float | None"]]  # (records, solutions) -> rA
InstructionScorer = Callable[[Sequence[str]], Sequence[float]]  # instruction texts -> rI


def prm_probes(score: AnswerScorer, items: Sequence[dict], cfg: DiagnosticsConfig, source: str = "",
               seed: int = 0, model: str = "PRM", cap: str | None = None,
               edits: dict | None = None) -> list[Verdict]:
    """One verdict per solution edit, named ``<model>_probe_<edit>``. ``items``: right solutions, each
    ``{"text": question, "solution": ...}`` plus whatever the scorer needs (a generated world's ``problem``);
    ``score(records, solutions)`` gives rA. ``cap="warn"`` reports a fail as warn (a PRM the run does not use).
    ``edits``: the world's (``World.solution_edits``; default the step format's)."""
    sample = _sample(items, cfg.probe_pairs, seed)
    base = list(score(sample, [r["solution"] for r in sample]))
    out = []
    for name, (edit, direction) in (edits if edits is not None else cf.SOLUTION_EDITS).items():
        pairs = [(i, edit(r["solution"])) for i, r in enumerate(sample)]
        pairs = [(i, s) for i, s in pairs if s is not None and s != sample[i]["solution"]]
        if not pairs:
            continue
        edited = list(score([sample[i] for i, _ in pairs], [s for _, s in pairs]))
        stats = probe_stats(name, direction, [base[i] for i, _ in pairs], edited, cfg.probe_same_tolerance, seed)
        if stats is not None:
            out.append(_capped(probe_verdict(model, stats, cfg, source), cap))
    return out


def _capped(v: Verdict, cap: str | None) -> Verdict:
    """A probe of a model the run's reward does not read: at most ``cap``, said first in its advice, and marked
    (``thresholds["not_in_reward"]``) so the report's what-next box puts the checks of the run's own reward first."""
    if cap is None or v.status == "ok":
        return v
    return replace(v, status=cap if v.status == "fail" else v.status,
                   thresholds={**v.thresholds, "not_in_reward": True},
                   advice="Not this run's reward (it does not read this model), so nothing to fix for this run; "
                          "fix it before [ppo] reward_formula or [reward_model] answer_reward reads it. " + v.advice)


def irm_probes(score: InstructionScorer, pairs: dict[str, Sequence[tuple[str, str]]], cfg: DiagnosticsConfig,
               source: str = "", seed: int = 0) -> list[Verdict]:
    """One verdict per instruction edit: ``pairs[name]`` = (clean instruction, edited instruction) pairs, each
    edit one that must lower rI."""
    out = []
    for name, rows in pairs.items():
        rows = _sample(rows, cfg.probe_pairs, seed)
        if not rows:
            continue
        original, edited = list(score([a for a, _ in rows])), list(score([b for _, b in rows]))
        stats = probe_stats(name, "down", original, edited, cfg.probe_same_tolerance, seed)
        if stats is not None:
            out.append(probe_verdict("IRM", stats, cfg, source))
    return out


def _sample(rows: Sequence[Any], n: int, seed: int) -> list[Any]:
    rows = list(rows)
    return rows if len(rows) <= n else random.Random(seed).sample(rows, n)


# ------------------------------------------------------------------------------ reward against truth

def _truth_verdict(auc: float | None, numbers: dict, cfg: DiagnosticsConfig, source: str, what: str) -> Verdict:
    thresholds = {"ok_at": cfg.truth_auc_ok, "fail_below": cfg.truth_auc_fail}
    if auc is None:
        return Verdict("reward_truth", "warn", numbers, thresholds,
                       f"{what}: no right and wrong responses both to compare (the policy is always right or "
                       "always wrong here); nothing to rank.", source)
    if auc >= cfg.truth_auc_ok:
        return Verdict("reward_truth", "ok", numbers, thresholds, source=source)
    status = "fail" if auc < cfg.truth_auc_fail else "warn"
    ra_auc = numbers.get("rA_auc")
    cause = ("rA itself ranks them (AUC {:.2f}), so rI's spread drowns it: look at the IRM".format(ra_auc)
             if ra_auc is not None and ra_auc >= cfg.truth_auc_ok else
             "the answer reward does not tell right from wrong: look at the PRM probes")
    return Verdict("reward_truth", status, numbers, thresholds,
                   f"{what}, the reward ranks a right response above a wrong one with probability {auc:.2f} "
                   f"(0.5 = chance): {cause}. PPO on this reward optimises something other than correctness.", source)


def check_reward_truth(correct: Sequence[bool | None], reward: Sequence[float], answer: Sequence[float],
                       cfg: DiagnosticsConfig, source: str = "", what: str = "On these samples") -> Verdict:
    """Reward against truth on one set of judged responses (the gate's SFT samples, held-out PRM samples)."""
    r, a = truth_figures(correct, reward), truth_figures(correct, answer)
    numbers = {"n": r["n"], "right": r["right"], "r_auc": r["auc"], "rA_auc": a["auc"],
               "r_right_mean": r["right_mean"], "r_wrong_mean": r["wrong_mean"]}
    return _truth_verdict(r["auc"], numbers, cfg, source, what)


def check_reward_truth_log(log: Sequence[dict], cfg: DiagnosticsConfig, source: str = "") -> Verdict | None:
    """Reward against truth on PPO's own samples: the mean per-step AUC of r (and rA) over the steps that had
    right and wrong responses, with the first and last fifth of them (before and after PPO). None when the log
    holds no truth fields (no verifier for this world)."""
    rows = [row for row in log if row.get("r_truth_auc") is not None]
    if not any("truth_n" in row for row in log):
        return None
    if not rows:
        return _truth_verdict(None, {"steps": 0}, cfg, source, "On PPO's samples")

    def mean(key: str, part: Sequence[dict]) -> float | None:
        vals = [row[key] for row in part if row.get(key) is not None]
        return sum(vals) / len(vals) if vals else None

    fifth = max(1, len(rows) // 5)
    numbers = {"steps": len(rows), "r_auc": mean("r_truth_auc", rows), "rA_auc": mean("rA_truth_auc", rows),
               "r_auc_first": mean("r_truth_auc", rows[:fifth]), "r_auc_last": mean("r_truth_auc", rows[-fifth:]),
               "right_share_first": mean("right_share", rows[:fifth]),
               "right_share_last": mean("right_share", rows[-fifth:])}
    return _truth_verdict(numbers["r_auc"], numbers, cfg, source, "On PPO's own samples")
