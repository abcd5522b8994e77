"""The tiny code world's programmatic Code Evol-Instruct and its judge, so the CPU demo evolves offline.

An operator edits a task's structure and the instruction, reference solution and tests are rendered again, so
they agree — except where the evolver fails, as a real model does, at ``[evol_instruct] defect_rate``. The
defects are those an endpoint's evolution of a code task shows, and each is caught by the check meant for it:

- ``leaked_template`` (a note about "the given prompt" left in) and ``no_change`` (the parent back): the
  elimination rules;
- ``tests_wrong`` (one test expects a wrong value, as a model's hand-computed asserts do) and ``answer_wrong``
  (the reference drops an op): the sandbox run of the tests against the reference (``World.vet_evolved``);
- ``unsolvable`` (the instruction no longer says what to return): nothing mechanical; the judge ranks it last
  among its siblings, so the IRM learns it.

The defect is recorded with the record (ground truth, never shown to a model) so each check can be scored.
"""

from __future__ import annotations

import random
from dataclasses import replace

from rleif_kit.worlds.tiny_code.tasks import FAMILIES, Task, random_op, random_task

DEFECTS = {"leaked_template": 0.15, "no_change": 0.15, "tests_wrong": 0.25, "answer_wrong": 0.2, "unsolvable": 0.25}


def edit_task(task: Task, operator: str, rng: random.Random, max_ops: int) -> Task:
    """The operator's structural edit (a task it cannot edit that way gets another variant of its family)."""
    if operator == "add_requirement" and task.numeric and len(task.ops) < max_ops:
        return replace(task, ops=task.ops + (random_op(rng, task.family),))
    if operator == "simplify" and task.ops:
        return replace(task, ops=task.ops[:-1])
    if operator == "new_topic":
        other = random_task(rng, max_ops=1)
        while other.family == task.family:
            other = random_task(rng, max_ops=1)
        return other
    variants = [v for v in sorted(FAMILIES[task.family]) if v != task.variant]  # rarer_requirement and fallbacks
    variant = rng.choice(variants)
    numeric = FAMILIES[task.family][variant][3]
    return replace(task, variant=variant, ops=task.ops if numeric else ())


def evolve_task(parent: dict, operator: str, rng: random.Random, defect_rate: float, max_ops: int,
                seed: str) -> dict:
    """``{"text", "answer", "finish_reason", "extra": {"problem", "defect"}}`` for one evolution of ``parent``."""
    task = edit_task(Task.from_problem(parent["problem"]), operator, rng, max_ops)
    problem = task.to_problem(seed)
    text, answer = task.instruction(), task.solution()
    defect = None
    if rng.random() < defect_rate:
        defect = rng.choices(sorted(DEFECTS), weights=[DEFECTS[d] for d in sorted(DEFECTS)])[0]
    if defect == "leaked_template":  # a note to the reader after the task, as gpt-3.5 left them in evol-codealpaca
        text += " This rewritten prompt adds one more requirement to the given prompt."
    elif defect == "no_change":
        text, answer, problem = parent["text"], parent.get("answer"), parent["problem"]
    elif defect == "tests_wrong":
        i = rng.randrange(len(problem["tests"]))
        head, _, expected = problem["tests"][i].rpartition(" == ")
        problem["tests"][i] = f"{head} == {int(expected) + 1 if expected.lstrip('-').isdigit() else None}"
    elif defect == "answer_wrong":  # an op forgotten, or a sign
        answer = replace(task, ops=task.ops[:-1]).solution() if task.ops else answer.replace("return ", "return -")
    elif defect == "unsolvable":
        text = text.split(" that returns ")[0] + " that returns the result."
    return {"text": text, "answer": answer, "finish_reason": "stop", "extra": {"problem": problem, "defect": defect}}


# The judge's weights: a leaked or unchanged variant is worst (integrity), then one whose instruction no longer
# says what to return, then one whose tests and answer disagree, then one outside the configured size.
FORMED, SOLVABLE, TESTED, IN_RANGE = 8, 4, 2, 1


def task_quality(record: dict, max_ops: int) -> int:
    """Quality of one evolved variant (higher is better), from what the evolver recorded."""
    defect = record.get("defect")
    problem = record.get("problem") or {}
    return (FORMED * (defect not in ("leaked_template", "no_change")) + SOLVABLE * (defect != "unsolvable")
            + TESTED * (defect not in ("tests_wrong", "answer_wrong"))
            + IN_RANGE * (len(problem.get("ops") or ()) <= max_ops))
