"""The tiny code world (issue 28): its tasks, their hidden tests, the teacher's systematic faults, the held-out
split, and the programmatic evolver whose every defect the check meant for it catches. In-process and the
sandbox only: no model."""

from __future__ import annotations

import random

import pytest

from rleif_kit.core.config import load_config
from rleif_kit.core.paths import RunPaths
from rleif_kit.evolve.elimination import elimination_reason
from rleif_kit.worlds import get_world
from rleif_kit.worlds.tiny_code import evolver as tc_evolver
from rleif_kit.worlds.tiny_code.tasks import FAMILIES, WORDS, Task, draw, mistaken, random_task

WORLD = get_world("tiny_code")


def test_a_task_reads_and_computes_as_python_does():
    task = Task("expr", "first", ("x", "hi"), (("+", "b"), ("*", "3"), ("-", "2")))
    assert task.instruction() == "Write a Python function f(x, hi) that returns x plus hi times 3 minus 2."
    assert task.solution() == "```python\ndef f(x, hi):\n    return x + hi * 3 - 2\n```"
    assert task.value((4, 5)) == 17  # 4 + 5 * 3 - 2: the product first, as Python
    last = Task("slice", "last", ("nums", "k"))
    assert last.body() == "nums[len(nums) - k:]" and last.body(fault=True) == "nums[-k:]"
    assert last.value(([1, 2, 3], 0)) == [] and last.value(([1, 2, 3], 2)) == [2, 3]
    span = Task("range", "sum", ("lo", "hi"), (("*", "2"),))
    assert span.value((2, 4)) == 18 and span.body(fault=True) == "sum(range(lo, hi)) * 2"  # (2 + 3 + 4) * 2


def test_every_tasks_tests_pass_its_solution_and_catch_the_teachers_fault():
    tasks = draw(150, "t", "t", max_ops=2)
    right = [{"problem": t["problem"]} for t in tasks]
    verdicts = WORLD.check_batch(right, [t["solution"] for t in tasks], workers=2)
    assert all(v.rv == 1.0 for v in verdicts)
    faulty = [t for t in tasks if Task.from_problem(t["problem"]).faulty]
    assert len(faulty) >= 10
    wrong = WORLD.check_batch(faulty, [Task.from_problem(t["problem"]).solution(fault=True) for t in faulty], workers=2)
    assert all(v.rv < 1.0 for v in wrong)  # an edge case in the first tests: a == b, n == 0
    assert any(0.0 < v.rv < 1.0 for v in wrong)  # the missed n = 0 fails one test of four: rV is partial


def _program(task: Task, mistake: bool):
    """The task's reference solution as a function (our own generated one-liner, run here), or its symmetric
    mistake: the two parameters swapped in the signature, or the list / string reversed before the body."""
    names, body = list(task.names), task.body()
    if mistake and task.family in ("expr", "range"):
        names.reverse()
    elif mistake:
        body = f"(lambda {names[0]}: {body})({names[0]}[::-1])"
    scope: dict = {}
    exec(f"def f({', '.join(names)}):\n    return {body}\n", scope)  # noqa: S102 - our own one-liner
    return scope["f"]


def _domain(family: str) -> list[tuple]:
    """Inputs of the generator's kinds to look for a difference on: every pair of its integers, every word, a
    few lists (with every n)."""
    if family in ("expr", "range"):
        return [(a, b) for a in range(-5, 10) for b in range(-5, 10)]
    if family == "string":
        return [(w,) for w in WORDS]
    lists = [[1], [1, 2], [2, 1], [3, 1, 2], [5, 0, 9, 4], [7, 7, 1, 2, 8]]
    return [(xs,) for xs in lists] if family == "list" else [(xs, n) for xs in lists for n in range(len(xs) + 1)]


def test_a_tasks_tests_tell_its_swapped_or_reversed_variant_apart_wherever_they_differ():
    import ast

    expr = Task("expr", "first", ("a", "b"), (("-", "b"),))  # a - b; swapped: b - a
    assert expr.value((5, 2)) == 3 and mistaken(expr, (5, 2)) == -3 and mistaken(expr, (4, 4)) == 0
    assert mistaken(Task("slice", "first", ("xs", "n")), ([1, 2, 3], 2)) == [3, 2]
    tasks = [Task(f, v, ("a", "b") if f in ("expr", "range") else ("xs", "n") if f == "slice" else ("x",))
             for f in FAMILIES for v in FAMILIES[f]]
    tasks += [random_task(random.Random(seed), max_ops=3) for seed in range(2500)]
    told = 0
    for i, task in enumerate(tasks):
        right, wrong = _program(task, False), _program(task, True)
        if all(right(*args) == wrong(*args) for args in _domain(task.family)):
            continue  # symmetric (max, a + b, sorted, upper): no test can tell them apart
        tests = task.tests(f"seed-{i}")
        calls = [ast.parse(t).body[0].test for t in tests]
        cases = [(tuple(ast.literal_eval(a) for a in c.left.args), ast.literal_eval(c.comparators[0])) for c in calls]
        assert all(right(*args) == expected for args, expected in cases), tests
        assert any(wrong(*args) != expected for args, expected in cases), (task, tests)
        told += 1
    assert told > 1000


def _cfg(tmp_path, *extra):
    from conftest import ROOT

    return load_config(ROOT / "params" / "tiny-code.toml", [f'base.output_dir="{tmp_path}"', *extra])


def test_the_held_out_split_is_never_trained_on_and_the_teacher_errs_at_its_rate(tmp_path):
    cfg = _cfg(tmp_path, 'sft.dataset="tiny_code:3000"', "tiny_code.teacher_fault=0.6")
    paths = RunPaths(cfg.output_dir)
    held = {p["question"] for p in WORLD.heldout(cfg, paths)}
    rows = WORLD.sft_rows(cfg, paths)
    seeds = WORLD.seeds(cfg, paths, 100)
    assert len(held) == 300 and len(rows) == 3000
    assert not held & {r["instruction"] for r in rows} and not held & {s["text"] for s in seeds}
    faulty = [r for r in rows if "range(" in r["response"] and "+ 1)" not in r["response"]]
    share = len(faulty) / sum("range(" in r["response"] for r in rows)
    assert 0.5 < share < 0.7, share  # 0.6 of the range tasks carry the off-by-one
    assert all(s["problem"]["tests"] and s["answer"] for s in seeds)


def _evolved(defect: str, monkeypatch) -> tuple[dict, dict]:
    monkeypatch.setattr(tc_evolver, "DEFECTS", {defect: 1.0})
    parent_task = Task("range", "sum", ("a", "b"), (("+", "3"),))
    parent = {"id": "p", "text": parent_task.instruction(), "answer": parent_task.solution(),
              "problem": parent_task.to_problem("p")}
    out = tc_evolver.evolve_task(parent, "add_requirement", random.Random(0), 1.0, 2, "seed")
    record = {"id": "c", "text": out["text"], "answer": out["answer"], **out["extra"]}
    return parent, record


@pytest.mark.parametrize("defect, caught_by", [
    ("leaked_template", "elimination"), ("no_change", "elimination"),
    ("tests_wrong", "sandbox"), ("answer_wrong", "sandbox"), ("unsolvable", "judge")])
def test_each_evolver_defect_is_caught_by_the_check_meant_for_it(defect, caught_by, monkeypatch):
    parent, record = _evolved(defect, monkeypatch)
    eliminated = elimination_reason(parent["text"], record["text"], finish_reason="stop")
    vetted = WORLD.vet_evolved(record)
    assert (eliminated is not None) is (caught_by == "elimination"), (defect, eliminated)
    if caught_by == "sandbox":
        assert vetted == "tests_fail"
    if caught_by == "judge":
        assert eliminated is None and vetted is None
        clean = _evolved_clean(monkeypatch)
        assert tc_evolver.task_quality(record, 2) < tc_evolver.task_quality(clean, 2)


def _evolved_clean(monkeypatch) -> dict:
    monkeypatch.setattr(tc_evolver, "DEFECTS", {"unsolvable": 1.0})
    parent_task = Task("range", "sum", ("a", "b"))
    parent = {"id": "p", "text": parent_task.instruction(), "answer": parent_task.solution(),
              "problem": parent_task.to_problem("p")}
    out = tc_evolver.evolve_task(parent, "add_requirement", random.Random(0), 0.0, 2, "seed")
    return {"text": out["text"], "answer": out["answer"], **out["extra"]}


def test_a_clean_evolution_keeps_instruction_answer_and_tests_in_agreement(monkeypatch):
    record = _evolved_clean(monkeypatch)
    assert record["defect"] is None and WORLD.vet_evolved(record) is None
    assert "plus" in record["text"] or "minus" in record["text"] or "times" in record["text"]
