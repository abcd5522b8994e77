"""MBPP's real data, issue 31: an entry point found the way the tests call it (a builtin name included: MBPP 126
names its function ``sum``), and one task's bad data recorded as that task's error, never the end of a run.
The records are written for the kit in MBPP's format (task_id, text, code, test_list, test_setup_code)."""

from __future__ import annotations

import json

import pytest

from rleif_kit.evaluation.scoring import check_code, summarize
from rleif_kit.worlds.benchmarks import load_items
from rleif_kit.worlds.code import mbpp

SUM_OF_DIVISORS = {  # MBPP 126's shape: the function the tests call shadows the builtin sum
    "task_id": 126, "text": "Write a python function to find the sum of common divisors of two given numbers.",
    "code": "def sum(a, b):\n    total = 0\n    for i in range(1, min(a, b)):\n        if a % i == 0 and b % i == 0:\n"
            "            total += i\n    return total",
    "test_list": ["assert sum(10,15) == 6", "assert sum(100,150) == 93", "assert sum(4,6) == 3"],
    "test_setup_code": "", "challenge_test_list": []}


@pytest.mark.parametrize("tests,code,name", [
    (SUM_OF_DIVISORS["test_list"], SUM_OF_DIVISORS["code"], "sum"),               # the reference code defines it
    (SUM_OF_DIVISORS["test_list"], "", "sum"),                                    # ... or every test calls it
    (["assert abs(max(3, 4)) == 4", "assert max(1, 2) == 2"], "", "max"),        # the innermost builtin call
    (["assert set(shared([1], [1])) == {1}"], "", "shared"),                      # a builtin around the function
    (["assert sorted(len_of(x)) == [1]"], "def helper(y):\n    pass\ndef len_of(x):\n    pass", "len_of"),
    (["assert first(second(1)) == 1"], "def second(x):\n    pass\ndef first(x):\n    pass", "first"),  # outermost
    (["assert list(map(str, [1])) == ['1']"], "def map(f, xs):\n    pass", "map"),
])
def test_the_entry_point_is_the_name_the_asserts_call(tests, code, name):
    assert mbpp.entry_point({"task_id": 1, "test_list": tests, "code": code}) == name


def test_a_builtin_named_entry_point_is_judged_like_any_other(tmp_path):
    data = tmp_path / "mbpp.jsonl"
    data.write_text(json.dumps(SUM_OF_DIVISORS) + "\n")
    item = load_items("mbpp", data=str(data))[0]
    assert item["problem"]["entry_point"] == "sum" and "error" not in item["problem"]
    assert "assert candidate(10, 15) == 6" in item["problem"]["test"]
    samples = [{"task_id": "126", "completion": SUM_OF_DIVISORS["code"]},
               {"task_id": "126", "completion": "def sum(a, b):\n    return a + b"},
               {"task_id": "126", "completion": "def common(a, b):\n    return 6"}]  # defines no sum: the builtin's
    rows = check_code(samples, {"126": item["problem"]}, benchmark="mbpp")
    assert [r["correct"] for r in rows] == [True, False, False], [r["result"] for r in rows]


BAD = [
    {"task_id": 21, "text": "Add one.", "code": "def inc(x):\n    return x + 1", "test_list": ["assert inc(1) == 2"]},
    {"task_id": 22, "text": "No tests at all."},                                             # no test_list
    {"task_id": 23, "text": "A test that does not parse.", "test_list": ["assert f(1 == 2"]},
    {"task_id": 24, "text": "Tests that call nothing.", "test_list": ["assert 1 == 1"]},
    {"task_id": 25, "test_list": ["assert g(1) == 1"]},                                      # no text
    {"task_id": 26, "text": "Tests that are not strings.", "test_list": [1, 2]},
]


def _bad_file(tmp_path):
    path = tmp_path / "mbpp.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in BAD))
    return path


def test_bad_tasks_are_items_with_their_reason(tmp_path):
    items = {it["id"]: it for it in load_items("mbpp", data=str(_bad_file(tmp_path)))}
    assert list(items) == ["21", "22", "23", "24", "25", "26"]  # every task keeps its place in the run
    assert "error" not in items["21"]["problem"]
    assert items["22"]["problem"]["error"] == "task 22: needs 'test_list', a list of assert lines"
    assert items["23"]["problem"]["error"].startswith("task 23: test 1 does not parse")
    assert items["24"]["problem"]["error"] == "task 24: no function call in its tests"
    assert items["25"]["problem"]["error"] == "task 25: needs 'text' (MBPP) or 'prompt' (MBPP+)"
    assert items["26"]["problem"]["error"] == "task 26: needs 'test_list', a list of assert lines"
    assert all(it["prompt"].endswith("### Response:") for it in items.values())  # each still has a prompt


def test_a_bad_task_is_a_failed_row_with_its_reason_counted_in_the_summary(tmp_path):
    items = load_items("mbpp", data=str(_bad_file(tmp_path)))
    samples = [{"task_id": it["id"], "completion": "def inc(x):\n    return x + 1"} for it in items]
    rows = check_code(samples, {it["id"]: it["problem"] for it in items}, benchmark="mbpp")
    assert [r["correct"] for r in rows] == [True, False, False, False, False, False]
    assert [r["judged"] for r in rows][1:] == ["task-error"] * 5
    assert rows[3]["result"] == "task error: task 24: no function call in its tests" == \
        "task error: " + rows[3]["task_error"]
    summary = summarize("mbpp", rows)
    assert summary["n_tasks"] == 6 and summary["task_errors"] == 5 and summary["pass@1"] == pytest.approx(1 / 6)


def test_the_cli_scores_a_file_with_bad_tasks_to_the_end(tmp_path, capsys):
    from rleif_kit.pipeline.cli import main

    samples = tmp_path / "samples.jsonl"
    samples.write_text("".join(json.dumps({"task_id": r["task_id"], "completion": "def inc(x):\n    return x + 1"})
                               + "\n" for r in BAD))
    out = tmp_path / "scored"
    assert main(["eval", "mbpp", "--samples", str(samples), "--data", str(_bad_file(tmp_path)), "--out", str(out)]) == 0
    rows = [json.loads(line) for line in (out / "mbpp.jsonl").read_text().splitlines()]
    assert len(rows) == 6 and sum(bool(r.get("task_error")) for r in rows) == 5
    assert "pass@1 0.167" in capsys.readouterr().out


def test_a_record_without_a_task_id_is_still_a_file_error(tmp_path):
    path = tmp_path / "mbpp.jsonl"
    path.write_text(json.dumps({"text": "x", "test_list": ["assert f(1) == 1"]}) + "\n")
    with pytest.raises(mbpp.MbppDataError, match="record 1: needs a task_id"):
        load_items("mbpp", data=str(path))
