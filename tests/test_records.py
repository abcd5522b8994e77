"""Recorded figures (rleif_kit.core.records): metrics.json keyed by stage, JSON-safe values, atomic writes."""

from __future__ import annotations

import json

import numpy as np
import pytest

from rleif_kit.core import records
from rleif_kit.core.records import read_records, record, set_target


@pytest.fixture(autouse=True)
def no_target(monkeypatch):
    """Each test starts as a fresh notebook: no target set (the module keeps it in a global)."""
    monkeypatch.setitem(records._current, "path", None)
    monkeypatch.setitem(records._current, "stage", None)


def test_round_trip_keyed_by_stage(tmp_path):
    metrics = tmp_path / "reports" / "run" / "metrics.json"  # parent folders made on first write
    set_target(metrics, "03_sft")
    assert record("accuracy_after", 0.42) == 0.42  # returned for the notebook cell to show
    record("steps", 400)
    assert read_records(metrics) == {"03_sft": {"accuracy_after": 0.42, "steps": 400}}


def test_two_stages_in_one_file(tmp_path):
    metrics = tmp_path / "metrics.json"
    set_target(metrics, "03_sft")
    record("accuracy_after", 0.42)
    set_target(metrics, "05_ppo")
    record("mean_reward", 0.3)
    record("kl", 0.01, stage="05_ppo_extra")  # an explicit stage wins over the target's
    assert read_records(metrics) == {"03_sft": {"accuracy_after": 0.42}, "05_ppo": {"mean_reward": 0.3},
                                     "05_ppo_extra": {"kl": 0.01}}


def test_record_again_replaces_value(tmp_path):
    set_target(tmp_path / "metrics.json", "03_sft")
    record("loss", 2.0)
    record("loss", 1.5)
    assert read_records(tmp_path / "metrics.json") == {"03_sft": {"loss": 1.5}}


def test_read_records_missing_file_is_empty(tmp_path):
    assert read_records(tmp_path / "none.json") == {}


@pytest.mark.parametrize("value, stored", [
    (np.float32(0.5), 0.5),
    (np.int64(7), 7),
    (np.bool_(True), True),
    (float("nan"), None),
    (np.nan, None),
    (float("inf"), None),
    (np.float64("-inf"), None),
    ({"a": [1.0, float("nan")], 2: (np.int32(3),)}, {"a": [1.0, None], "2": [3]}),  # keys become strings
    (np.array([0.25, np.nan]), [0.25, None]),                  # arrays: .item() alone fails on >1 element
    (np.array([[1, 2], [3, 4]]), [[1, 2], [3, 4]]),
    (np.array(3.5), 3.5),                                      # a 0-d array is a scalar
])
def test_values_become_json_safe(tmp_path, value, stored):
    set_target(tmp_path / "metrics.json", "s")
    record("x", value)
    text = (tmp_path / "metrics.json").read_text()
    assert "NaN" not in text and "Infinity" not in text  # strict JSON
    assert json.loads(text) == {"s": {"x": stored}}


def test_record_before_set_target_raises():
    with pytest.raises(RuntimeError, match=r"record\(\) needs setup\(\.\.\.\) to have run first"):
        record("accuracy", 0.5)


def test_write_leaves_no_tmp_files(tmp_path):
    set_target(tmp_path / "metrics.json", "s")
    for i in range(3):
        record(f"v{i}", i)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["metrics.json"]


def test_failed_write_keeps_old_file_and_no_tmp(tmp_path):
    set_target(tmp_path / "metrics.json", "s")
    record("ok", 1)
    with pytest.raises(TypeError):
        record("bad", {1, 2})  # a set is not JSON
    assert sorted(p.name for p in tmp_path.iterdir()) == ["metrics.json"]
    assert read_records(tmp_path / "metrics.json") == {"s": {"ok": 1}}


def test_verdicts_are_recorded_as_statuses_and_whole(tmp_path):
    from rleif_kit.core.records import read_records, record, set_target
    from rleif_kit.core.verdict import Verdict

    set_target(tmp_path / "metrics.json", "05_ppo")
    gate = [Verdict("low_ra_share", "ok", {"share": 0.68}, {"healthy": [0.2, 0.8]}, "fine"),
            Verdict("kl_blowup", "warn", {"max_kl": 6.0}, {"warn_above": 5.0})]
    assert record("verdicts", gate) == {"low_ra_share": "ok", "kl_blowup": "warn"}
    got = read_records(tmp_path / "metrics.json")["05_ppo"]
    assert got["verdicts"] == {"low_ra_share": "ok", "kl_blowup": "warn"}
    assert got["verdict_details"][0] == {"check": "low_ra_share", "status": "ok", "numbers": {"share": 0.68},
                                         "thresholds": {"healthy": [0.2, 0.8]}, "advice": "fine", "source": ""}
    record("verdicts", {"x": "ok"})  # a plain dict stays as it is
    assert read_records(tmp_path / "metrics.json")["05_ppo"] == {"verdicts": {"x": "ok"}}  # the old details gone
