"""Run the numbered notebooks headless, in order, with papermill: ``rleif run params/<run>.toml``.

Each executed notebook lands in ``reports/<run>/NN_stage.ipynb`` with its outputs; the recorded
figures go to ``reports/<run>/metrics.json``. The config is validated (and the base model
resolved) before the first notebook starts, so a typo costs seconds, not a training run. On
failure the error names the notebook, the cell and the exception, and the executed copy keeps
the full traceback.

A rerun skips the stages that are complete with an unchanged config (``resume.py``; ``--force``
reruns them), repeats 01-06 per ``[loop]`` iteration (``loop.py``) and ends with
``reports/<run>/index.html`` (``report.py``). While a stage runs, its progress lines stream to the terminal
and its whole output to ``reports/<run>/logs/NN_stage.log``; ``reports/<run>/run.json`` keeps every stage's
status for the report (``run_status.py``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import os
import signal
import threading
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from rleif_kit.checks import stage_failures
from rleif_kit.core import run_lock
from rleif_kit.core.paths import RunPaths
from rleif_kit.core.config import RunConfig, config_changes, load_config, reason_notes
from rleif_kit.core.progress import ENV as PROGRESS_ENV
from rleif_kit.core.records import read_records, write_json_atomic
from rleif_kit.core.run_setup import claim_report_folder
from rleif_kit.core.settings import load_settings
from rleif_kit.core.stages import STAGES
from rleif_kit.core.exits import (EXIT_DISK_FULL, EXIT_REJECTED, EXIT_STOPPED, DiskFull, EndpointRejected,
                                  StageIncomplete)
from rleif_kit.models.loading import resolve_model_name
from rleif_kit.pipeline import resume
from rleif_kit.pipeline.loop import iteration_dir, iteration_overrides, plan_steps, summarize_loop
from rleif_kit.pipeline.report import write_report
from rleif_kit.pipeline.run_status import RunStatus, StageStream
from rleif_kit.worlds import world_for

NOTEBOOK_DIR = Path(__file__).resolve().parents[2] / "notebooks"


class StageFailed(RuntimeError):
    """A stage's notebook raised: ``exit_code`` 3 when the endpoint rejected the requests, 5 on a full disk, else
    2."""

    def __init__(self, message: str, exit_code: int = 2):
        super().__init__(message)
        self.exit_code = exit_code


class StageStopped(StageFailed):
    """A stage finished but is incomplete (a budget stop, items pending): the run stops there (exit 4)."""

    def __init__(self, message: str):
        super().__init__(message, EXIT_STOPPED)


@dataclass(frozen=True)
class StageRun:
    stage: str
    output: Path
    seconds: float
    lines_shown: int = 0  # progress lines (and warnings) streamed to the terminal


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


def _disk_full(ename: str | None, evalue: str) -> str:
    """The notebook's error when a write ran out of space ('' otherwise): the kit's ``DiskFull`` line, or Python's
    and sqlite's own words where no kit writer named the path (core/disk.py)."""
    if ename == DiskFull.__name__:
        return evalue
    if (ename == "OSError" and evalue.startswith((f"[Errno {errno.ENOSPC}]", f"[Errno {errno.EDQUOT}]"))) or (
            ename == "OperationalError" and "disk is full" in evalue):
        return f"no space left on device ({evalue}): free some space and rerun; what was written before is kept"
    return ""


def stage_log(report_dir: Path, stage: str) -> Path:
    """``<report_dir>/logs/<stage>.log``: everything the stage's notebook printed, appended per run."""
    return Path(report_dir) / "logs" / f"{stage}.log"


def _kernel_config():
    """The kernels run with CurveZMQ transport encryption where pyzmq has it: no plain-text traffic, and no
    "Kernel is running over TCP without encryption" warning at every stage."""
    import zmq  # heavy: loaded on first use (papermill brings it)
    from traitlets.config import Config

    return Config({"KernelManager": {"transport_encryption": "required"}}) if zmq.has("curve") else Config()


def _kernel_manager_class() -> type:
    """The kernel manager papermill runs each notebook with: jupyter_client's, except that shutting down does not
    interrupt the kernel first. jupyter_client sends SIGINT before its shutdown request (for a kernel still running
    code); papermill shuts down only after the last cell, and a kernel still finishing that cell's messages then
    logged "KeyboardInterrupt caught in kernel." to the terminal of a stage that succeeded. The shutdown request
    alone ends an idle kernel (and jupyter_client's SIGTERM, then SIGKILL, one that does not answer)."""
    from jupyter_client.manager import AsyncKernelManager  # heavy: loaded on first use (papermill brings it)

    class FinishedNotebookKernelManager(AsyncKernelManager):
        async def _async_interrupt_kernel(self) -> None:
            if not self.shutting_down:  # an interrupt asked for while the notebook runs still interrupts
                await super()._async_interrupt_kernel()

    return FinishedNotebookKernelManager


@dataclass(frozen=True)
class RunContext:
    """What every stage of one ``rleif run`` is run with: the params file and its overrides (an iteration of the
    outer loop adds its own), the settings file, the directory relative paths resolve against, ``--force``."""

    params_path: str
    overrides: tuple[str, ...] = ()
    settings_path: str | None = None
    workdir: Path = Path(".")
    force: bool = False

    def with_overrides(self, overrides: list[str] | tuple[str, ...]) -> "RunContext":
        return dataclasses.replace(self, overrides=tuple(overrides))


def run_stage(stage: str, ctx: RunContext, report_dir: Path) -> StageRun:
    import papermill as pm  # heavy: loaded on first use

    source = notebook_dir() / f"{stage}.ipynb"
    output = report_dir / f"{stage}.ipynb"
    parameters = {"params_path": str(ctx.params_path), "overrides": list(ctx.overrides), "report_dir": str(report_dir),
                  "workdir": str(ctx.workdir), "settings_path": ctx.settings_path or ""}
    log = stage_log(report_dir, stage)
    stream = StageStream(log)
    stream.write(f"\n===== {stage} · {time.strftime('%Y-%m-%d %H:%M:%S')} =====\n")
    start = time.perf_counter()
    previous = os.environ.get(PROGRESS_ENV)
    os.environ[PROGRESS_ENV] = "1"  # the kernel inherits it: the stage prints progress lines (core/progress.py)
    try:
        pm.execute_notebook(str(source), str(output), parameters=parameters, cwd=str(ctx.workdir), progress_bar=False,
                            kernel_name="python3", log_output=False, stdout_file=stream, stderr_file=stream,
                            config=_kernel_config(), kernel_manager_class=_kernel_manager_class())
    except Exception as err:  # papermill's PapermillExecutionError and kernel deaths alike
        ename = getattr(err, "ename", None)
        if ename == StageIncomplete.__name__:  # work left that a rerun continues: stopped, not failed
            raise StageStopped(f"{stage}: {getattr(err, 'evalue', err)}; not marked complete, later stages not run: "
                               "rerun to continue") from err
        if full := _disk_full(ename, getattr(err, "evalue", "")):  # one line, as from the stage's own command
            raise StageFailed(f"{stage}: {full}", EXIT_DISK_FULL) from err
        raise StageFailed(_failure_summary(stage, output, err),
                          EXIT_REJECTED if ename == EndpointRejected.__name__ else 2) from err
    finally:
        stream.close()
        if previous is None:
            os.environ.pop(PROGRESS_ENV, None)
        else:
            os.environ[PROGRESS_ENV] = previous
    return StageRun(stage, output, time.perf_counter() - start, stream.shown)


def _clear_metrics(report_dir: Path, stage: str) -> None:
    """Drop a stage's recorded figures before it reruns, so none of the old run's survive its new one."""
    metrics = report_dir / "metrics.json"
    data = read_records(metrics)
    if data.pop(stage, None) is not None:
        write_json_atomic(metrics, data)


def _record_failures(report_dir: Path, stage: str, stage_dir: Path) -> dict | None:
    """Copy the stage's ``failures.json`` (what its requests came to, by cause) into the report's metrics."""
    failures = stage_failures.read(stage_dir)
    if failures is not None:
        metrics = report_dir / "metrics.json"
        data = read_records(metrics)
        data.setdefault(stage, {})["failures"] = failures
        write_json_atomic(metrics, data)
    return failures


def _decide(cfg, stage: str, notebook: Path, force: bool, reran: str | None) -> tuple[bool, str]:
    """(run it?, why): skip only a stage complete with an unchanged config and no earlier stage rerun."""
    if force:
        return True, "--force"
    done, why = resume.check_stage(cfg, stage, notebook)
    if done and not reran:
        return False, why
    return True, f"{reran} reran before it" if reran and why != "not run yet" else why


def _execute(cfg, stage: str, ctx: RunContext, out_dir: Path, later: list[tuple[Path, str]], tag: str) -> StageRun:
    """Run one stage; until it finishes it and every ``later`` (output_dir, stage) are stale."""
    for output_dir, name in later:
        resume.invalidate(output_dir, name)
    out_dir.mkdir(parents=True, exist_ok=True)
    _clear_metrics(out_dir, stage)
    stage_dir = RunPaths(cfg.output_dir).stage_dir(stage)
    stage_failures.clear(stage_dir)
    try:
        run = run_stage(stage, ctx, out_dir)
    finally:  # a stage that stopped on its failures says which, by cause, in the report
        failures = _record_failures(out_dir, stage, stage_dir)
    if failures and failures.get("status") != "ok":  # it ended without raising: its own error said nothing yet
        print(stage_failures.failure_lines(failures, "fix the cause, then run the same command again: it retries "
                                           "exactly the failed items (no --force needed)"), flush=True)
    incomplete = resume.incomplete_reason(cfg, stage, read_records(out_dir / "metrics.json").get(stage, {}))
    if incomplete:  # later stages would run on part of the data: stop here
        raise StageStopped(f"{stage}: {incomplete}; not marked complete, later stages not run: rerun to continue")
    print(f"{tag} {stage} ok in {run.seconds:.0f}s -> {run.output}", flush=True)
    resume.mark_done(cfg, stage, run.output, run.seconds)
    return run


def run_pipeline(params_path: str, stages: str | None = None, overrides: list[str] | None = None,
                 settings_path: str | None = None, report_dir: str | None = None,
                 force: bool = False) -> list[StageRun]:
    """Validate, then execute each selected notebook in order (01-06 once per ``[loop]`` iteration),
    skipping stages that are complete with an unchanged config (unless ``force``); stop at the first
    failure. ``reports/<run>/index.html`` is written at the end, also after a failure."""
    overrides = list(overrides or [])
    workdir = Path.cwd()
    cfg = load_config(params_path, overrides, workdir=workdir)  # ConfigError before any work
    world_for(cfg)  # and what the run's world cannot do (a reward term, a benchmark), before any work too
    resolve_model_name(cfg.base.model_name, cfg)  # ModelNotFound before any work
    if settings_path:
        load_settings(settings_path)
    n = cfg.loop.iterations
    steps = plan_steps(select_stages(stages), n)
    report_dir = str(Path(report_dir) if report_dir else workdir / "reports" / cfg.run_name)
    claim_report_folder(report_dir, cfg.output_dir)  # another run's report is never overwritten
    run_lock.acquire(cfg.output_dir, "rleif run " + " ".join([params_path, *(f"--set {o}" for o in overrides)]))
    try:
        ctx = RunContext(params_path, tuple(overrides), settings_path, workdir, force)
        with _terminate_as_interrupt():
            return _run_steps(cfg, ctx, report_dir, n, steps)
    finally:
        run_lock.release(cfg.output_dir)


class Terminated(KeyboardInterrupt):
    """SIGTERM (a scheduler's stop, ``kill``, a closed terminal's hang-up) arrived: handled as Ctrl-C is, so the run's
    status and its report page are written before the exit (130)."""


@contextlib.contextmanager
def _terminate_as_interrupt():
    """While the run goes on, SIGTERM / SIGHUP raise :class:`Terminated` in the main thread (only there can a signal
    handler be set; elsewhere, as in a notebook's thread, nothing changes)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(signum, frame):
        raise Terminated(f"terminated ({signal.Signals(signum).name})")

    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _status_header(cfg: RunConfig, params_path: str, overrides: list[str], reports: Path) -> dict:
    return {"run": cfg.run_name, "params": params_path, "overrides": list(overrides),
            "output_dir": os.path.relpath(cfg.output_dir, reports), "config_changes": config_changes(cfg),
            "reason_notes": reason_notes(cfg)}  # [reasons] entries that do not apply to this run, one line each


def _step_key(k: int, stage: str) -> str:
    return (f"iter-{k}/" if k > 1 else "") + stage


def _mark_later_stale(status: RunStatus, reports: Path, later: list, reran: str) -> None:
    """Every later stage with figures or a notebook of an earlier run (a run.json entry or not) is now stale."""
    for lk, ls in later:
        entry = status.get(_step_key(lk, ls)).get("status")
        made = (iteration_dir(reports, lk) / f"{ls}.ipynb").exists()
        if entry in ("ok", "skipped", "stale") or (entry is None and made):
            status.set(_step_key(lk, ls), "stale", f"{reran} reran after its figures were recorded")


def _not_current(status: RunStatus, earlier: list) -> str:
    """The first earlier stage that is failed, stopped, stale or still marked running ("" when none is)."""
    for ek, es in earlier:
        entry = status.get(_step_key(ek, es)).get("status")
        if entry in ("failed", "stopped", "stale", "running"):
            return f"{_step_key(ek, es)}, which is {entry}"
    return ""


def _run_steps(cfg: RunConfig, ctx: RunContext, report_dir: str | None, n: int, steps: list) -> list[StageRun]:
    every_step = plan_steps(available_stages(), n)  # what a rerun makes stale, selected or not
    reports = (Path(report_dir) if report_dir else ctx.workdir / "reports" / cfg.run_name).resolve()
    reports.mkdir(parents=True, exist_ok=True)
    status = RunStatus(reports, _status_header(cfg, ctx.params_path, list(ctx.overrides), reports))
    runs, reran, iteration = [], None, {1: (cfg, ctx)}
    try:
        for i, (k, stage) in enumerate(steps, 1):
            tag = f"[{i}/{len(steps)}]" + (f" iteration {k}/{n}" if n > 1 else "")
            key = _step_key(k, stage)
            if k not in iteration:  # seeded from iteration k - 1, now that it has run
                extra, notes = iteration_overrides(cfg.output_dir, k)
                print("\n".join(notes), flush=True)
                more = ctx.with_overrides([*ctx.overrides, *extra])
                iteration[k] = (load_config(ctx.params_path, list(more.overrides), workdir=ctx.workdir), more)
            run_cfg, run_ctx = iteration[k]
            out_dir = iteration_dir(reports, k)
            run_it, why = _decide(run_cfg, stage, out_dir / f"{stage}.ipynb", ctx.force, reran)
            if not run_it:
                print(f"{tag} {stage} skipped (unchanged): {why}; --force reruns it", flush=True)
                seconds = None if "seconds" in status.get(key) else resume.recorded_seconds(run_cfg.output_dir, stage)
                status.set(key, "skipped", why, seconds=seconds)  # the wall time of the run that made it
                continue
            reran = reran or stage + (f" (iteration {k})" if n > 1 else "")
            print(f"{tag} {stage} running ({'first run' if why == 'not run yet' else why})", flush=True)
            at = every_step.index((k, stage))
            later = [(iteration_dir(cfg.output_dir, lk), ls) for lk, ls in every_step[at:]]
            _mark_later_stale(status, reports, every_step[at + 1:], reran)
            status.set(key, "running", why, log=stage_log(out_dir, stage))
            start = time.perf_counter()
            try:
                runs.append(_execute(run_cfg, stage, run_ctx, out_dir, later, tag))
            except StageStopped as err:
                status.set(key, "stopped", str(err), seconds=time.perf_counter() - start)
                raise
            except KeyboardInterrupt as err:
                why = str(err) if isinstance(err, Terminated) else "interrupted (Ctrl-C)"
                status.set(key, "stopped", why, seconds=time.perf_counter() - start)
                raise
            except BaseException as err:
                with contextlib.suppress(OSError):  # a full disk: run.json's write must not hide the stage's line
                    status.set(key, "failed", str(err) or type(err).__name__, seconds=time.perf_counter() - start)
                print(f"{tag} {stage} failed after {time.perf_counter() - start:.0f}s", flush=True)
                raise
            behind = _not_current(status, every_step[:at])
            if behind:  # it ran on what an earlier stage left, and that is not this run's
                status.set(key, "stale", f"ran on the outputs of {behind}", seconds=runs[-1].seconds,
                           lines_shown=runs[-1].lines_shown)
            else:
                status.set(key, "ok", why, seconds=runs[-1].seconds, lines_shown=runs[-1].lines_shown)
        if n > 1:
            print(f"loop summary: {summarize_loop(reports, cfg.output_dir, n)}", flush=True)
    finally:
        status.finish()
        try:
            print(f"report: {write_report(reports)}", flush=True)
        except Exception as err:  # never hide the stage's own error behind the report's
            print(f"report not written: {type(err).__name__}: {err}", file=sys.stderr)
    return runs
