"""Small metrics the reward models and diagnostics report, in numpy (which torch brings).

Written out rather than imported from scikit-learn (not a dependency) and tested on hand values: ROC AUC of
per-step PRM scores against step labels, the share of scores above a threshold, and percentile bootstrap
intervals. The bootstrap draws with numpy's PCG64 generator, seeded: at n = 5,000 items and 2,000 resamples it
takes a fraction of a second where the pure-Python loop it replaced took seconds
(``benchmarks/bench_metrics.py``); its draws differ from that loop's, so an interval's ends may move in the
third decimal (the gain itself does not).
"""

from __future__ import annotations

from typing import Any, Sequence

_CHUNK_DRAWS = 2_000_000  # resampled indices held at once (16 MB of int64)


def roc_auc(labels: Sequence[bool], scores: Sequence[float]) -> float | None:
    """Probability that a random positive scores above a random negative (ties count half).

    This is the Mann-Whitney U statistic over ranks with averaged ties, equal to the area under the
    ROC curve. None when one class is absent: the AUC is undefined then, and 0.5 would be a lie.
    """
    import numpy as np  # heavy-ish: loaded on first use

    if len(labels) != len(scores):
        raise ValueError(f"{len(labels)} labels but {len(scores)} scores")
    y = np.asarray(labels, dtype=bool)
    pos = int(y.sum())
    neg = len(y) - pos
    if pos == 0 or neg == 0:
        return None
    x = np.asarray(scores, dtype=float)
    order = np.argsort(x, kind="mergesort")
    xs = x[order]
    starts = np.flatnonzero(np.r_[True, xs[1:] != xs[:-1]])  # first index of each run of equal scores
    ends = np.r_[starts[1:], len(xs)] - 1
    run_rank = (starts + ends) / 2 + 1  # the average rank over a run of ties
    ranks = np.empty(len(xs))
    ranks[order] = np.repeat(run_rank, ends - starts + 1)
    rank_sum = float(ranks[y].sum())
    return (rank_sum - pos * (pos + 1) / 2) / (pos * neg)


def threshold_accuracy(labels: Sequence[bool], scores: Sequence[float], threshold: float = 0.5) -> float | None:
    """Share of items where ``score > threshold`` agrees with the label; None for no items."""
    if not labels:
        return None
    return sum((s > threshold) == bool(y) for y, s in zip(labels, scores)) / len(labels)


def _bootstrap(values: Sequence[float], resamples: int, seed: int, level: float) -> tuple[float, float, float]:
    """(mean, low, high) of ``values`` with a percentile interval over ``resamples`` resamples of the items."""
    import numpy as np  # heavy-ish: loaded on first use

    x = np.asarray(values, dtype=float)
    n, rng = len(x), np.random.default_rng(seed)
    means = np.empty(resamples)
    per_chunk = max(1, _CHUNK_DRAWS // n)
    for start in range(0, resamples, per_chunk):
        k = min(per_chunk, resamples - start)
        means[start:start + k] = x[rng.integers(0, n, size=(k, n))].mean(axis=1)
    means.sort()
    tail = (1 - level) / 2
    return float(x.mean()), float(means[int(tail * resamples)]), float(means[min(resamples - 1,
                                                                                  int((1 - tail) * resamples))])


def paired_bootstrap(a: Sequence[bool], b: Sequence[bool], resamples: int = 2000, seed: int = 0,
                     level: float = 0.95) -> tuple[float, float, float]:
    """(mean(b) - mean(a), low, high): the accuracy gain of b over a on the same items, with a
    percentile interval from resampling items (pairs kept together, so item difficulty cancels)."""
    if len(a) != len(b) or not a:
        raise ValueError(f"paired results must have the same, non-zero length ({len(a)} vs {len(b)})")
    return _bootstrap([int(y) - int(x) for x, y in zip(a, b)], resamples, seed, level)


def mean_interval(values: Sequence[float], resamples: int = 2000, seed: int = 0,
                  level: float = 0.95) -> tuple[float, float, float]:
    """(mean, low, high): the mean of ``values`` with a percentile bootstrap interval (items resampled)."""
    if not values:
        raise ValueError("no values to average")
    return _bootstrap(values, resamples, seed, level)


def truth_figures(correct: Sequence[bool | None], rewards: Sequence[float]) -> dict[str, Any]:
    """AUC of ``rewards`` over right vs wrong responses and the mean reward of each; responses the verifier
    cannot judge (None) are left out. ``auc`` is None when one class is missing."""
    pairs = [(bool(c), float(r)) for c, r in zip(correct, rewards) if c is not None]
    right = [r for c, r in pairs if c]
    wrong = [r for c, r in pairs if not c]
    return {"n": len(pairs), "right": len(right),
            "auc": roc_auc([c for c, _ in pairs], [r for _, r in pairs]) if pairs else None,
            "right_mean": sum(right) / len(right) if right else None,
            "wrong_mean": sum(wrong) / len(wrong) if wrong else None}
