"""``cfg, paths = setup(params_path, overrides, stage=...)`` — the third cell of every notebook.

Loads and validates the run config, fixes the thread count and seeds, writes the resolved config
and the run manifest (versions, git commit, hardware) into the output directory, and points
``record(...)`` at ``reports/<run>/metrics.json``. A notebook opened by hand (``make lab``) leaves ``params_path``
empty: the run config is then ``$RLEIF_PARAMS`` (``make lab PARAMS=params/tiny-code.toml`` sets it), else the
tiny CPU preset (``params_for``); papermill and ``rleif run`` always pass one.

A notebook takes from here what every stage's notebook needs — ``setup``, ``record`` (``core/records.py``) and
``load_settings`` for the endpoint (``core/settings.py``) — and everything else from its stage's module: two kit
modules per notebook.
"""

from __future__ import annotations

import json
import logging
import os
import platform
import random
import subprocess
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path

from rleif_kit.core import distributed as dist
from rleif_kit.core.config import KIT_ROOT, ConfigError, RunConfig, load_config, parse_override, to_toml
from rleif_kit.core.paths import RunPaths
from rleif_kit.core import numerics, run_lock
from rleif_kit.core.library_output import plain_library_output
from rleif_kit.core.records import record, set_target, write_json_atomic
from rleif_kit.core.settings import load_settings
from rleif_kit.core.stages import EVOLVE, SETUP

__all__ = ["setup", "record", "load_settings", "default_workdir", "write_manifest", "check_prompts_root",
           "claim_report_folder", "params_for", "RUN_FILE", "PARAMS_ENV", "DEFAULT_PARAMS"]

RUN_FILE = "run.json"  # what `rleif run` writes in its report folder (pipeline/run_status.py)

MANIFEST_PACKAGES = ("rleif-kit", "torch", "transformers", "trl", "peft", "bitsandbytes", "accelerate",
                     "datasets", "tokenizers", "openai", "papermill")


PARAMS_ENV = "RLEIF_PARAMS"  # the run config of a notebook opened by hand: `make lab PARAMS=...` exports it
DEFAULT_PARAMS = "params/tiny-cpu.toml"


def params_for(params_path: str | None) -> tuple[str, str]:
    """(the run config a notebook runs, where that choice came from): ``params_path`` when given (papermill,
    ``rleif run``), else ``$RLEIF_PARAMS``, else the tiny CPU preset. So one ``make lab PARAMS=...`` opens every
    notebook on another preset without editing the eight parameters cells."""
    if params_path:
        return str(params_path), "params_path"
    env = os.environ.get(PARAMS_ENV, "").strip()
    if env:
        return env, f"${PARAMS_ENV}"
    return DEFAULT_PARAMS, "the default"


def default_workdir() -> Path:
    """Where relative paths resolve: the current directory, or the project root when a notebook is
    opened by hand from ``notebooks/`` (Jupyter starts kernels in the notebook's folder)."""
    cwd = Path.cwd()
    if cwd.name == "notebooks" and (cwd.parent / "params").is_dir():
        return cwd.parent
    return cwd


def _git_commit(workdir: Path) -> str | None:
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=workdir, capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None


def _versions() -> dict[str, str | None]:
    out = {}
    for name in MANIFEST_PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


def hardware() -> dict:
    info = {"platform": platform.platform(), "python": platform.python_version(), "cpus": os.cpu_count()}
    try:
        import torch  # heavy: loaded on first use

        info["torch_threads"] = torch.get_num_threads()
        info["cuda"] = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
    except ImportError:
        pass
    info["cpu_kernels"] = numerics.describe()  # the kernel variables set ([base] cpu_kernels) and torch's choice
    return info


def write_manifest(cfg: RunConfig, paths: RunPaths, stage: str) -> None:
    """Resolved config and manifest; the manifest keeps one entry per stage run."""
    paths.output_dir.mkdir(parents=True, exist_ok=True)
    paths.resolved_config.write_text(to_toml(cfg), encoding="utf-8")
    manifest = json.loads(paths.manifest.read_text()) if paths.manifest.exists() else {}
    manifest.update({"run_name": cfg.run_name, "params": cfg.source, "overrides": list(cfg.overrides),
                     "git_commit": _git_commit(Path(cfg.workdir)), "versions": _versions(),
                     "hardware": hardware()})
    manifest.setdefault("stages", {})[stage] = datetime.now(timezone.utc).isoformat(timespec="seconds")
    write_json_atomic(paths.manifest, manifest)


def apply_threads_and_seed(cfg: RunConfig) -> None:
    import numpy as np  # heavy: loaded on first use

    random.seed(cfg.base.seed)
    np.random.seed(cfg.base.seed % 2**32)
    try:
        import torch  # heavy: loaded on first use
    except ImportError:
        return
    if cfg.base.threads:
        torch.set_num_threads(cfg.base.threads)
    torch.manual_seed(cfg.base.seed)


def quiet_harmless_noise() -> None:
    """Silence what every stage would print although nothing is wrong (each filter says why it is harmless)."""
    # bitsandbytes on a CPU with AVX512-BF16 tries an optional hub kernel ("kernels-community") at import and warns
    # when it is not installed (or there is no network); it then uses its own CPU kernel, which the kit's tests use
    logging.getLogger("bitsandbytes.backends.cpu.ops").setLevel(logging.ERROR)
    plain_library_output()  # what libraries warn of: plain lines, not a notebook's error-coloured stderr


def check_prompts_root(cfg: RunConfig, stage: str) -> None:
    """The prompt templates' root, where this stage reads them (evolution through a model; stage 00's SFT set built
    by `regenerate`), is a directory: else one line naming the key, not a missing file deep inside the stage."""
    ev = cfg.evol_instruct
    if not ((stage == EVOLVE and ev.backend in ("openai", "hf")) or (stage == SETUP and cfg.sft.build == "regenerate")):
        return
    root = cfg.resolve(ev.prompts_dir)
    if not root.is_dir():
        shipped = KIT_ROOT / "params" / "prompts"
        where = (f"the kit's templates are in {shipped}" if shipped.is_dir() else
                 "the kit ships its templates in its source checkout's params/prompts")
        given = [f"--set {o}" for o in cfg.overrides if parse_override(o)[:2] == ("evol_instruct", "prompts_dir")]
        raise ConfigError([f"{(given or [cfg.source])[-1]}: [evol_instruct] prompts_dir = {ev.prompts_dir!r}: no "
                           f"directory {root} (a relative path resolves against {cfg.workdir}, where rleif runs; "
                           f"{where})"])


def claim_report_folder(report_dir: str | Path, output_dir: str | Path) -> None:
    """Raise ConfigError (one line) unless ``report_dir`` is free for the run whose artifacts are in ``output_dir``:
    missing, empty of a page, or holding a ``run.json`` whose ``output_dir`` is this one (the same run, rerun).
    Refused rather than written aside: a report written somewhere else than the folder the user named (or
    ``reports/<run_name>``) is a report nobody finds, and the fix (another ``[base] run_name``) is one word."""
    folder, mine = Path(report_dir).resolve(), Path(output_dir).resolve()
    if not folder.exists():
        return
    if not folder.is_dir():
        raise ConfigError([f"report folder {folder} is a file, expected a directory: choose another [base] run_name "
                           "(or --report-dir), or move that file away"])
    run_file = folder / RUN_FILE
    try:
        run = json.loads(run_file.read_text(encoding="utf-8")) if run_file.is_file() else None
    except (OSError, ValueError):
        run = {}
    recorded = run.get("output_dir") if isinstance(run, dict) else None
    if run is None and not (folder / "index.html").exists():
        return  # no report here yet (a new folder, or notebooks only)
    theirs = (folder / recorded).resolve() if isinstance(recorded, str) and recorded else None
    if theirs == mine:
        return
    whose = f"the report of the run with output_dir {theirs}" if theirs else "a report (index.html / run.json) " \
        "this kit's run.json does not describe"
    raise ConfigError([f"report folder {folder} holds {whose}, not this run's ({mine}): choose another [base] "
                       "run_name (or --report-dir), or move that folder away; it is never overwritten"])


def setup(params_path: str, overrides: list[str] | tuple = (), stage: str = SETUP,
          report_dir: str | None = None, workdir: str | None = None) -> tuple[RunConfig, RunPaths]:
    """Everything a notebook needs before its first step. ``params_path`` "" (a notebook opened by hand): the run
    config ``params_for`` chooses ($RLEIF_PARAMS, else the tiny CPU preset), named in one printed line."""
    quiet_harmless_noise()
    wd = Path(workdir) if workdir else default_workdir()
    params_path, chosen_by = params_for(params_path)
    if chosen_by != "params_path":  # a notebook opened by hand: say which preset it runs, and how to pick another
        print(f"params: {params_path} ({chosen_by}; make lab PARAMS=params/<preset>.toml picks another)")
    cfg = load_config(params_path, list(overrides or ()), workdir=wd)
    check_prompts_root(cfg, stage)
    note = numerics.pin(cfg.base.cpu_kernels)  # before anything loads torch: the libraries read it once
    if note:
        print(note)
    reports = Path(report_dir) if report_dir else wd / "reports" / cfg.run_name
    paths = RunPaths(output_dir=cfg.output_dir, report_dir=reports if reports.is_absolute() else wd / reports)
    if dist.is_main():
        claim_report_folder(paths.report_dir, cfg.output_dir)  # a stage command writes there too (metrics, figures)
    if run_lock.LOCK_ON_SETUP and dist.is_main():  # ranks a holder started inherit its lock (run_lock)
        run_lock.acquire(cfg.output_dir)  # a stage command from a shell: one run per output directory
    paths.report_dir.mkdir(parents=True, exist_ok=True)
    apply_threads_and_seed(cfg)
    if dist.is_main():  # under accelerate launch: rank 0 alone
        write_manifest(cfg, paths, stage)
    set_target(paths.metrics, stage)
    return cfg, paths
