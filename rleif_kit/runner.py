"""Run the numbered notebooks headless, in order, with papermill: ``rleif run params/<run>.toml``.

Each executed notebook lands in ``reports/<run>/NN_stage.ipynb`` with its outputs; the recorded
figures go to ``reports/<run>/metrics.json``. The config is validated (and the base model
resolved) before the first notebook starts, so a typo costs seconds, not a training run. On
failure the error names the notebook, the cell and the exception, and the executed copy keeps
the full traceback.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from pathlib import Path

from rleif_kit.config import load_config
from rleif_kit.paths import STAGES

NOTEBOOK_DIR = Path(__file__).resolve().parent.parent / "notebooks"


class StageFailed(RuntimeError):
    pass


@dataclass(frozen=True)
class StageRun:
    stage: str
    output: Path
    seconds: float


def notebook_dir() -> Path:
    """The notebooks shipped with the kit (a source checkout's ``notebooks/``)."""
    if not NOTEBOOK_DIR.is_dir():
        raise FileNotFoundError(f"notebooks folder not found at {NOTEBOOK_DIR}; run rleif from a source checkout")
    return NOTEBOOK_DIR


def available_stages() -> list[str]:
    present = {p.stem for p in notebook_dir().glob("[0-9][0-9]_*.ipynb")}
    return [s for s in STAGES if s in present]


def select_stages(requested: str | None) -> list[str]:
    """``"03_sft,05_ppo"`` or ``"sft"`` → stage names in pipeline order; None → every available stage."""
    stages = available_stages()
    if not requested:
        return stages
    chosen = []
    for item in (s.strip() for s in requested.split(",") if s.strip()):
        match = [s for s in stages if s == item or s.split("_", 1)[1] == item or s[:2] == item]
        if not match:
            raise ValueError(f"unknown stage {item!r}; available: {', '.join(stages)}")
        chosen.extend(match)
    return [s for s in stages if s in chosen]


def _failure_summary(stage: str, output: Path, err: Exception) -> str:
    cell = getattr(err, "cell_index", None)
    ename, evalue = getattr(err, "ename", type(err).__name__), getattr(err, "evalue", str(err))
    where = f"cell {cell}" if cell is not None else "the kernel"
    lines = [f"{stage} failed in {where}: {ename}: {evalue}".strip(),
             f"executed notebook with the full traceback: {output}"]
    return "\n".join(lines)


def run_stage(stage: str, params_path: str, overrides: list[str], report_dir: Path, workdir: Path,
              settings_path: str | None) -> StageRun:
    import papermill as pm

    source = notebook_dir() / f"{stage}.ipynb"
    output = report_dir / f"{stage}.ipynb"
    parameters = {"params_path": str(params_path), "overrides": list(overrides), "report_dir": str(report_dir),
                  "workdir": str(workdir), "settings_path": settings_path or ""}
    start = time.perf_counter()
    try:
        pm.execute_notebook(str(source), str(output), parameters=parameters, cwd=str(workdir),
                            progress_bar=sys.stderr.isatty(), kernel_name="python3", log_output=False)
    except Exception as err:  # papermill's PapermillExecutionError and kernel deaths alike
        raise StageFailed(_failure_summary(stage, output, err)) from err
    return StageRun(stage, output, time.perf_counter() - start)


def run_pipeline(params_path: str, stages: str | None = None, overrides: list[str] | None = None,
                 settings_path: str | None = None, report_dir: str | None = None) -> list[StageRun]:
    """Validate, then execute each selected notebook in order; stop at the first failure."""
    from rleif_kit.models import resolve_model_name

    overrides = list(overrides or [])
    workdir = Path.cwd()
    cfg = load_config(params_path, overrides, workdir=workdir)  # ConfigError before any work
    resolve_model_name(cfg.base.model_name, cfg)  # ModelNotFound before any work
    if settings_path:
        from rleif_kit.settings import load_settings

        load_settings(settings_path)
    chosen = select_stages(stages)
    reports = Path(report_dir) if report_dir else workdir / "reports" / cfg.run_name
    reports.mkdir(parents=True, exist_ok=True)
    runs = []
    for i, stage in enumerate(chosen, 1):
        print(f"[{i}/{len(chosen)}] {stage} ...", flush=True)
        run = run_stage(stage, params_path, overrides, reports.resolve(), workdir, settings_path)
        print(f"[{i}/{len(chosen)}] {stage} done in {run.seconds:.0f}s -> {run.output}", flush=True)
        runs.append(run)
    return runs
