"""Run-level resume: which stages of ``rleif run`` are complete, unchanged, and can be skipped.

When a stage's notebook finishes, the runner writes ``<output_dir>/<stage>/.done.json``: the resolved
config keys the stage depends on (and their hash), the executed notebook and when it ran. On the next
``rleif run`` a stage is skipped when its marker is there, its executed notebook is still in the report
folder and those keys are unchanged. A changed key makes the stage stale, and with it every later
stage (the runner deletes their markers as soon as an earlier stage reruns). ``--force`` reruns.

Which keys a stage depends on: every key whose *first reader* is that stage or an earlier one
(``FIRST_READER`` below; a section not listed counts as read by 00_setup, the safe side). So a new
``[ppo] lr`` reruns 05_ppo onward but not the SFT; a new ``[evol_instruct]`` key reruns from 01_evolve.
Keys that change where things go, not what they are (``base.output_dir``, ``base.run_name``) and the
``[loop]`` section (which repeats stages, it does not change them) are left out, and so is the
settings file (it says where the endpoints are; after switching endpoint models, ``--force``).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from rleif_kit.core.paths import DONE_MARKER, RunPaths
from rleif_kit.core.records import write_json_atomic
from rleif_kit.core.stages import DEDUP, EVAL, EVOLVE, PPO, REWARD_MODELS, SETUP, SFT, STAGES

MARKER = DONE_MARKER

# section (or section.key, which wins) -> the first stage that reads it. Checked against the stage
# modules' reads of cfg.<section>; when a stage starts reading an earlier-unused key, move it here.
FIRST_READER = {
    "base": SETUP, "tiny": SETUP, "arith": SETUP,
    "sft.open_domain_path": SETUP,  # part of the tiny tokenizer's corpus; checked by the data step
    # the data step (prepare.stage) builds the seeds and the SFT set from the raw data
    **{f"sft.{k}": SETUP for k in ("dataset", "gsm8k_train", "math_train", "build", "gsm8k_hub", "math_hub",
                                   "open_domain_samples")},
    "evol_instruct.seeds": SETUP,
    "arith.teacher_early_stop": DEDUP,  # only the SFT rows
    "evol_instruct": EVOLVE,
    "sft": DEDUP, "dedup": DEDUP, "diagnostics": DEDUP,
    "sft.trainer_args": SFT,  # passed to TRL's SFTConfig only (core/trainer_args.py)
    "eval": DEDUP,  # cot_prompt, max_new_tokens, batch_size: the SFT rows, SFT/PRM/PPO generation
    **{f"eval.{k}": EVAL for k in ("benchmarks", "models", "limit", "temperature", "top_p", "n_samples",
                                         "stop", "stop_list", "code_prompt", "compat_gsm8k", "compat_math",
                                         "code_timeout", "code_workers", "backend")},
    "reward_model": REWARD_MODELS,
    "ppo": PPO,
}
IGNORED = {"base.output_dir", "base.run_name", "base.launcher", "base.accelerate_config",  # where / how it runs
           "base.report_to", "sft.report_to"}  # where the curves are logged
IGNORED_SECTIONS = {"loop"}


def _run_root(cfg) -> Path:
    """The run's top folder: ``output_dir``, or its parent for a loop iteration's ``iter-k/``."""
    out = Path(cfg.output_dir)
    return out.parent if re.fullmatch(r"iter-\d+", out.name) else out


def portable(value: Any, anchors: dict[str, Path]) -> Any:
    """``value`` with every absolute path under an anchor written as ``<name>/relative``: so a run directory
    moved together with its checkout (or given by new absolute overrides) keeps its config hash."""
    if isinstance(value, list):
        return [portable(v, anchors) for v in value]
    if isinstance(value, dict):
        return {k: portable(v, anchors) for k, v in value.items()}
    if isinstance(value, str) and os.path.isabs(value):
        for name, root in anchors.items():
            path = Path(os.path.normpath(value))
            if path.is_relative_to(root):
                return f"<{name}>/{path.relative_to(root).as_posix()}"
    return value


def stage_config(cfg, stage: str, as_given: bool = False) -> dict[str, Any]:
    """The flattened ``section.key -> value`` of every config key ``stage`` depends on, absolute paths inside the
    run's folder or the checkout written relative to them (``portable``; ``as_given``: the values unchanged)."""
    rank = STAGES.index(stage)
    anchors = {} if as_given else {"output_dir": _run_root(cfg), "workdir": Path(cfg.workdir)}
    out = {}
    for section, values in cfg.to_dict().items():
        if section in IGNORED_SECTIONS:
            continue
        for key, value in values.items():
            name = f"{section}.{key}"
            if value == {}:  # an empty table (trainer_args) sets nothing: a run from before the key keeps its hash
                continue
            reader = FIRST_READER.get(name, FIRST_READER.get(section, SETUP))
            if name not in IGNORED and STAGES.index(reader) <= rank:
                out[name] = portable(value, anchors)
    return out


def config_hash(values: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(values, sort_keys=True, default=str).encode()).hexdigest()[:16]


def marker_path(output_dir: Path, stage: str) -> Path:
    return RunPaths(Path(output_dir)).done_marker(stage)


def _changes(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    missing = object()
    out = []
    for key in sorted(set(old) | set(new)):
        a, b = old.get(key, missing), new.get(key, missing)
        if a != b:
            out.append(f"{key} {'(new)' if a is missing else json.dumps(a)} -> "
                       f"{'(gone)' if b is missing else json.dumps(b)}")
    return out


def check_stage(cfg, stage: str, notebook: Path) -> tuple[bool, str]:
    """(complete and unchanged?, why) for ``stage`` of the run ``cfg`` reporting into ``notebook``."""
    path = marker_path(cfg.output_dir, stage)
    if not path.exists():
        return False, "not run yet" if not RunPaths(cfg.output_dir).stage_dir(stage).exists() else "no completion marker"
    try:
        done = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False, f"unreadable marker {path}"
    recorded = Path(cfg.output_dir) / done.get("notebook", "")  # relative to the run folder
    if Path(os.path.normpath(recorded)) != Path(os.path.normpath(Path(notebook).absolute())):
        return False, f"the stage reported into {done.get('notebook')} (from {cfg.output_dir}), not {notebook}"
    if not Path(notebook).exists():
        return False, f"no executed notebook at {notebook}"
    values = stage_config(cfg, stage)
    # unchanged when the portable values match (the run folder moved) or the values as given do (the output
    # folder moved but an absolute path still names the same file)
    given = stage_config(cfg, stage, as_given=True)
    if not {done.get("config_hash"), done.get("given_hash")} & {config_hash(values), config_hash(given)}:
        changes = _changes(done.get("config", {}), values)
        return False, "config changed: " + ("; ".join(changes) if changes else "(keys not recorded)")
    return True, f"complete and config unchanged ({stage}/{MARKER} of {done.get('finished', '?')})"


def mark_done(cfg, stage: str, notebook: Path, seconds: float) -> Path:
    values = stage_config(cfg, stage)
    path = marker_path(cfg.output_dir, stage)
    given = config_hash(stage_config(cfg, stage, as_given=True))
    write_json_atomic(path, {"stage": stage, "config_hash": config_hash(values), "given_hash": given, "config": values,
                             # relative: a run folder and its reports moved together still match
                             "notebook": os.path.relpath(Path(notebook).absolute(), Path(cfg.output_dir).absolute()),
                             "seconds": round(seconds, 1),
                             "finished": datetime.now(timezone.utc).isoformat(timespec="seconds")})
    return path


def recorded_seconds(output_dir: Path, stage: str) -> float | None:
    """The wall time the stage's marker recorded (how long the run that completed it took), or None."""
    try:
        return json.loads(marker_path(output_dir, stage).read_text(encoding="utf-8")).get("seconds")
    except (OSError, ValueError):
        return None


def invalidate(output_dir: Path, stage: str) -> None:
    marker_path(output_dir, stage).unlink(missing_ok=True)


def incomplete_reason(cfg, stage: str, metrics: dict[str, Any]) -> str | None:
    """Why a stage that finished without an error is still not complete (a rerun continues it), else None:
    too many of its requests failed (its ``failures.json``, which the runner copies into ``metrics["failures"]``:
    ``checks/stage_failures.py``), a budget stopped evolution, evaluation items are pending."""
    failures = metrics.get("failures")
    if isinstance(failures, dict) and failures.get("status") != "ok":
        return str(failures.get("reason") or "too many requests failed")
    if stage == EVOLVE:
        usage = RunPaths(cfg.output_dir).evolve_usage
        stopped = json.loads(usage.read_text()).get("stopped_reason") if usage.exists() else None
        return f"evolution stopped early ({stopped})" if stopped else None
    if stage == EVAL and metrics.get("pending"):
        return f"{metrics['pending']} evaluation item(s) pending"
    return None
