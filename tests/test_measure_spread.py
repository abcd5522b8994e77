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


def test_summary_leaves_out_the_earlier_runs_of_a_changed_figure_but_keeps_its_tolerance(tmp_path, monkeypatch):
    """``summary --changed``: a figure the code changed since is set from the new runs alone, with its earlier
    tolerance as a floor; an unchanged one keeps counting the runs behind the earlier baselines."""
    import json

    import measure_spread

    (tmp_path / "tests" / "baselines").mkdir(parents=True)
    path = tmp_path / "tests" / "baselines" / "toy.json"
    path.write_text(json.dumps({"s": {"a": {"value": 0.5, "tolerance": 0.02, "seen": [0.49, 0.51]},
                                      "b": {"value": 0.3, "tolerance": 0.05, "seen": [0.3, 0.3]}}}))
    run = tmp_path / "spread" / "toy" / "pinned-s42"
    run.mkdir(parents=True)
    about = {"variant": "pinned", "seed": 42, "loaded": False, "seconds": 1, "cpu": "test"}
    (run / "figures.json").write_text(json.dumps({"about": about, "figures": {"s.a": 0.6, "s.b": 0.3}}))
    monkeypatch.setattr(measure_spread, "ROOT", tmp_path)
    monkeypatch.setattr(measure_spread, "SPREAD_DIR", tmp_path / "spread")
    monkeypatch.setattr(measure_spread, "_preset_seed", lambda preset: 42)

    measure_spread.summary("toy", write=True)  # a's earlier runs 0.49, 0.51, 0.5 count beside 0.6
    a = json.loads(path.read_text())["s"]["a"]
    assert (a["value"], a["tolerance"]) == (0.545, 0.11)  # the middle of 0.49..0.6 and its whole range

    path.write_text(json.dumps({"s": {"a": {"value": 0.5, "tolerance": 0.02, "seen": [0.49, 0.51]},
                                      "b": {"value": 0.3, "tolerance": 0.05, "seen": [0.3, 0.3]}}}))
    measure_spread.summary("toy", write=True, changed=("s.a",))
    written = json.loads(path.read_text())
    assert (written["s"]["a"]["value"], written["s"]["a"]["tolerance"]) == (0.6, 0.02)  # the new run; the old floor
    assert (written["s"]["b"]["value"], written["s"]["b"]["tolerance"]) == (0.3, 0.05)  # unchanged: as before
    assert "except for the figures under s.a" in written["_measured"]["rule"]
