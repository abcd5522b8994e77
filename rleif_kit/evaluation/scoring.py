"""Per-item checking, benchmark summaries and the SFT-vs-PPO comparison, without a model.

Why here and not in the runner: the same checks score our own generations, samples made elsewhere
(``rleif eval <benchmark> --samples``) and finished result directories (``rleif eval compare``), so
they take plain rows. Every row has ``id`` and ``correct`` (for HumanEval: the sample passed its
tests), which is all the summary and the paired A/B need; the rest says why.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping, Sequence

from rleif_kit.checks.verdicts import ab_verdict
from rleif_kit.core.jsonl import read_jsonl
from rleif_kit.core.config import DiagnosticsConfig, EvalConfig
from rleif_kit.evaluation.humaneval import check_samples, pass_at_k_table
from rleif_kit.worlds.benchmarks import BENCHMARKS, benchmark as get_benchmark

PASS_KS = (1, 10, 100)


def check_response(benchmark: str, item: Mapping[str, Any], response: str, ev: Any = None) -> dict[str, Any]:
    """One row for one answer benchmark's response: id, raw response, extracted answer, gold, correct, and what
    the benchmark's checker adds (``flexible_*`` / ``compat_correct`` for GSM8k and MATH, the compat scorer's
    version from ``ev``, an ``[eval]`` section, default its defaults; ``steps_ok`` for arith)."""
    bench = get_benchmark(benchmark)
    if bench.check is None:
        raise ValueError(f"check_response scores answer benchmarks, not {benchmark!r}, whose programs run in the "
                         "sandbox (see check_code)")
    checked = bench.check(item, response, ev if ev is not None else EvalConfig())
    return {"id": item["id"], "response": response, **checked}


def check_code(samples: Sequence[Mapping[str, Any]], problems: Mapping[str, dict], *, timeout: float = 10.0,
               workers: int | None = None, benchmark: str = "humaneval") -> list[dict[str, Any]]:
    """HumanEval / MBPP rows for samples ``{"id", "task_id", "completion_id", "response" or "completion"}``,
    each run against its problem's tests in the sandbox (a response cut out by WizardCoder's post-processing
    for ``benchmark``); ``correct`` = passed, ``result`` = why not, ``judged`` = how the verdict was made."""
    extract = get_benchmark(benchmark).extract
    bad = {i for i, s in enumerate(samples) if problems[s["task_id"]].get("error")}  # the task's data, not the sample
    runnable = [s for i, s in enumerate(samples) if i not in bad]
    checked = iter(check_samples(runnable, problems, timeout=timeout, workers=workers, progress=False,
                                 extract=extract, desc=benchmark) if runnable else [])
    rows, seen = [], {}
    for i, s in enumerate(samples):
        seen[s["task_id"]] = seen.get(s["task_id"], -1) + 1
        if i in bad:
            why = problems[s["task_id"]]["error"]
            completion = s["completion"] if "completion" in s else extract(s.get("response") or "")
            c = {"completion_id": s.get("completion_id", seen[s["task_id"]]), "completion": completion,
                 "passed": False, "result": f"task error: {why}", "judged": "task-error", "wall_s": 0.0}
        else:
            c = next(checked)
        rows.append({"id": s.get("id", f"{s['task_id']}#{c['completion_id']}"), "task_id": s["task_id"],
                     "completion_id": c["completion_id"], "response": s.get("response"), "completion": c["completion"],
                     "correct": c["passed"], "result": c["result"], "judged": c["judged"], "wall_s": c["wall_s"],
                     **({"base_correct": c["base_passed"]} if "base_passed" in c else {}),
                     **({"task_error": problems[s["task_id"]]["error"]} if i in bad else {})})
    return rows


def _share(rows: Sequence[Mapping[str, Any]], key: str) -> float | None:
    values = [r[key] for r in rows if r.get(key) is not None]
    return sum(map(bool, values)) / len(values) if values else None


def summarize(benchmark: str, rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """n and strict accuracy (the headline), plus the shares the benchmark names (GSM8k flexible, compat and
    math-verify, MATH compat and math-verify, arith the share with every step right), ``scorers`` (each scorer's
    accuracy: strict, flexible, compat, math_verify) and ``math_verify_disagreements`` (rows where the strict
    verdict and math-verify's differ); a code benchmark pass@k (k up to the samples per task) over ``n_tasks``,
    with ``task_errors`` the tasks whose data could not be judged (counted as failed, as a bad gold is in math)."""
    bench = get_benchmark(benchmark)
    out: dict[str, Any] = {"n": len(rows), "accuracy": _share(rows, "correct")}
    for key in bench.summary:  # "flexible_correct" -> "flexible_accuracy"; "steps_ok" stays itself
        out[key.replace("_correct", "_accuracy")] = _share(rows, key)
    if "math_verify_correct" in bench.summary:  # the second opinion: beside the headline, never instead of it
        out["math_verify_disagreements"] = len(math_verify_disagreements(rows))
    scorers = [k for k in bench.summary if k.endswith("_correct") and k != "base_correct"]
    if scorers:  # every scorer's accuracy in one place, the headline (strict) first
        out["scorers"] = {"strict": out["accuracy"], **{k[:-len("_correct")]: out[k.replace("_correct", "_accuracy")]
                                                        for k in scorers}}
    if bench.runs_code:
        by_task: dict[str, list[bool]] = {}
        for r in rows:
            by_task.setdefault(r["task_id"], []).append(bool(r["correct"]))
        out.update(pass_at_k_table(by_task, PASS_KS), n_tasks=len(by_task),
                   task_errors=len({r["task_id"] for r in rows if r.get("task_error")}))  # failed: bad task data
    return out


def math_verify_disagreements(rows: Sequence[Mapping[str, Any]], **context: Any) -> list[dict[str, Any]]:
    """The rows where the kit's strict verdict and math-verify's differ, with both readings (the kit's ``answer``,
    math-verify's ``math_verify_answer``), the gold, the compat verdict and the response's last 300 characters;
    ``context`` (model, benchmark) is put in front of each."""
    keep = ("id", "gold", "answer", "correct", "math_verify_answer", "math_verify_correct", "compat_correct")
    return [{**context, **{k: r.get(k) for k in keep}, "response_tail": (r.get("response") or "")[-300:]}
            for r in rows if r.get("math_verify_correct") is not None and bool(r["math_verify_correct"]) !=
            bool(r.get("correct"))]


def compare_dirs(a: str | Path, b: str | Path, diagnostics: Any = None, seed: int = 0) -> list[dict[str, Any]]:
    """The A/B table of two result directories (``<benchmark>.jsonl`` each), A the baseline: per
    benchmark both have, accuracy of each on the shared items, the gain and its 95% interval, the verdict."""
    a, b = Path(a), Path(b)
    for d in (a, b):
        if not d.is_dir():
            raise FileNotFoundError(f"{d}: not a directory of evaluation results (<benchmark>.jsonl files)")
    diagnostics = diagnostics or DiagnosticsConfig()
    table = []
    for bench in BENCHMARKS:
        if not ((a / f"{bench}.jsonl").exists() and (b / f"{bench}.jsonl").exists()):
            continue
        v = ab_verdict(list(read_jsonl(a / f"{bench}.jsonl")), list(read_jsonl(b / f"{bench}.jsonl")), diagnostics,
                       f"{a / bench}.jsonl vs {b / bench}.jsonl", seed)
        if v is not None:
            n = v.numbers
            table.append({"benchmark": bench, "n": n["n"], "a": n["sft_accuracy"], "b": n["ppo_accuracy"],
                          "gain": n["gain"], "ci95": n["ci95"], "status": v.status, "advice": v.advice})
    if not table:
        raise FileNotFoundError(f"{a} and {b} share no benchmark results with common item ids")
    return table


def format_compare(table: Sequence[Mapping[str, Any]], a: str = "A", b: str = "B") -> str:
    """The A/B table as text, with the 3-point rule and each verdict's advice below it."""
    lines = [f"A = {a} (baseline, SFT)   B = {b} (candidate, PPO)",
             f"{'benchmark':<10} {'n':>5} {'A':>7} {'B':>7} {'gain':>7}  {'95% interval':<16} verdict"]
    for r in table:
        low, high = r["ci95"]
        lines.append(f"{r['benchmark']:<10} {r['n']:>5} {100 * r['a']:>6.1f}% {100 * r['b']:>6.1f}% "
                     f"{100 * r['gain']:>+7.1f}  [{100 * low:+.1f}, {100 * high:+.1f}]{'':<3} {r['status']}")
    lines.append("3-point rule: PPO less than 3 points over SFT on GSM8k means the reward signal is probably "
                 "not working; on a few hundred items the interval is wide, and the verdict says so.")
    lines += [f"{r['benchmark']}: {r['advice']}" for r in table if r["advice"]]
    return "\n".join(lines)
