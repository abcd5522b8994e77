"""core/metrics.py in numpy (issue 32): the AUC equals the rank formula written out by hand, ties and all; the
bootstrap keeps its contract (the gain exact, the interval around it, a seed repeats it)."""

from __future__ import annotations

import random
import sys
from pathlib import Path

import pytest

from rleif_kit.core.metrics import mean_interval, paired_bootstrap, roc_auc

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from bench_metrics import python_roc_auc  # noqa: E402 - the pure-Python version it replaced


def test_roc_auc_on_hand_worked_ties():
    # scores 0.2 0.5 0.5 0.9 -> ranks 1, 2.5, 2.5, 4; positives at 0.5 and 0.9: (2.5 + 4 - 3) / (2 * 2) = 0.875
    assert roc_auc([0, 1, 0, 1], [0.2, 0.5, 0.5, 0.9]) == 0.875
    assert roc_auc([1, 1, 1, 0, 0, 0], [0.5] * 6) == 0.5


@pytest.mark.parametrize("seed", range(5))
def test_roc_auc_equals_the_rank_formula_on_random_scores_with_ties(seed):
    rng = random.Random(seed)
    n = rng.randrange(2, 300)
    labels = [rng.random() < 0.3 for _ in range(n)]
    scores = [rng.choice([0.1, 0.2, 0.5, rng.random()]) for _ in range(n)]
    expected = python_roc_auc(labels, scores)
    assert (roc_auc(labels, scores) is None) if expected is None else roc_auc(labels, scores) == pytest.approx(expected)


def test_the_paired_bootstrap_keeps_the_exact_gain_an_interval_around_it_and_repeats_with_its_seed():
    a = [True] * 45 + [False] * 55
    b = a[:40] + [False] * 5 + [True] * 10 + [False] * 45  # 5 right turned wrong, 10 wrong turned right: +5 points
    gain, low, high = paired_bootstrap(a, b)
    assert gain == pytest.approx(0.05) and low < gain < high and -0.1 < low and high < 0.2
    assert paired_bootstrap(a, b) == (gain, low, high) and paired_bootstrap(a, b, seed=1) != (gain, low, high)
    assert paired_bootstrap(a, a) == (0.0, 0.0, 0.0)
    mean, lo, hi = mean_interval([1.0, 2.0, 3.0, 4.0])
    assert mean == 2.5 and 1.0 <= lo < 2.5 < hi <= 4.0
    with pytest.raises(ValueError):
        paired_bootstrap([], [])
