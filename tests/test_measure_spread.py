"""The rule that sets the regression tolerances from measured runs (tools/measure_spread.py), on hand-worked
figures: pure arithmetic, no run."""

from __future__ import annotations

import sys

from conftest import ROOT

sys.path.insert(0, str(ROOT / "tools"))
from measure_spread import tolerance  # noqa: E402 - a script's function, imported from its folder


def test_a_figure_identical_in_every_run_keeps_its_value_and_tolerance():
    assert tolerance([505, 505, 505], [514, 515], 0) == (505, 0)  # a count the data decide: other seeds do not matter
    assert tolerance([0.0, 0.0], [0.1], 0.01) == (0.0, 0.01)


def test_a_figure_that_moved_takes_the_middle_and_the_whole_range():
    # tiny-code's gain, 2026-12-02/04: Intel pinned 0.2367, Intel native 0.24, AMD pinned 0.2533 -> middle 0.245,
    # range 0.0166 -> 0.017 (rounded up); other seeds 0.2333 and 0.27: half of |0.27 - 0.245| = 0.0125 < 0.017
    assert tolerance([0.2367, 0.24, 0.2533], [0.2333, 0.27], 0) == (0.245, 0.017)


def test_another_seed_far_away_widens_the_tolerance_by_half_its_distance():
    # middle 0.505, range 0.01; a seed at 0.30 is 0.205 away: half of it, 0.1025, rounds up to 0.103
    assert tolerance([0.50, 0.51], [0.30], 0) == (0.505, 0.103)


def test_the_tolerance_never_falls_below_the_earlier_one():
    assert tolerance([0.50, 0.51], [], 0.05) == (0.505, 0.05)  # range 0.01 < 0.05
    assert tolerance([500, 520], [], 0) == (510, 20)  # counts keep whole numbers
