"""HumanEval+ / MBPP+ scored as EvalPlus scores them: base and extra inputs against the reference's outputs.

The release files here are written for the kit in EvalPlus's release format (``task_id``, ``prompt``,
``entry_point``, ``canonical_solution``, ``base_input``, ``plus_input``, ``atol``); the expected verdicts are worked by
hand from EvalPlus's comparison rule.
"""

from __future__ import annotations

import gzip
import json

import pytest

from rleif_kit.evaluation.scoring import check_code, summarize
from rleif_kit.worlds.benchmarks import load_items
from rleif_kit.worlds.code import evalplus
from rleif_kit.worlds.code.evalplus import mbpp_inputs
from rleif_kit.worlds.code.value_tests import Case

HUMANEVAL_PLUS = [
    {"task_id": "HumanEval/0", "prompt": "def add(a, b):\n    \"\"\"The sum of a and b.\"\"\"\n",
     "entry_point": "add", "canonical_solution": "    return a + b\n", "atol": 0,
     "base_input": [[1, 2], [3, 4]], "plus_input": [[-5, 5], [10 ** 12, 1], [0, 0]],
     "test": "def check(candidate):\n    assert candidate(1, 2) == 3\n"},
    {"task_id": "HumanEval/1", "prompt": "def mean(xs):\n    \"\"\"The mean of xs.\"\"\"\n",
     "entry_point": "mean", "canonical_solution": "    return sum(xs) / len(xs)\n", "atol": 0,
     "base_input": [[[1.0, 2.0]], [[0.1, 0.2]]], "plus_input": [[[1e-3, 2e-3, 3e-3]], [[float(7)] * 3]]},
    {"task_id": "HumanEval/32", "prompt": "def find_zero(xs):\n    \"\"\"A root of the polynomial xs.\"\"\"\n",
     "entry_point": "find_zero", "atol": 1e-4,
     "canonical_solution": "    lo, hi = -100.0, 100.0\n    f = lambda x: sum(c * x ** i for i, c in enumerate(xs))\n"
                           "    for _ in range(200):\n        mid = (lo + hi) / 2\n"
                           "        if (f(lo) < 0) == (f(mid) < 0):\n            lo = mid\n        else:\n"
                           "            hi = mid\n    return lo\n",
     "base_input": [[[-2.0, 1.0]]], "plus_input": [[[-6.0, 1.0]], [[4.0, -1.0]]]},
]

RIGHT = {"HumanEval/0": "    return a + b\n", "HumanEval/1": "    return sum(xs) / len(xs)\n",
         "HumanEval/32": "    return -xs[0] / xs[1]\n"}


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("RLEIF_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))  # no evalplus copy of this machine's is read


def _write(path, rows, gz=False):
    text = "".join(json.dumps(r) + "\n" for r in rows)
    if gz:
        with gzip.open(path, "wt", encoding="utf-8") as f:
            f.write(text)
    else:
        path.write_text(text)
    return path


def _score(items, completions, timeout=10):
    samples = [{"id": f"{tid}#0", "task_id": tid, "completion_id": 0, "completion": c} for tid, c in completions]
    return check_code(samples, {it["id"]: it["problem"] for it in items}, timeout=timeout, workers=2)


def test_mbpp_inputs_take_the_types_their_functions_take():
    assert mbpp_inputs(2, [[[3, 4], [4, 5]]]) == [[(3, 4), (4, 5)]]
    assert mbpp_inputs(63, [[[[1, 2], [3, 4]]]]) == [[[(1, 2), (3, 4)]]]
    assert mbpp_inputs(106, [[[1], [2, 3]]]) == [[[1], (2, 3)]]
    assert mbpp_inputs(115, [[[[1], []]]]) == [[[{1}, {}]]]  # an empty one is a dict, as EvalPlus reads it
    assert mbpp_inputs(124, [["1.5", "(1+2j)"]]) == [[1.5, 1 + 2j]]
    assert mbpp_inputs(580, [[[1, [2, [3]]]]]) == [((1, (2, (3,))),)]
    assert mbpp_inputs(722, [[{"a": [1, 2]}, 3]]) == [[{"a": (1, 2)}, 3]]
    assert mbpp_inputs(11, [[1, [2]]]) == [[1, [2]]]  # every other task as the file has it


@pytest.mark.parametrize("dataset, entry, atol, expected, got, ok", [
    ("humanevalplus", "f", 0, 3, 3, True),
    ("humanevalplus", "f", 0, 3, 3.0, True),  # == as Python has it
    ("humanevalplus", "f", 0, [1, 2], (1, 2), False),
    ("humanevalplus", "f", 1e-6, 0.3, 0.1 + 0.2, True),
    ("humanevalplus", "f", 1e-6, 0.3, 0.31, False),
    ("humanevalplus", "f", 1e-6, [0.3, 0.6], [0.1 + 0.2, 0.6], True),
    ("humanevalplus", "f", 1e-6, [0.3, 0.6], [0.3], False),  # another length
    ("humanevalplus", "f", 1e-6, 0.3, "0.3", False),  # another type
    ("mbppplus", "similar_elements", 0, (4, 5), (5, 4), True),  # set equality
    ("mbppplus", "similar_elements", 0, (4, 5), (5, 6), False),
    ("mbppplus", "text_match_three", 0, True, ["some"], True),  # "not None"
    ("mbppplus", "text_match_three", 0, True, ["none"], False),
    ("mbppplus", "text_match_three", 0, False, False, True),  # a bool is compared as it is
    ("mbppplus", "sum_div", 0, 7, 0, True),
    ("mbppplus", "are_equivalent", 0, True, "anything", True),
])
def test_the_comparison_is_evalplus_s(dataset, entry, atol, expected, got, ok):
    assert evalplus._judged(dataset, entry, atol, Case((), "rule", expected), got) is ok


def test_find_zero_is_judged_by_the_root_not_by_the_reference_s_value():
    case = Case(([-2.0, 1.0],), "rule", 1.99)
    assert evalplus._judged("humanevalplus", "find_zero", 1e-4, case, 2.0)
    assert not evalplus._judged("humanevalplus", "find_zero", 1e-4, case, 1.9)


def test_humaneval_plus_scores_base_and_plus_from_a_release_file(tmp_path):
    path = _write(tmp_path / "HumanEvalPlus.jsonl.gz", HUMANEVAL_PLUS, gz=True)
    items = load_items("humanevalplus", data=str(path))
    assert [it["id"] for it in items] == ["HumanEval/0", "HumanEval/1", "HumanEval/32"]
    parts = items[0]["problem"]["evalplus"]["parts"]
    assert [len(parts["base"]["inputs"]), len(parts["plus"]["inputs"])] == [2, 3]
    rows = _score(items, [
        *RIGHT.items(),
        ("HumanEval/0", "    return a + b if a < 100 else 0\n"),  # right on the base inputs only
        ("HumanEval/0", "    return a - b\n"),  # wrong on the base too
        ("HumanEval/1", "    return round(sum(xs) / len(xs), 2)\n"),  # off by more than 1e-6 on plus
        ("HumanEval/0", "    print('passed'); raise SystemExit(0)\n"),  # hostile: a marker and a clean exit
    ])
    got = [(r["task_id"], r["base_correct"], r["correct"]) for r in rows]
    assert got == [("HumanEval/0", True, True), ("HumanEval/1", True, True), ("HumanEval/32", True, True),
                   ("HumanEval/0", True, False), ("HumanEval/0", False, False), ("HumanEval/1", True, False),
                   ("HumanEval/0", False, False)]
    assert rows[3]["result"].startswith("plus inputs: failed") and rows[4]["result"].startswith("base inputs:")
    summary = summarize("humanevalplus", rows)
    assert summary["base_accuracy"] == pytest.approx(5 / 7) and summary["accuracy"] == pytest.approx(3 / 7)


def test_the_reference_runs_once_per_data_set(tmp_path, monkeypatch):
    path = _write(tmp_path / "he.jsonl", HUMANEVAL_PLUS[:1])
    first = load_items("humanevalplus", data=str(path))

    def no_sandbox(*a, **k):
        raise AssertionError("the reference ran again")

    monkeypatch.setattr("rleif_kit.worlds.code.evalplus.run_many", no_sandbox)
    assert load_items("humanevalplus", data=str(path)) == first
    changed = [{**HUMANEVAL_PLUS[0], "plus_input": [[2, 2]]}]
    with pytest.raises(AssertionError, match="ran again"):  # new inputs: new outputs
        load_items("humanevalplus", data=str(_write(tmp_path / "he2.jsonl", changed)))


def test_a_timeout_on_the_plus_inputs_leaves_the_base_verdict(tmp_path):
    slow = [{**HUMANEVAL_PLUS[0], "plus_input": [[-1, 1]]}]
    items = load_items("humanevalplus", data=str(_write(tmp_path / "he.jsonl", slow)))
    rows = _score(items, [("HumanEval/0", "    while a < 0:\n        pass\n    return a + b\n")], timeout=2)
    assert rows[0]["base_correct"] is True and rows[0]["correct"] is False
    assert "timed out" in rows[0]["result"]


MBPP_PLUS = [
    {"task_id": "Mbpp/2", "prompt": "\"\"\"\nWrite a function to find the shared elements of two lists.\n"
                                    "assert set(similar_elements((3, 4, 5, 6),(5, 7, 4, 10))) == set((4, 5))\n\"\"\"\n",
     "entry_point": "similar_elements", "atol": 0,
     "canonical_solution": "def similar_elements(a, b):\n    return tuple(set(a) & set(b))\n",
     "base_input": [[[3, 4, 5, 6], [5, 7, 4, 10]]], "plus_input": [[[1, 2], [2, 1]], [[], [1]]]},
    {"task_id": "Mbpp/787", "prompt": "\"\"\"\nWrite a function that matches an a followed by three b.\n"
                                      "assert not text_match_three(\"ac\")\n\"\"\"\n",
     "entry_point": "text_match_three", "atol": 0,
     "canonical_solution": "import re\ndef text_match_three(text):\n    return re.search('ab{3}?', text)\n",
     "base_input": [["ac"], ["abbbba"]], "plus_input": [["xabbb"], [""]]},
    {"task_id": "Mbpp/252", "prompt": "\"\"\"\nWrite a function to convert complex numbers to polar coordinates.\n"
                                      "assert convert(1) == (1.0, 0.0)\n\"\"\"\n",
     "entry_point": "convert", "atol": 0,
     "canonical_solution": "import cmath\ndef convert(z):\n    return cmath.polar(z)\n",
     "base_input": [["1"]], "plus_input": [["(1+1j)"], ["-2j"]]},
]


def test_mbpp_plus_from_a_release_file_runs_its_extra_inputs(tmp_path):
    items = load_items("mbppplus", data=str(_write(tmp_path / "MbppPlus.jsonl", MBPP_PLUS)))
    assert items[0]["prompt"].count("similar_elements((3, 4, 5, 6),(5, 7, 4, 10))") == 1  # the prompt is as before
    rows = _score(items, [
        ("Mbpp/2", "def similar_elements(a, b):\n    return tuple(sorted(set(b) & set(a)))\n"),  # any order
        ("Mbpp/2", "def similar_elements(a, b):\n    return tuple(x for x in a if x in b and x != 1)\n"),
        ("Mbpp/787", "import re\ndef text_match_three(text):\n    return re.search('abbb', text)\n"),
        ("Mbpp/787", "def text_match_three(text):\n    return text.startswith('ab')\n"),  # a bool: as it is
        ("Mbpp/787", "def text_match_three(text):\n    return None\n"),
        ("Mbpp/252", "import cmath\ndef convert(z):\n    return cmath.polar(z)\n"),
        ("Mbpp/252", "def convert(z):\n    return (abs(z), 0.0)\n"),
    ])
    assert [(r["base_correct"], r["correct"]) for r in rows] == [
        (True, True), (True, False), (True, True), (True, False), (False, False), (True, True), (True, False)]


def test_mbpp_plus_without_extra_inputs_runs_its_tests_and_has_no_base_score(tmp_path):
    rows = [{"task_id": "Mbpp/11", "prompt": "\"\"\"\nRemove the first and last x.\nassert f('xax', 'x') == 'a'\n\"\"\"\n",
             "test_list": ["assert f('xax', 'x') == 'a'"], "entry_point": "f"}]
    items = load_items("mbppplus", data=str(_write(tmp_path / "m.jsonl", rows)))
    assert "evalplus" not in items[0]["problem"]
    out = _score(items, [("Mbpp/11", "def f(s, c):\n    return s.strip(c)\n")])
    assert out[0]["correct"] and "base_correct" not in out[0]
    assert summarize("mbppplus", out)["base_accuracy"] is None


def test_bad_release_files_are_one_line_each(tmp_path):
    with pytest.raises(FileNotFoundError, match="HumanEvalPlus.jsonl.gz and set eval.humanevalplus_path"):
        load_items("humanevalplus")
    bad = _write(tmp_path / "bad.jsonl", [{"task_id": "HumanEval/0", "prompt": "def f():\n"}])
    with pytest.raises(evalplus.PlusDataError, match="record 1: not an EvalPlus release record .missing entry_point"):
        load_items("humanevalplus", data=str(bad))
    (tmp_path / "cut.jsonl.gz").write_bytes(gzip.compress(b'{"task_id": 1}\n')[:-9])
    with pytest.raises(evalplus.PlusDataError, match="not a readable gzip file"):
        load_items("humanevalplus", data=str(tmp_path / "cut.jsonl.gz"))
    wrong = [{**HUMANEVAL_PLUS[0], "canonical_solution": "    return a / (b - 4)\n"}]  # fails on (3, 4)
    with pytest.raises(evalplus.PlusDataError, match="HumanEval/0: its reference solution failed on its base inputs "
                                                     r"\(ZeroDivisionError"):
        load_items("humanevalplus", data=str(_write(tmp_path / "w.jsonl", wrong)))


def test_inputs_a_literal_cannot_write_reach_the_program(tmp_path):
    rows = [{**HUMANEVAL_PLUS[0], "task_id": "HumanEval/2", "prompt": "def f(x):\n", "entry_point": "f",
             "canonical_solution": "    return x == x\n", "base_input": [[float("nan")]], "plus_input": [[float("inf")]]}]
    path = tmp_path / "nan.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))  # NaN and Infinity, as Python's json writes them
    items = load_items("humanevalplus", data=str(path))
    out = _score(items, [("HumanEval/2", "    return x == x\n"), ("HumanEval/2", "    return True\n")])
    assert [(r["base_correct"], r["correct"]) for r in out] == [(True, True), (False, False)]
