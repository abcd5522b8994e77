"""The RLEIF loop: ``[loop] iterations = N`` makes ``rleif run`` repeat stages 01-06 N times.

Iteration 1 is the ordinary run (``<output_dir>/``, ``reports/<run>/``). Iteration k > 1 lives in
``<output_dir>/iter-k/`` and reports into ``reports/<run>/iter-k/``, and is seeded from iteration
k - 1 by config overrides, so every notebook runs unchanged:

- ``evol_instruct.seeds`` = ``iter-k/seeds.jsonl``: the instructions k - 1 kept after dedup
  (``02_dedup/instructions.jsonl``, or ``01_evolve/evolved.jsonl`` when dedup did not run), less
  k - 1's own seeds — evolving those again would repeat k - 1's first round;
- ``base.model_name`` = k - 1's PPO policy (``05_ppo/model``, merged standalone weights), so SFT,
  the reward models that start from the SFT model, and PPO all continue from the new policy.
  Without that policy (PPO not run) the base model stays and a note says so.

After the loop, ``reports/<run>/loop_summary.json`` lists per iteration the kept instructions, the
PPO reward and the accuracies, read from each iteration's ``metrics.json``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rleif_kit.core.jsonl import read_jsonl, write_jsonl
from rleif_kit.core.paths import RunPaths
from rleif_kit.core.records import read_records, write_json_atomic
from rleif_kit.core.stages import DEDUP, EVAL, EVOLVE, LOOP_STAGES, PPO, SFT


def iteration_dir(root: Path, k: int) -> Path:
    """``root`` for iteration 1, ``root/iter-k`` after (used for output and report folders alike)."""
    return Path(root) if k == 1 else Path(root) / f"iter-{k}"


def plan_steps(stages: list[str], iterations: int) -> list[tuple[int, str]]:
    """(iteration, stage) in run order: stages before 01 once, 01-06 per iteration, later stages once
    on the last iteration."""
    before = [s for s in stages if s < LOOP_STAGES[0]]
    looped = [s for s in stages if s in LOOP_STAGES]
    after = [s for s in stages if s > LOOP_STAGES[-1]]
    steps = [(1, s) for s in before]
    for k in range(1, iterations + 1):
        steps += [(k, s) for s in looped]
    return steps + [(iterations, s) for s in after]


def _kept_instructions(prev: Path) -> Path | None:
    return RunPaths(prev).kept_instructions


def iteration_overrides(output_dir: Path, k: int) -> tuple[list[str], list[str]]:
    """(config overrides, notes) that point iteration ``k`` at its folder and seed it from k - 1.
    Writes ``iter-k/seeds.jsonl``."""
    if k == 1:
        return [], []
    prev, here = iteration_dir(output_dir, k - 1), iteration_dir(output_dir, k)
    overrides, notes = [f"base.output_dir={json.dumps(str(here))}"], []
    kept = _kept_instructions(prev)
    if kept is None:
        notes.append(f"iteration {k}: iteration {k - 1} kept no instructions yet; evolving the configured seeds")
    else:
        seeds = [r for r in read_jsonl(kept) if r.get("operator", "") != "seed" and r.get("round", 1) != 0]
        seeds_path = RunPaths(here).loop_seeds
        write_jsonl(seeds_path, seeds)
        overrides.append(f"evol_instruct.seeds={json.dumps(str(seeds_path))}")
        notes.append(f"iteration {k}: {len(seeds)} seed instructions kept by iteration {k - 1} ({kept})")
    policy = RunPaths(prev).ppo_model
    if policy.is_dir():
        overrides.append(f"base.model_name={json.dumps(str(policy))}")
        notes.append(f"iteration {k}: base model = iteration {k - 1}'s PPO policy ({policy})")
    else:
        notes.append(f"iteration {k}: no PPO policy in {prev} ({PPO} not run); the base model stays")
    return overrides, notes


def _get(metrics: dict, stage: str, key: str) -> Any:
    return metrics.get(stage, {}).get(key)


def summarize_loop(report_dir: Path, output_dir: Path, iterations: int) -> Path:
    """Write ``reports/<run>/loop_summary.json`` from each iteration's recorded metrics."""
    rows = []
    for k in range(1, iterations + 1):
        m = read_records(RunPaths(iteration_dir(output_dir, k), iteration_dir(report_dir, k)).metrics)
        rows.append({"iteration": k, "output_dir": str(iteration_dir(output_dir, k)),
                     "report_dir": str(iteration_dir(report_dir, k)),
                     "evolved_kept": _get(m, EVOLVE, "kept"),
                     "kept_instructions": _get(m, DEDUP, "kept"),
                     "sft_accuracy": _get(m, SFT, "accuracy_after"),
                     "reward_first": _get(m, PPO, "reward_first_fifth"),
                     "reward_last": _get(m, PPO, "reward_last_fifth"),
                     "ppo_accuracy": _get(m, PPO, "ppo_accuracy"),
                     "eval_accuracy": _get(m, EVAL, "accuracy")})
    path = RunPaths(Path(output_dir), Path(report_dir)).loop_summary
    write_json_atomic(path, {"iterations": rows})
    return path
