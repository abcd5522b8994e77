"""Small, dependency-free metrics the reward models and diagnostics report.

Written out rather than imported from scikit-learn (not a dependency) and tested on hand values:
ROC AUC of per-step PRM scores against step labels, and the share of scores above a threshold.
"""

from __future__ import annotations

import random
from typing import Sequence


def roc_auc(labels: Sequence[bool], scores: Sequence[float]) -> float | None:
    """Probability that a random positive scores above a random negative (ties count half).

    This is the Mann-Whitney U statistic over ranks with averaged ties, equal to the area under the
    ROC curve. None when one class is absent: the AUC is undefined then, and 0.5 would be a lie.
    """
    if len(labels) != len(scores):
        raise ValueError(f"{len(labels)} labels but {len(scores)} scores")
    pos = sum(1 for y in labels if y)
    neg = len(labels) - pos
    if pos == 0 or neg == 0:
        return None
    order = sorted(range(len(scores)), key=lambda i: scores[i])
    ranks = [0.0] * len(scores)
    i = 0
    while i < len(order):  # average rank over a run of equal scores
        j = i
        while j + 1 < len(order) and scores[order[j + 1]] == scores[order[i]]:
            j += 1
        for k in range(i, j + 1):
            ranks[order[k]] = (i + j) / 2 + 1
        i = j + 1
    rank_sum = sum(r for r, y in zip(ranks, labels) if y)
    return (rank_sum - pos * (pos + 1) / 2) / (pos * neg)


def threshold_accuracy(labels: Sequence[bool], scores: Sequence[float], threshold: float = 0.5) -> float | None:
    """Share of items where ``score > threshold`` agrees with the label; None for no items."""
    if not labels:
        return None
    return sum((s > threshold) == bool(y) for y, s in zip(labels, scores)) / len(labels)


def paired_bootstrap(a: Sequence[bool], b: Sequence[bool], resamples: int = 2000, seed: int = 0,
                     level: float = 0.95) -> tuple[float, float, float]:
    """(mean(b) - mean(a), low, high): the accuracy gain of b over a on the same items, with a
    percentile interval from resampling items (pairs kept together, so item difficulty cancels)."""
    if len(a) != len(b) or not a:
        raise ValueError(f"paired results must have the same, non-zero length ({len(a)} vs {len(b)})")
    diffs = [int(y) - int(x) for x, y in zip(a, b)]
    n, rng = len(diffs), random.Random(seed)
    stats = sorted(sum(diffs[rng.randrange(n)] for _ in range(n)) / n for _ in range(resamples))
    tail = (1 - level) / 2
    return sum(diffs) / n, stats[int(tail * resamples)], stats[min(resamples - 1, int((1 - tail) * resamples))]


def mean_interval(values: Sequence[float], resamples: int = 2000, seed: int = 0,
                  level: float = 0.95) -> tuple[float, float, float]:
    """(mean, low, high): the mean of ``values`` with a percentile bootstrap interval (items resampled)."""
    if not values:
        raise ValueError("no values to average")
    n, rng = len(values), random.Random(seed)
    stats = sorted(sum(values[rng.randrange(n)] for _ in range(n)) / n for _ in range(resamples))
    tail = (1 - level) / 2
    return sum(values) / n, stats[int(tail * resamples)], stats[min(resamples - 1, int((1 - tail) * resamples))]
