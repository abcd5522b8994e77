"""checks/stage_failures.py: causes read from the error strings, which failures use up an item's attempts, when a
stage's failures stop it, and failures.json's parts (hand-worked)."""

from __future__ import annotations

import json

import pytest

from rleif_kit.checks import stage_failures as sf


@pytest.mark.parametrize("error, cause", [
    ("connection error: All connection attempts failed", "connection"),
    ("timeout after 30 s", "timeout"), ("rate limited (429): slow down", "rate limited"),
    ("http 503: overloaded", "http 5xx"), ("http 400: Server is pinned to 'x'; requested 'gpt-4o'.", "http 4xx"),
    ("api: http 500: boom", "http 5xx"),  # a judge's reason
    ("answer cut off at max_tokens = 128 (finish_reason length): raise it", "cut off"),
    ("unparseable: 'Ranking: A > A'", "unparseable"), ("empty response", "empty response"),
    ("reply too large: the body over api.max_reply_bytes = 4194304 (4 MiB); refused", "reply too large"),
    ("api: unencodable text: messages[1].content has \\ud800 at character 1; not sent", "unencodable text"),
    ("something new", "other"), (None, "other")])
def test_causes_come_from_the_error_strings_prefix(error, cause):
    assert sf.cause_of(error) == cause


def test_only_failures_of_the_request_itself_use_up_its_attempts():
    assert not sf.counts_against_item("connection error: refused")
    assert not sf.counts_against_item("http 502: bad gateway") and not sf.counts_against_item("timeout")
    assert sf.counts_against_item("http 400: context length") and sf.counts_against_item("unparseable")


def test_a_stage_stops_when_every_item_failed_or_past_its_threshold_and_only_then():
    def part(failed, total, limit=0.1):
        return sf.Failures("evolutions", total, {f"i{k}": "connection error: x" for k in range(failed)}).part(limit)

    assert sf.stop_reason(part(0, 10)) is None
    assert sf.stop_reason(part(1, 10)) is None  # 10% is not above 10%
    assert sf.stop_reason(part(2, 10)) == "2 of 10 evolutions failed (20% > 10%; mostly connection)"
    assert sf.stop_reason(part(3, 3, limit=1.0)) == "every one of 3 evolutions failed (mostly connection)"


def test_failures_json_keeps_one_part_per_kind_and_merges_their_causes(tmp_path):
    irm = sf.Failures("irm_judge labels", 4, {"g1": "api: http 500: x", "g2": "unparseable: 'A'"})
    sf.write(tmp_path, irm, 0.1)
    prm = sf.Failures("prm_judge labels", 10, {})
    record = sf.write(tmp_path, prm, 0.1)
    assert [p["what"] for p in record["parts"]] == ["irm_judge labels", "prm_judge labels"]
    assert record["status"] == "stopped" and record["total"] == 14 and record["failed"] == 2
    assert record["causes"] == {"http 5xx": {"count": 1, "example": "g1: api: http 500: x"},
                                "unparseable": {"count": 1, "example": "g2: unparseable: 'A'"}}
    record = sf.write(tmp_path, sf.Failures("irm_judge labels", 4, {}), 0.1)  # the rerun that retried them
    assert record["status"] == "ok" and record["failed"] == 0 and len(record["parts"]) == 2
    assert json.loads((tmp_path / sf.FILE).read_text()) == record
    sf.clear(tmp_path)
    assert sf.read(tmp_path) is None
    (tmp_path / sf.FILE).write_text("{torn")
    assert sf.read(tmp_path)["status"] == "stopped"  # unreadable: never taken for ok


def test_the_fan_outs_failed_siblings_stop_04_past_the_threshold(tmp_path):
    from conftest import ROOT, TINY_PARAMS, tiny_overrides
    from rleif_kit.core.config import load_config
    from rleif_kit.core.exits import StageIncomplete
    from rleif_kit.core.paths import RunPaths
    from rleif_kit.rewards.stage import stop_on_fanout_failures

    cfg = load_config(TINY_PARAMS, tiny_overrides(tmp_path / "run"), workdir=ROOT)
    paths = RunPaths(tmp_path / "run")
    stop_on_fanout_failures(cfg, paths, 20, {"s1": "connection error: refused"})  # 5%: ok, and written
    record = sf.read(paths.stage_dir("04_reward_models"))
    assert record["status"] == "ok" and record["parts"][0]["what"] == "fan-out evolutions"
    with pytest.raises(StageIncomplete, match=r"fan-out: stopped: 3 of 20 fan-out evolutions failed \(15% > 10%"):
        stop_on_fanout_failures(cfg, paths, 20, {f"s{i}": "http 502: bad gateway" for i in range(3)})
    assert sf.read(paths.stage_dir("04_reward_models"))["status"] == "stopped"
