"""How well a PRM's step scores find the wrong steps: the field's two benchmark metrics, on any step-labelled data.

Pure functions over ``labels`` (per solution, one bool | None per step: true = right, None = unlabelled) and
``scores`` (per solution, one P(step right) per step; None for a solution the PRM could not score). A step is
predicted right when its score is at least the threshold.

- ProcessBench (Zheng et al. 2024, "ProcessBench: Identifying Process Errors in Mathematical Reasoning",
  arXiv 2412.06559): the predicted first wrong step is the first step scored below the threshold, -1 when none; the
  true one is the first step labelled wrong, -1 when none. ``error_accuracy`` is the share of solutions with an
  error whose first wrong step is found exactly, ``correct_accuracy`` the share of correct solutions predicted -1,
  ``f1`` their harmonic mean (None where a side has no solution).
- PRMBench's PRM-Score (Song et al. 2025, "PRMBench: A Fine-grained and Challenging Benchmark for Process-Level
  Reward Models", arXiv 2501.03124, its evaluation section: PRMScore = w1 · F1_neg + w2 · F1 with w1 = w2 = 0.5):
  every labelled step of every solution is one binary decision, pooled into one confusion matrix whose positive
  class is a right step (as its evaluation code does: github.com/ssmisya/PRMBench,
  ``mr_eval/tasks/prmtest_classified/task.py``, ``f1`` and ``negative_f1``); ``f1_right`` is the F1 of the "right
  step" class, ``f1_wrong`` that of the "wrong step" class, ``prm_score`` their mean. A class with no step and no
  prediction has an F1 of None (PRMBench writes -1) and the score is then the other's alone.

:func:`evaluate_steps` computes both at 0.5 and over a swept threshold (0.05, 0.10 ... 0.95), names the best
threshold of each beside 0.5, and breaks both down per class when rows carry one. Solutions the PRM could not
score are counted (``unscored``) and left out.
"""

from __future__ import annotations

from typing import Sequence

SWEEP = tuple(round(0.05 * k, 2) for k in range(1, 20))  # 0.05 .. 0.95


def first_wrong(labels: Sequence[bool | None]) -> int:
    """Index of the first step labelled wrong (False), -1 when none is."""
    return next((i for i, v in enumerate(labels) if v is False), -1)


def predicted_first_wrong(scores: Sequence[float], threshold: float = 0.5) -> int:
    """Index of the first step scored below ``threshold``, -1 when none is (ProcessBench's prediction)."""
    return next((i for i, s in enumerate(scores) if s < threshold), -1)


def _harmonic(a: float | None, b: float | None) -> float | None:
    if a is None or b is None:
        return None
    return 0.0 if a + b == 0 else 2 * a * b / (a + b)


def processbench(labels: Sequence[Sequence[bool | None]], scores: Sequence[Sequence[float]],
                 threshold: float = 0.5) -> dict:
    """ProcessBench's accuracies and F1 over solutions (see the module's note)."""
    hits_err = n_err = hits_ok = n_ok = 0
    for lab, sc in zip(labels, scores):
        truth, guess = first_wrong(lab), predicted_first_wrong(sc, threshold)
        if truth == -1:
            n_ok += 1
            hits_ok += guess == -1
        else:
            n_err += 1
            hits_err += guess == truth
    err = hits_err / n_err if n_err else None
    ok = hits_ok / n_ok if n_ok else None
    return {"error_accuracy": err, "correct_accuracy": ok, "f1": _harmonic(err, ok), "with_error": n_err,
            "correct": n_ok}


def _f1(tp: int, fp: int, fn: int) -> float | None:
    return None if tp + fp + fn == 0 else 2 * tp / (2 * tp + fp + fn)


def prm_score(labels: Sequence[Sequence[bool | None]], scores: Sequence[Sequence[float]],
              threshold: float = 0.5) -> dict:
    """PRMBench's PRM-Score over every labelled step (see the module's note)."""
    tp = fp = fn = tn = 0  # "right" is the positive class
    for lab, sc in zip(labels, scores):
        for v, s in zip(lab, sc):
            if v is None:
                continue
            said_right = s >= threshold
            tp += v and said_right
            fn += v and not said_right
            fp += (not v) and said_right
            tn += (not v) and not said_right
    f1_right, f1_wrong = _f1(tp, fp, fn), _f1(tn, fn, fp)
    parts = [f for f in (f1_right, f1_wrong) if f is not None]
    return {"prm_score": sum(parts) / len(parts) if parts else None, "f1_right": f1_right, "f1_wrong": f1_wrong,
            "steps": tp + fp + fn + tn}


def _best(rows: list[dict], key: str) -> dict:
    usable = [r for r in rows if r[key] is not None]
    if not usable:
        return {"threshold": None, key: None}
    top = max(usable, key=lambda r: (r[key], -abs(r["threshold"] - 0.5)))  # ties: the one nearest 0.5
    return {"threshold": top["threshold"], key: top[key]}


def _at(labels: list, scores: list, threshold: float) -> dict:
    return {"threshold": threshold, "processbench": processbench(labels, scores, threshold),
            "prmbench": prm_score(labels, scores, threshold)}


def _metrics(labels: list, scores: list, sweep: Sequence[float]) -> dict:
    swept = [_at(labels, scores, t) for t in sweep]
    flat = [{"threshold": s["threshold"], "f1": s["processbench"]["f1"], "prm_score": s["prmbench"]["prm_score"]}
            for s in swept]
    return {"solutions": len(labels), "at_0.5": _at(labels, scores, 0.5),
            "best": {"processbench_f1": _best(flat, "f1"), "prm_score": _best(flat, "prm_score")}, "sweep": flat}


def evaluate_steps(records: Sequence[dict], scores: Sequence[Sequence[float] | None],
                   sweep: Sequence[float] = SWEEP) -> dict:
    """Both metrics for ``records`` (``labels``, optional ``class``) against ``scores`` (one list per record, in
    order; None = unscored), at 0.5 and swept, overall and per class."""
    if len(records) != len(scores):
        raise ValueError(f"{len(scores)} score lists for {len(records)} solutions")
    pairs = [(r, list(s)) for r, s in zip(records, scores) if s is not None]
    for r, s in pairs:
        if len(s) != len(r["labels"]):
            raise ValueError(f"solution {r.get('id')!r}: {len(s)} step scores for {len(r['labels'])} labelled steps")
    out = {**_metrics([r["labels"] for r, _ in pairs], [s for _, s in pairs], sweep),
           "unscored": len(records) - len(pairs)}
    classes = sorted({r["class"] for r, _ in pairs if r.get("class")})
    if classes:
        out["per_class"] = {c: {k: v for k, v in _metrics([r["labels"] for r, s in pairs if r.get("class") == c],
                                                            [s for r, s in pairs if r.get("class") == c],
                                                            sweep).items() if k != "sweep"}
                            for c in classes}
    return out


def _num(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.3f}"


def format_metrics(result: dict) -> str:
    """A small table: each metric at 0.5 and at its best swept threshold, then one line per class."""
    at, best = result["at_0.5"], result["best"]
    pb, rb = at["processbench"], at["prmbench"]
    lines = [f"{result['solutions']} solutions scored ({pb['with_error']} with an error, {pb['correct']} correct), "
             f"{rb['steps']} labelled steps; {result['unscored']} unscored",
             f"{'metric':<34}{'at 0.5':>8}{'best':>8}{'at':>6}",
             f"{'ProcessBench error accuracy':<34}{_num(pb['error_accuracy']):>8}",
             f"{'ProcessBench correct accuracy':<34}{_num(pb['correct_accuracy']):>8}",
             f"{'ProcessBench F1':<34}{_num(pb['f1']):>8}{_num(best['processbench_f1']['f1']):>8}"
             f"{_num(best['processbench_f1']['threshold'])[:4]:>6}",
             f"{'PRMBench F1 (right steps)':<34}{_num(rb['f1_right']):>8}",
             f"{'PRMBench F1 (wrong steps)':<34}{_num(rb['f1_wrong']):>8}",
             f"{'PRMBench PRM-Score':<34}{_num(rb['prm_score']):>8}{_num(best['prm_score']['prm_score']):>8}"
             f"{_num(best['prm_score']['threshold'])[:4]:>6}"]
    for name, m in result.get("per_class", {}).items():
        a = m["at_0.5"]
        lines.append(f"  class {name}: {m['solutions']} solutions, ProcessBench F1 {_num(a['processbench']['f1'])}, "
                     f"PRM-Score {_num(a['prmbench']['prm_score'])} (at 0.5)")
    return "\n".join(lines)
