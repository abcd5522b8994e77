"""The A/B's paired bootstrap, the probes' mean interval and the ROC AUC: numpy against the pure-Python loops
they replaced (issue 32), side by side in one run.

    .venv/bin/python benchmarks/bench_metrics.py [--n 5000] [--repeats 3]

The pure-Python versions are kept here, as they were in rleif_kit/core/metrics.py up to 2026-12-05, so the
comparison can be rerun. Median seconds over ``--repeats`` (the variants interleaved, so load drifts hit both),
the ratio, and how far the intervals' ends moved (different random draws; same gain). Writes
reports/bench/metrics.json.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from rleif_kit.core import metrics  # noqa: E402


def python_roc_auc(labels, scores):
    pos = sum(1 for y in labels if y)
    neg = len(labels) - pos
    if pos == 0 or neg == 0:
        return None
    order = sorted(range(len(scores)), key=lambda i: scores[i])
    ranks, i = [0.0] * len(scores), 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and scores[order[j + 1]] == scores[order[i]]:
            j += 1
        for k in range(i, j + 1):
            ranks[order[k]] = (i + j) / 2 + 1
        i = j + 1
    return (sum(r for r, y in zip(ranks, labels) if y) - pos * (pos + 1) / 2) / (pos * neg)


def python_paired_bootstrap(a, b, resamples=2000, seed=0, level=0.95):
    diffs = [int(y) - int(x) for x, y in zip(a, b)]
    n, rng = len(diffs), random.Random(seed)
    stats = sorted(sum(diffs[rng.randrange(n)] for _ in range(n)) / n for _ in range(resamples))
    tail = (1 - level) / 2
    return sum(diffs) / n, stats[int(tail * resamples)], stats[min(resamples - 1, int((1 - tail) * resamples))]


def _time(fn, *args):
    start = time.perf_counter()
    out = fn(*args)
    return time.perf_counter() - start, out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=5000, help="items (the A/B) and scores (the AUC)")
    parser.add_argument("--repeats", type=int, default=3, help="runs per variant; the median is reported")
    args = parser.parse_args()
    rng = random.Random(1)
    sft = [rng.random() < 0.45 for _ in range(args.n)]
    ppo = [s if rng.random() < 0.9 else not s for s in sft]
    labels = [rng.random() < 0.5 for _ in range(args.n)]
    scores = [round(rng.random(), 2) for _ in range(args.n)]  # 2 decimals: many ties
    seconds = {k: [] for k in ("bootstrap_python", "bootstrap_numpy", "auc_python", "auc_numpy")}
    for _ in range(args.repeats):
        t, old = _time(python_paired_bootstrap, sft, ppo)
        seconds["bootstrap_python"].append(t)
        t, new = _time(metrics.paired_bootstrap, sft, ppo)
        seconds["bootstrap_numpy"].append(t)
        t, auc_old = _time(python_roc_auc, labels, scores)
        seconds["auc_python"].append(t)
        t, auc_new = _time(metrics.roc_auc, labels, scores)
        seconds["auc_numpy"].append(t)
    med = {k: statistics.median(v) for k, v in seconds.items()}
    out = {"n": args.n, "repeats": args.repeats, "median_s": {k: round(v, 4) for k, v in med.items()},
           "speedup": {"bootstrap": round(med["bootstrap_python"] / med["bootstrap_numpy"], 1),
                       "auc": round(med["auc_python"] / med["auc_numpy"], 1)},
           "bootstrap": {"python": [round(x, 4) for x in old], "numpy": [round(x, 4) for x in new]},
           "auc": {"python": auc_old, "numpy": auc_new}}
    path = ROOT / "reports" / "bench" / "metrics.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(out, indent=2) + "\n")
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
