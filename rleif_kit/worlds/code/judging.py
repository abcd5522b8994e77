"""Judging a program by value: the sandboxed program gets the arguments alone, the evaluator compares.

Why here, below the stages: HumanEval / MBPP evaluation (06), the code world's verifier rV (PPO's and GRPO's
execution reward, the gate, 07) and the check of an evolved task's own tests all run programs this one way, so
a rollout can forge a verdict no more than a benchmark completion can. The program is the task's prompt (empty
for a whole program), the completion, a copy of :func:`~rleif_kit.worlds.code.value_tests.to_plain` and a
driver that calls the entry point on each case's arguments and reports the plain values through the sandbox's
verdict channel (``__rleif_report``: signed with a token the program never sees, ``sandbox/runner.py``); no
test, no expected value and no marker enters it (``value_tests`` says why that makes the verdict unforgeable),
and nothing the program writes itself (a ``result.json``, an fd it finds, an exit hook) counts.

What crosses back is bounded: the report is read up to the sandbox's file limit, each case's error text is
cut to 300 characters, and only plain data is rebuilt (:func:`~rleif_kit.worlds.code.value_tests.from_plain`),
at most a million values of it (a range counts its length), 100 deep, no keys that flood one hash: a value over
those fails its case with "too large to rebuild" (issue 30: ``range(10**9)`` is 20 bytes here, 8 GB in a tuple).
"""

from __future__ import annotations

import ast
import inspect
import json
import signal
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from rleif_kit.sandbox.runner import Limits, RunResult, run_many
from rleif_kit.worlds.code.value_tests import Case, check_hashes, from_plain, judge, to_plain


def _bare_source(fn: Any) -> str:
    """``fn``'s source without annotations: the program it is pasted into compiles it without this module's
    ``from __future__ import annotations``, and its names (``Any``) are not defined there."""
    tree = ast.parse(inspect.getsource(fn))
    for node in ast.walk(tree):
        if isinstance(node, ast.arg):
            node.annotation = None
        elif isinstance(node, ast.FunctionDef):
            node.returns = None
    return ast.unparse(tree)


PLAIN_SOURCE = "\n\n\n".join(_bare_source(f) for f in (to_plain, check_hashes, from_plain))

VALUE_DRIVER = """

def __rleif_value_run(name, cases):
    out = []
    for args in cases:
        try:
            if name not in globals():
                raise NameError("the completion defines no " + name)
            out.append({"value": to_plain(globals()[name](*args))})
        except BaseException as e:  # SystemExit too: this case failed, the others still run
            out.append({"error": (type(e).__name__ + ": " + str(e))[:300]})
    __rleif_report(out)


__rleif_value_run(%r, %s)
"""


def value_program(problem: Mapping[str, Any], completion: str, cases: Sequence[Case], plain_args: bool = False) -> str:
    """Prompt + completion, then a driver that calls the entry point on each case's arguments and reports the
    plain values (``__rleif_report``). No test, no expected value, no marker: nothing in it tells a right answer.
    The arguments are Python literals, or with ``plain_args`` plain-encoded JSON the program decodes (values a
    literal cannot write: nan, inf)."""
    args = [c.args for c in cases]
    # the evaluator's own arguments: decoded without the bound on what crosses back (EvalPlus's can be large)
    source = f"from_plain(__import__('json').loads({json.dumps(to_plain(args))!r}), [float('inf')])" \
        if plain_args else repr(args)
    return f"{problem.get('prompt', '')}{completion}\n\n\n{PLAIN_SOURCE}\n" + VALUE_DRIVER % (problem["entry_point"], source)


def run_failure(result: RunResult, timeout: float) -> str | None:
    """Why a run produced no judgeable results (sandbox error, timeout, a signal, a crash, no report, a report the
    harness did not sign), or None when the harness reported and the program exited cleanly."""
    if result.error:
        return f"sandbox error: {result.error}"
    if result.timed_out:
        return f"timed out after {timeout:g}s"
    rc = result.returncode
    if rc is not None and rc < 0:
        name = signal.Signals(-rc).name if -rc in signal.Signals._value2member_map_ else str(-rc)
        return f"killed by {name}"
    if rc != 0:
        last = result.stderr.strip().splitlines()
        return f"failed: {last[-1][:300] if last else f'exit code {rc}'}"
    if result.forged:
        return "failed: its results did not come from the harness"
    if result.result is None:
        return "exited before the tests finished"
    return None


def case_verdicts(result: RunResult, timeout: float, cases: Sequence[Case]) -> tuple[list[bool], str]:
    """One verdict per case and the reason of the first failure ("passed" when none): the evaluator decodes
    each returned value and compares it with the expected one it kept to itself."""
    why = run_failure(result, timeout)
    if why is not None:
        return [False] * len(cases), why
    try:
        data = json.loads(result.result)
    except (ValueError, RecursionError):
        return [False] * len(cases), "failed: its results are not readable"
    if not isinstance(data, list) or not all(isinstance(r, dict) for r in data):
        return [False] * len(cases), "failed: its results are not readable"
    if len(data) != len(cases):
        return [False] * len(cases), f"failed: {len(data)} results for {len(cases)} cases"
    verdicts, reason = [], "passed"
    for i, (case, row) in enumerate(zip(cases, data)):
        if "error" in row:
            ok, why = False, f"failed: case {i + 1} raised {str(row['error'])[:200]}"
        else:
            try:
                ok, why = judge(case, from_plain(row["value"])), f"failed: case {i + 1} returned a wrong value"
            except ValueError as e:
                ok, why = False, f"failed: case {i + 1} returned " + (str(e)[:120] if str(e).startswith("too large")
                                                                      else "no plain value")
            except (KeyError, TypeError, RecursionError):
                ok, why = False, f"failed: case {i + 1} returned no plain value"
        verdicts.append(ok)
        if not ok and reason == "passed":
            reason = why
    return verdicts, reason


@dataclass(frozen=True)
class TestRun:
    """What one program did against its cases: how many passed of how many, why not all, the seconds it took."""

    passed: int
    total: int
    reason: str
    wall_s: float

    @property
    def share(self) -> float:
        return self.passed / self.total if self.total else 0.0


def run_cases(jobs: Sequence[tuple[Mapping[str, Any], str, Sequence[Case]]], *, timeout: float = 10.0,
              workers: int | None = None, limits: Limits = Limits()) -> list[TestRun]:
    """Each ``(problem, completion, cases)`` run once in the sandbox, ``workers`` at a time; results in order."""
    programs = [value_program(problem, completion, cases) for problem, completion, cases in jobs]
    out = []
    for (_, _, cases), result in zip(jobs, run_many(programs, timeout=timeout, limits=limits, workers=workers)):
        verdicts, reason = case_verdicts(result, timeout, cases)
        out.append(TestRun(sum(verdicts), len(cases), reason, result.wall_s))
    return out
