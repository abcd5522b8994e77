"""06's breakdown by task family (``evaluation/families.py``), the code world's failure classes
(``CodeWorld.failure_class``), the family each eval row carries, and what 06's notebook shows of them: results
without figures that do not apply, wrong answers one of each failure first with the program whole, the intro in
the run's words.

Hand-made rows against counts worked out by hand; files under tmp_path only; no model, no sandbox, no network.
"""

from __future__ import annotations

import pytest
from conftest import ROOT, TINY_PARAMS

from rleif_kit.core.config import load_config
from rleif_kit.core.jsonl import write_jsonl
from rleif_kit.core.paths import RunPaths
from rleif_kit.evaluation.families import family_breakdown, family_rows, has_families, share
from rleif_kit.evaluation.stage import EvalResult, eval_intro, with_families, wrong_answer_rows, wrong_answers
from rleif_kit.worlds.arith.world import WORLD as ARITH
from rleif_kit.worlds.benchmarks import item_family
from rleif_kit.worlds.code.world import WORLD as CODE
from rleif_kit.worlds.tiny_code.world import WORLD as TINY_CODE, benchmark_item

CODE_PARAMS = ROOT / "params" / "tiny-code.toml"


# ------------------------------------------------------------------ why a program failed


def row(result, completion="def f(x):\n    return x", correct=False, **extra):
    return {"id": "t#0", "task_id": "t", "completion": completion, "correct": correct, "result": result, **extra}


@pytest.mark.parametrize("result, completion, expected", [
    ("passed", "def f(x):\n    return x", None),  # a passed row has no failure
    ("failed: SyntaxError: unmatched ')'", "def f(x):\n    return x)", "syntax error"),
    ("failed: IndentationError: unexpected indent", " def f(x): return x", "syntax error"),
    ("failed: case 1 returned a wrong value", "def f(x):\n    return x", "wrong value"),
    ("failed: case 2 returned no plain value", "def f(x):\n    return object()", "wrong value"),
    ("failed: AssertionError", "def f(x):\n    return x", "wrong value"),  # a test run in the evaluator
    ("plus inputs: failed: case 3 returned a wrong value", "def f(x):\n    return x", "wrong value"),  # EvalPlus
    ("failed: case 1 raised NameError: name 'hi' is not defined", "def f(m, b):\n    return m - hi", "exception"),
    ("failed: the candidate raised ZeroDivisionError: division by zero", "def f(x):\n    return 1 / 0", "exception"),
    ("failed: ValueError: boom", "raise ValueError('boom')", "exception"),  # raised at import
    ("exited before the tests finished", "import os\nos._exit(0)", "exception"),
    ("timed out after 10s", "def f(x):\n    while True: pass", "timeout"),
    ("killed by SIGXCPU", "def f(x):\n    while True: pass", "timeout"),  # the CPU-time limit
    ("killed by SIGKILL", "def f(x):\n    return [0] * 10 ** 12", "killed"),
    ("failed: case 1 raised NameError: the completion defines no f", "", "no code"),  # nothing was cut out
    ("task error: the task has no tests", "def f(x):\n    return x", "task error"),
    ("sandbox error: could not start", "def f(x):\n    return x", "other"),
])
def test_the_code_world_classes_each_failure_by_its_result(result, completion, expected):
    assert CODE.failure_class(row(result, completion, correct=result == "passed")) == expected
    assert TINY_CODE.failure_class(row(result, completion, correct=result == "passed")) == expected  # inherited


def test_a_world_that_does_not_class_failures_says_none():
    assert ARITH.failure_class({"id": "a", "correct": False, "answer": "7", "gold": "8"}) is None


# ------------------------------------------------------------------ the family each row carries


def test_eval_items_carry_their_family_and_math_its_subject():
    record = {"id": "h1", "question": "Write f(a, b) ...", "problem": {
        "family": "range", "variant": "sum", "names": ["a", "b"], "ops": [], "entry_point": "f",
        "tests": ["assert f(1, 3) == 6"]}}
    item = benchmark_item(record)
    assert item["family"] == "range" and item_family("tiny_code", item) == "range"
    assert item_family("math", {"id": "m1", "question": "q", "gold": "1", "type": "Algebra"}) == "Algebra"
    assert item_family("gsm8k", {"id": "g1", "question": "q", "gold": "1"}) is None
    assert item_family("humaneval", {"id": "HumanEval/0", "problem": {"prompt": "def f(): ..."}}) is None


def test_rows_of_an_older_run_get_their_items_family_and_a_row_keeps_its_own():
    items = [{"id": "t1", "family": "range"}, {"id": "t2", "family": "slice"}, {"id": "t3"}]
    rows = [{"id": "t1#0", "task_id": "t1"}, {"id": "t2#0", "task_id": "t2", "family": "kept"},
            {"id": "t3#0", "task_id": "t3"}]
    assert [r.get("family") for r in with_families("tiny_code", rows, items)] == ["range", "kept", None]
    math = with_families("math", [{"id": "m1"}], [{"id": "m1", "type": "Geometry"}])
    assert math == [{"id": "m1", "family": "Geometry"}]


# ------------------------------------------------------------------ the breakdown

WV, SE = "failed: case 1 returned a wrong value", "failed: SyntaxError: invalid syntax"


def rows_of(spec):
    """(family, correct, result) triples as rows."""
    return [{"id": f"t{i}#0", "task_id": f"t{i}", "family": fam, "correct": ok, "completion": "x = 1",
             "result": "passed" if ok else why} for i, (fam, ok, why) in enumerate(spec)]


SFT = rows_of([("range", False, WV), ("range", False, WV), ("slice", False, WV), ("slice", False, SE),
               ("expr", True, None)])
PPO = rows_of([("range", True, None), ("range", True, None), ("slice", False, SE), ("slice", False, SE),
               ("expr", True, None)])


def test_breakdown_by_family_counts_right_and_failures_per_model_by_hand():
    got = family_breakdown({"sft": SFT, "ppo": PPO}, CODE.failure_class)
    assert [e["family"] for e in got] == ["expr", "range", "slice", "all"]  # by name, then all of them
    expr, range_, slice_, total = got
    assert range_ == {"family": "range", "n": {"sft": 2, "ppo": 2}, "right": {"sft": 0, "ppo": 2},
                      "failures": {"sft": {"wrong value": 2}, "ppo": {}}}
    assert slice_["right"] == {"sft": 0, "ppo": 0}
    assert slice_["failures"] == {"sft": {"syntax error": 1, "wrong value": 1}, "ppo": {"syntax error": 2}}
    assert "failures" not in expr  # no wrong row in it
    assert total["n"] == {"sft": 5, "ppo": 5} and total["right"] == {"sft": 1, "ppo": 3}  # 1/5 -> 3/5
    assert total["failures"]["sft"] == {"wrong value": 3, "syntax error": 1}  # most common first
    assert share(total, "sft") == pytest.approx(0.2) and share(total, "ppo") == pytest.approx(0.6)
    assert has_families(got)


def test_without_families_or_failure_classes_the_breakdown_is_one_row():
    rows = [{"id": "a", "correct": True}, {"id": "b", "correct": False}]
    got = family_breakdown({"sft": rows, "ppo": rows[:1]}, ARITH.failure_class)
    assert got == [{"family": "all", "n": {"sft": 2, "ppo": 1}, "right": {"sft": 1, "ppo": 1}}]
    assert not has_families(got) and family_breakdown({"sft": rows}) == [
        {"family": "all", "n": {"sft": 2}, "right": {"sft": 1}}]
    # rows without a family among rows with one: "other"
    mixed = family_breakdown({"sft": [{"id": "a", "family": "x", "correct": True}, {"id": "b", "correct": False}]})
    assert [e["family"] for e in mixed] == ["other", "x", "all"]


def test_family_rows_show_right_over_n_the_change_in_points_and_the_failures():
    rows = family_rows({"tiny_code": family_breakdown({"sft": SFT, "ppo": PPO}, CODE.failure_class)}, "pass@1")
    assert rows[1] == {"benchmark": "tiny_code", "family": "range", "sft pass@1": "0/2 (0.0%)",
                       "ppo pass@1": "2/2 (100.0%)", "change (points)": 100.0, "sft failures": "wrong value 2",
                       "ppo failures": "none"}
    assert rows[-1]["change (points)"] == 40.0  # 3/5 - 1/5
    assert "sft failures" not in rows[0]  # expr: nothing failed
    # read back from metrics.json, whose keys are sorted: the columns SFT first, the failures most common first
    entry = {"family": "all", "n": {"ppo": 3, "sft": 3}, "right": {"ppo": 1, "sft": 0},
             "failures": {"ppo": {"exception": 1, "syntax error": 1}, "sft": {"exception": 1, "wrong value": 2}}}
    assert family_rows({"b": [entry]}, "pass@1") == [
        {"benchmark": "b", "family": "all", "sft pass@1": "0/3 (0.0%)", "ppo pass@1": "1/3 (33.3%)",
         "change (points)": 33.3, "sft failures": "wrong value 2 · exception 1",
         "ppo failures": "exception 1 · syntax error 1"}]
    assert list(family_rows({"b": [entry]}, "pass@1")[0])[2:4] == ["sft pass@1", "ppo pass@1"]


# ------------------------------------------------------------------ what 06 shows


def test_results_table_leaves_out_figures_no_benchmark_has_and_nested_dicts():
    result = EvalResult(summary={"sft": {"tiny_code": {"n": 2, "accuracy": 0.5, "flexible_accuracy": None,
                                                       "pass@1": 0.5, "scorers": {"strict": 0.5}}},
                                 "ppo": {"tiny_code": {"n": 2, "accuracy": 1.0, "flexible_accuracy": None,
                                                       "pass@1": 1.0, "scorers": {"strict": 1.0}}}})
    assert result.table() == [{"model": "sft", "benchmark": "tiny_code", "n": 2, "accuracy": 0.5, "pass@1": 0.5},
                              {"model": "ppo", "benchmark": "tiny_code", "n": 2, "accuracy": 1.0, "pass@1": 1.0}]
    assert result.metric("flexible_accuracy") == {}  # recorded as nothing, not {"sft": {}, "ppo": {}}
    assert result.metric("accuracy") == {"sft": {"tiny_code": 0.5}, "ppo": {"tiny_code": 1.0}}


def test_wrong_answers_put_one_of_each_failure_first_and_show_a_program_whole(tmp_path):
    paths = RunPaths(tmp_path)
    program = "def f(xs, n):\n    return xs[-n:]" + " " * 300 + "# a long line: never cut"
    write_jsonl(paths.eval_items("sft", "tiny_code"), [
        row(WV, "def f(a, b):\n    return sum(range(a, b))", family="range") | {"id": "t1#0"},
        row(WV, program, family="slice") | {"id": "t2#0"},
        row(SE, "def f(x):\n    return x)", family="expr") | {"id": "t3#0"},
        row("passed", correct=True) | {"id": "t4#0"}])
    got = wrong_answers(paths, per_file=2, world=TINY_CODE)
    assert [(w["id"], w["failure"], w["family"]) for w in got] == [("t1#0", "wrong value", "range"),
                                                                    ("t3#0", "syntax error", "expr")]
    assert got[0]["response"] == "def f(a, b):\n    return sum(range(a, b))"  # the program, line break kept
    assert wrong_answers(paths, per_file=3, world=TINY_CODE)[2]["response"] == program  # whole, never cut
    assert "failure" not in wrong_answers(paths)[0]  # without the world: file order, no class
    shown = wrong_answer_rows(load_config(CODE_PARAMS, workdir=ROOT), paths, per_file=2)
    assert list(shown[0]) == ["model", "benchmark", "id", "family", "answer", "failure", "response"]  # no gold


def test_the_intro_speaks_the_runs_world_and_formula():
    code = eval_intro(load_config(CODE_PARAMS, workdir=ROOT))
    assert "`r = rI · rV`" in code and "pass@1" in code and "tiny_code" in code and "syntax error" in code
    assert "rA" not in code and "arithmetic" not in code and "The answer is" not in code
    arith = eval_intro(load_config(TINY_PARAMS, workdir=ROOT))
    assert "`r = rI · rA`" in arith and "accuracy" in arith and "pass@1" not in arith and "sandbox" not in arith
