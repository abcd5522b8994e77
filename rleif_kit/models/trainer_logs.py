"""Where the trainers log besides their ``log.jsonl``: ``[base] report_to`` (``[sft] report_to`` overrides it for SFT).

    [base]
    report_to = ["tensorboard"]      # then: tensorboard --logdir rleif_output/<run>/tensorboard

TensorBoard is handled here rather than by name in ``report_to``: transformers 5 puts its event files under the
trainer's ``output_dir/runs/<date>_<host>`` (checkpoint folders, a new folder per run), so the kit hands the
trainers its own callback writing to ``RunPaths.tensorboard(model)`` — one folder per model (``03_sft``,
``04_irm``, ``04_prm``, ``05_ppo``) that a rerun appends to. Our own PPO loop writes every numeric column of its
log row as a scalar through ``StepLog``. The other integrations (wandb, mlflow, ...) pass through to
transformers unchanged.

Both also print ``core.progress`` lines (step, loss or reward, KL, ETA) when ``rleif run`` streams them.

A transformers trainer's own rows go to its ``log.jsonl`` through :func:`jsonl_callback`; a resumed run first drops
the rows the interrupted one logged after the checkpoint it resumes from, so each step is in the file once, as in a
run that was never interrupted. (Our PPO loop rewrites its log the same way on resume: ``ppo/trainer.py``.)
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

from rleif_kit.core.config import RunConfig
from rleif_kit.core.jsonl import JsonlWriter, read_jsonl, write_jsonl
from rleif_kit.core.paths import RunPaths
from rleif_kit.core.progress import ProgressLines
from rleif_kit.core.reward_formula import parse_reward_formula
from rleif_kit.core.stages import PPO, REWARD_MODELS, SFT

LABELS = {"sft": SFT, "irm": f"{REWARD_MODELS} irm", "prm": f"{REWARD_MODELS} prm", "ppo": PPO}  # progress lines


def requested(cfg: RunConfig, model: str) -> list[str]:
    """The loggers asked for ``model`` (``sft``, ``irm``, ``prm``, ``ppo``): ``[sft] report_to`` for SFT when set."""
    wanted = list(cfg.sft.report_to) if model == "sft" and cfg.sft.report_to else list(cfg.base.report_to)
    if model != "sft" and not cfg.base.report_to and cfg.sft.report_to not in ([], ["none"]):
        # before [base] report_to, [sft] report_to drove the reward models too: say where that moved
        print(f"note: [sft] report_to = {list(cfg.sft.report_to)} is SFT's alone now; the reward models and PPO "
              "log to [base] report_to (empty here)")
    return [] if "none" in wanted else wanted


def _tensorboard(wanted: list[str]) -> bool:
    if "tensorboard" not in wanted:
        return False
    if importlib.util.find_spec("tensorboard") is None:  # an install without it: say so, train anyway
        print("note: report_to tensorboard skipped: tensorboard is not installed (pip install tensorboard)")
        return False
    return True


def report_to(cfg: RunConfig, model: str) -> list[str]:
    """``report_to`` for a transformers / TRL trainer's arguments: every requested integration but TensorBoard
    (``callbacks`` adds ours); ``["none"]`` when nothing is left."""
    return [w for w in requested(cfg, model) if w != "tensorboard"] or ["none"]


def callbacks(cfg: RunConfig, paths: RunPaths, model: str) -> list[Any]:
    """The progress-line callback, and a ``TensorBoardCallback`` writing to ``paths.tensorboard(model)`` when
    TensorBoard is asked for."""
    out = [progress_callback(model)]
    if not _tensorboard(requested(cfg, model)):
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
    """Per step of our own loop: every numeric column of its log row as a TensorBoard scalar (when asked for) and a
    progress line (reward, KL, the mean of each term of the reward formula); nothing on ranks other than the main
    one (``enabled=False``)."""

    def __init__(self, cfg: RunConfig, paths: RunPaths, model: str, total: int, start: int = 0,
                 enabled: bool = True):
        self.writer = None
        self.lines = ProgressLines(LABELS[model], total, start=start, enabled=None if enabled else False)
        self.terms = line_terms(cfg.ppo.reward_formula)
        if enabled and _tensorboard(requested(cfg, model)):
            from torch.utils.tensorboard import SummaryWriter  # heavy: loaded on first use

            logdir: Path = paths.tensorboard(model)
            logdir.mkdir(parents=True, exist_ok=True)
            self.writer = SummaryWriter(log_dir=str(logdir))

    def add(self, row: dict[str, Any], step: int) -> None:
        """``row`` of step ``step`` (0-based): its line says step + 1 of ``total`` done."""
        self.lines.update(step + 1, reward=row.get("reward_mean"), kl=row.get("kl"),
                          **{name: row.get(key) for name, key in self.terms})
        if self.writer is None:
            return
        for key, value in row.items():
            if isinstance(value, (int, float)) and not isinstance(value, bool) and key != "step":
                self.writer.add_scalar(f"{model_prefix(key)}{key}", value, step)
        self.writer.flush()  # a crash or a KL-guard stop keeps every step written so far

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            self.writer = None


def model_prefix(key: str) -> str:
    """TensorBoard groups scalars by the part before '/': the reward columns under ``reward/`` (reward_mean,
    rI_mean, rA_mean, low_rA_share, the truth AUCs), the update's under ``ppo/`` (kl, entropy, losses, clip)."""
    if key.endswith("_s") or key in ("gen_tokens_per_s", "pad_ratio"):
        return "time/"  # where a step's seconds went (ppo/trainer.py: PhaseTimer)
    return "reward/" if key.startswith(("reward", "rI", "rA", "r_", "low_rA", "flagged", "right", "truth")) else "ppo/"
