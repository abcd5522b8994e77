"""The code world's verifier: rV = the share of a task's tests a response's program passes in the sandbox.

A code task carries its tests with it: ``record["problem"] = {"entry_point": "f", "tests": ["assert f(1, 2) == 3",
...]}`` (MBPP's ``test_list`` shape; a tiny-code task's hidden tests, or the asserts an endpoint wrote for an
evolved task and the reference answer passed). The tests never enter the program: each assert is read here
into a call and an expected value (``value_tests``), the program gets the arguments alone, and the evaluator
compares what comes back (``judging``), so a rollout can no more forge rV than a benchmark completion can forge
a pass. Every response of a batch runs at once, ``workers`` programs in parallel, each under the sandbox's
wall-clock and resource limits; a response that hangs, crashes or attacks the evaluator scores 0.

The same check vets an evolved task's tests before the task is kept (:func:`vet_reference`): the reference
answer must pass every test, or the evolution is eliminated with the reason.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

from rleif_kit.sandbox.runner import Limits
from rleif_kit.worlds.code import mbpp
from rleif_kit.worlds.code.judging import TestRun, run_cases
from rleif_kit.worlds.code.postprocess import extract_code
from rleif_kit.worlds.code.steps import CODE_STEPS
from rleif_kit.worlds.code.value_tests import Case, NotValueShaped, value_cases

# rollouts are small functions: the sandbox's evaluation limits (10 s, 4 GiB) would let one bad rollout hold a
# worker for seconds; a tiny-code program runs in about 20 ms, interpreter start included
ROLLOUT_TIMEOUT = 5.0
ROLLOUT_LIMITS = Limits(memory_bytes=1 << 30, file_bytes=1 << 20)


def task_tests(record: Mapping[str, Any]) -> tuple[str, list[str]] | None:
    """(entry point, assert lines) of a code task, or None when the record carries no tests."""
    problem = record.get("problem")
    if not isinstance(problem, Mapping):
        return None
    entry, tests = problem.get("entry_point"), problem.get("tests")
    if not (isinstance(entry, str) and entry and isinstance(tests, list) and tests
            and all(isinstance(t, str) for t in tests)):
        return None
    return entry, tests


def test_cases(entry: str, tests: Sequence[str]) -> list[Case]:
    """The value cases of assert lines on ``entry`` (``assert f(1, 2) == 3``); raises NotValueShaped for a test
    the evaluator cannot judge by value, SyntaxError for one that does not parse."""
    return value_cases(mbpp.check_source({"test_list": list(tests)}, entry))


def cases_of(record: Mapping[str, Any]) -> tuple[dict, list[Case]] | None:
    """The HumanEval-shaped problem (empty prompt: the completion is the whole program) and its cases; None when
    the record has no tests or tests that cannot be judged by value."""
    found = task_tests(record)
    if found is None:
        return None
    entry, tests = found
    try:
        cases = test_cases(entry, tests)
    except (NotValueShaped, SyntaxError, ValueError, RecursionError):
        return None
    return {"prompt": "", "entry_point": entry}, cases


@dataclass(frozen=True)
class Checked:
    """One response checked: rV (None: the task has no tests), all tests passed, why not, sandbox seconds."""

    rv: float | None
    correct: bool | None
    reason: str = ""
    wall_s: float = 0.0


def check_responses(records: Sequence[Mapping[str, Any]], responses: Sequence[str], extract: Callable[[str], str],
                    *, timeout: float = ROLLOUT_TIMEOUT, workers: int | None = None,
                    limits: Limits = ROLLOUT_LIMITS) -> list[Checked]:
    """Each response's code (cut by ``extract``) against its record's tests, all in parallel."""
    plans = [cases_of(r) for r in records]
    jobs = [(plan[0], extract(text), plan[1]) for plan, text in zip(plans, responses) if plan is not None]
    runs = iter(run_cases(jobs, timeout=timeout, workers=workers, limits=limits) if jobs else [])
    out = []
    for plan in plans:
        if plan is None:
            out.append(Checked(None, None, "no tests"))
            continue
        run: TestRun = next(runs)
        out.append(Checked(run.share, run.passed == run.total, run.reason, run.wall_s))
    return out


def vet_reference(record: Mapping[str, Any], *, timeout: float = ROLLOUT_TIMEOUT) -> str | None:
    """Why an evolved code task must be eliminated, or None: it has no tests (``no_tests``), tests the evaluator
    cannot judge by value or that do not parse (``tests_unreadable``), a reference answer without a function that
    parses (``answer_no_code``), or a reference that fails one of its own tests (``tests_fail``: the tests and the
    answer disagree, or the answer is wrong)."""
    found = task_tests(record)
    if found is None:
        return "no_tests"
    try:
        cases = test_cases(*found)
    except (NotValueShaped, SyntaxError, ValueError, RecursionError):
        return "tests_unreadable"
    answer = record.get("answer") or ""
    if not CODE_STEPS.well_formed(answer):  # no function in a block (or bare code) that parses
        return "answer_no_code"
    code = extract_code(answer)
    run = run_cases([({"prompt": "", "entry_point": found[0]}, code, cases)], timeout=timeout,
                    limits=ROLLOUT_LIMITS)[0]
    return None if run.passed == run.total else "tests_fail"
