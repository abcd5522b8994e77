"""Where the trainers log besides their ``log.jsonl``: ``[base] report_to`` (``[sft] report_to`` overrides it for SFT).

    [base]
    report_to = ["tensorboard"]      # then: tensorboard --logdir rleif_output/<run>/tensorboard
    report_to = ["tensorboard", "wandb"]   # wandb, mlflow, trackio, ...: SFT, the reward models and PPO alike

TensorBoard is handled here rather than by name in ``report_to``: transformers 5 puts its event files under the
trainer's ``output_dir/runs/<date>_<host>`` (checkpoint folders, a new folder per run), so the kit hands the
trainers its own callback writing to ``RunPaths.tensorboard(model)`` — one folder per model (``03_sft``,
``04_irm``, ``04_prm``, ``05_ppo``) that a rerun appends to. The other integrations (wandb, mlflow, ...) pass
through to transformers, the run named ``<run>-<model>`` (:func:`run_name`). Our own PPO loop is no Trainer: it
writes every numeric column of its log row through ``StepLog`` to accelerate's trackers of the same names,
TensorBoard included (``models/trackers.py``). A name whose package is not installed is one note before
training, and the stage trains without it (``trackers.installed``).

Both also print ``core.progress`` lines (step, loss or reward, KL, ETA) when ``rleif run`` streams them.

A transformers trainer's own rows go to its ``log.jsonl`` through :func:`jsonl_callback`; a resumed run first drops
the rows the interrupted one logged after the checkpoint it resumes from, so each step is in the file once, as in a
run that was never interrupted. (Our PPO loop rewrites its log the same way on resume: ``ppo/trainer.py``.)
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from rleif_kit.core.config import RunConfig
from rleif_kit.core.jsonl import JsonlWriter, read_jsonl, write_jsonl
from rleif_kit.core.paths import RunPaths
from rleif_kit.core.progress import ProgressLines
from rleif_kit.core.reward_formula import parse_reward_formula
from rleif_kit.core.stages import PPO, REWARD_MODELS, SFT
from rleif_kit.models import trackers

LABELS = {"sft": SFT, "irm": f"{REWARD_MODELS} irm", "prm": f"{REWARD_MODELS} prm", "ppo": PPO}  # progress lines


def requested(cfg: RunConfig, model: str) -> list[str]:
    """The loggers asked for ``model`` (``sft``, ``irm``, ``prm``, ``ppo``): ``[sft] report_to`` for SFT when set."""
    wanted = list(cfg.sft.report_to) if model == "sft" and cfg.sft.report_to else list(cfg.base.report_to)
    if model != "sft" and not cfg.base.report_to and cfg.sft.report_to not in ([], ["none"]):
        # before [base] report_to, [sft] report_to drove the reward models too: say where that moved
        print(f"note: [sft] report_to = {list(cfg.sft.report_to)} is SFT's alone now; the reward models and PPO "
              "log to [base] report_to (empty here)")
    return [] if "none" in wanted else wanted


def run_name(cfg: RunConfig, model: str) -> str:
    """The name of ``model``'s run in a tracker (wandb, mlflow, ...): ``<run>-<model>``, e.g. ``tiny-cpu-ppo``, so
    a run's SFT, reward models and PPO sit side by side and tell apart."""
    return f"{cfg.run_name}-{model}"


def report_to(cfg: RunConfig, model: str) -> list[str]:
    """``report_to`` for a transformers / TRL trainer's arguments: every requested integration that is installed
    (one note for each that is not) but TensorBoard (``callbacks`` adds ours); ``["none"]`` when nothing is
    left."""
    return [w for w in trackers.installed(requested(cfg, model), LABELS[model]) if w != "tensorboard"] or ["none"]


def callbacks(cfg: RunConfig, paths: RunPaths, model: str) -> list[Any]:
    """The progress-line callback, and a ``TensorBoardCallback`` writing to ``paths.tensorboard(model)`` when
    TensorBoard is asked for."""
    out = [progress_callback(model)]
    if "tensorboard" not in trackers.installed(requested(cfg, model), LABELS[model]):
        return out
    from transformers.integrations import TensorBoardCallback  # heavy: loaded on first use

    callback = TensorBoardCallback()
    callback.logging_dir = str(paths.tensorboard(model))  # read by the callback when training begins
    return out + [callback]


def rows_before(rows: list[dict], step: int) -> list[dict]:
    """The log rows a run resumed at ``step`` keeps: those of steps up to ``step``, less an ended run's summary row
    (``train_runtime``, logged at its last step: the resumed run logs its own when it ends)."""
    return [r for r in rows if r.get("step", 0) < step or (r.get("step") == step and "train_runtime" not in r)]


def jsonl_callback(path: Path) -> Any:
    """A TrainerCallback appending each logged row (step, loss, lr, ...) to ``path`` as it happens; when training
    begins (at step 0, or at the checkpoint resumed from) the rows of later steps are dropped first."""
    from transformers import TrainerCallback  # heavy: loaded on first use

    class JsonlLog(TrainerCallback):
        def on_train_begin(self, args, state, control, **kwargs):
            if not state.is_world_process_zero:
                return
            rows = list(read_jsonl(path))
            kept = rows_before(rows, state.global_step)
            if len(kept) != len(rows):
                write_jsonl(path, kept)  # atomic; a full disk is one line (core/disk.py), as for every row below

        def on_log(self, args, state, control, logs=None, **kwargs):
            if logs and state.is_world_process_zero:
                with JsonlWriter(path, fsync_every=1) as out:
                    out.write({"step": state.global_step, **logs})

    return JsonlLog()


def progress_callback(model: str) -> Any:
    """A TrainerCallback printing one ``core.progress`` line per logging step (at most every 10 s)."""
    from transformers import TrainerCallback  # heavy: loaded on first use

    class Progress(TrainerCallback):
        lines: ProgressLines | None = None
        loss: float | None = None
        shown = -1  # the step of the last line printed

        def on_train_begin(self, args, state, control, **kwargs):
            self.lines = ProgressLines(LABELS[model], state.max_steps, start=state.global_step)

        def on_log(self, args, state, control, logs=None, **kwargs):
            if self.lines is not None and state.is_world_process_zero and "loss" in (logs or {}):
                self.loss = logs["loss"]
                if self.lines.update(state.global_step, loss=logs["loss"], lr=logs.get("learning_rate")):
                    self.shown = state.global_step

        def on_train_end(self, args, state, control, **kwargs):  # the last step need not be a logging step
            if self.lines is not None and state.is_world_process_zero and self.shown != state.global_step:
                self.lines.update(state.global_step, loss=self.loss)

    return Progress()


def line_terms(formula: str) -> list[tuple[str, str]]:
    """(name on the progress line, log column) for each term of the reward ``formula``, in rI, rA, rV, rF order;
    with rA, the share the PRM calls bad (``low_rA``). A code run's ``rI * rV`` shows rI and rV, never rA."""
    terms = parse_reward_formula(formula).terms
    out = [(t, f"{t}_mean") for t in ("rI", "rA", "rV", "rF") if t in terms]
    return out + ([("low_rA", "low_rA_share")] if "rA" in terms else [])


class StepLog:
    """Per step of our own loop: every numeric column of its log row as a scalar in each tracker ``report_to``
    names (``models/trackers.py``: TensorBoard, wandb, mlflow, ...) and a progress line (reward, KL, the mean of
    each term of the reward formula); nothing on ranks other than the main one (``enabled=False``)."""

    def __init__(self, cfg: RunConfig, paths: RunPaths, model: str, total: int, start: int = 0,
                 enabled: bool = True, make: Any = trackers.make_tracker):
        self.lines = ProgressLines(LABELS[model], total, start=start, enabled=None if enabled else False)
        self.terms = line_terms(cfg.ppo.reward_formula)
        names = trackers.ppo_names(requested(cfg, model), LABELS[model]) if enabled else []
        if "tensorboard" in names:
            paths.tensorboard(model).mkdir(parents=True, exist_ok=True)
        self.trackers = trackers.Trackers(names, run_name(cfg, model), str(paths.tensorboard(model)),
                                          config=hyperparameters(cfg), make=make)

    def add(self, row: dict[str, Any], step: int) -> None:
        """``row`` of step ``step`` (0-based): its line says step + 1 of ``total`` done."""
        self.lines.update(step + 1, reward=row.get("reward_mean"), kl=row.get("kl"),
                          **{name: row.get(key) for name, key in self.terms})
        scalars = {f"{model_prefix(key)}{key}": value for key, value in row.items()
                   if isinstance(value, (int, float)) and not isinstance(value, bool) and key != "step"}
        if scalars:
            self.trackers.log(scalars, step)  # TensorBoard flushes each step: a crash keeps every step written

    def close(self) -> None:
        self.trackers.close()


def hyperparameters(cfg: RunConfig) -> dict[str, Any]:
    """The run's ``[ppo]`` keys (and the model, seed, world) as a tracker's run configuration: ``ppo.lr``, ...;
    lists as text, since trackers take numbers, text and booleans."""
    flat = {f"ppo.{k}": v for k, v in dataclasses.asdict(cfg.ppo).items()}
    flat.update({"base.model_name": cfg.base.model_name, "base.seed": cfg.base.seed, "base.world": cfg.base.world})
    return {k: v if v is None or isinstance(v, (bool, int, float, str)) else str(v) for k, v in flat.items()}


def model_prefix(key: str) -> str:
    """TensorBoard groups scalars by the part before '/': the reward columns under ``reward/`` (reward_mean,
    rI_mean, rA_mean, low_rA_share, the truth AUCs), the update's under ``ppo/`` (kl, entropy, losses, clip)."""
    if key.endswith("_s") or key in ("gen_tokens_per_s", "pad_ratio"):
        return "time/"  # where a step's seconds went (ppo/trainer.py: PhaseTimer)
    return "reward/" if key.startswith(("reward", "rI", "rA", "r_", "low_rA", "flagged", "right", "truth")) else "ppo/"
