"""The experiment trackers ``[base] report_to`` names: which are installed, and the ones our own PPO loop logs to.

SFT, the reward models and GRPO are transformers trainers: their ``report_to`` goes to transformers' integrations
(``trainer_logs.report_to``). Our PPO loop is no Trainer, so it logs through accelerate's trackers
(``accelerate.tracking``: the classes behind ``Accelerator(log_with=...)``), started here on the main process
only — tensorboard, wandb, mlflow, trackio, comet_ml, clearml, dvclive and swanlab. The other names transformers
knows (neptune, azure_ml, ...) have no accelerate tracker: PPO says so in one line and logs to the rest.

A tracker follows what the Trainer stages do, so one run's curves land side by side: the run is named
``<run>-<model>`` (``tiny-cpu-ppo``; SFT's trainer gets ``tiny-cpu-sft``, see ``trainer_logs.run_name``), and
the tracker's own environment variables choose the place as for SFT — ``WANDB_PROJECT`` (default
"huggingface", transformers' default), ``MLFLOW_TRACKING_URI`` / ``MLFLOW_EXPERIMENT_NAME`` (mlflow's default
store and experiment); trackio's project is "huggingface", the default of ``TrainingArguments.project``, which the
kit does not set. TensorBoard writes to ``<output_dir>/tensorboard/05_ppo`` as before.

Why the checks: accelerate drops a tracker whose package is missing without a word, and transformers raises
when its trainer is built. Here a missing package is one line before training, with the package to install, and
the stage trains without that tracker; a tracker that fails mid-run (the network, a full disk) is one warning and
is dropped — training goes on, and ``log.jsonl`` stays the record of every step.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from typing import Any, Callable

from rleif_kit.core.stages import PPO

# report_to name -> (the module that must be importable, the pip package that provides it)
PACKAGES = {"tensorboard": ("tensorboard", "tensorboard"), "wandb": ("wandb", "wandb"), "mlflow": ("mlflow", "mlflow"),
            "trackio": ("trackio", "trackio"), "comet_ml": ("comet_ml", "comet-ml"), "neptune": ("neptune", "neptune"),
            "azure_ml": ("azureml", "azureml-core"), "codecarbon": ("codecarbon", "codecarbon"),
            "clearml": ("clearml", "clearml"), "dagshub": ("dagshub", "dagshub"), "flyte": ("flytekit", "flytekit"),
            "dvclive": ("dvclive", "dvclive"), "swanlab": ("swanlab", "swanlab"),
            "kubeflow": ("kubeflow", "kubeflow")}

# the names accelerate has a tracker for: what our PPO loop can log to
PPO_TRACKERS = ("tensorboard", "wandb", "mlflow", "trackio", "comet_ml", "clearml", "dvclive", "swanlab")

_said: set[str] = set()  # lines already printed by this process: a note is said once, not once per stage


def say(line: str) -> None:
    """Print ``line`` to stderr, once per process."""
    if line not in _said:
        _said.add(line)
        print(line, file=sys.stderr)


def missing_package(name: str) -> str:
    """The pip package to install for tracker ``name``, or "" when it is installed (or the name needs none)."""
    if name not in PACKAGES:
        return ""
    module, package = PACKAGES[name]
    if importlib.util.find_spec(module) is not None:
        return ""
    if name == "tensorboard" and importlib.util.find_spec("tensorboardX") is not None:
        return ""
    return package


def installed(wanted: list[str], stage: str) -> list[str]:
    """The names in ``wanted`` whose package is installed; one note for each of the others, which ``stage`` (the
    words for who logs, e.g. "PPO") then trains without."""
    out = []
    for name in wanted:
        package = missing_package(name)
        if package:
            say(f"note: report_to {name} skipped for {stage}: {PACKAGES[name][0]} is not installed "
                f"(pip install {package}); the curves are in its log.jsonl")
        else:
            out.append(name)
    return out


def ppo_names(wanted: list[str], stage: str = PPO) -> list[str]:
    """The installed names of ``wanted`` our PPO loop logs to; one note for those accelerate has no tracker for."""
    for name in wanted:
        if name in PACKAGES and name not in PPO_TRACKERS:
            say(f"note: report_to {name} skipped for {stage}: our PPO loop logs through accelerate's trackers, which "
                f"have none for {name} (they are {', '.join(PPO_TRACKERS)}); the curves are in 05_ppo/log.jsonl")
    return installed([n for n in wanted if n in PPO_TRACKERS], stage)


def make_tracker(name: str, run_name: str, logging_dir: str) -> Any:
    """accelerate's tracker for ``name``, not yet started; named and placed as the transformers integration
    of the same name would place a Trainer stage's run (the module docstring)."""
    from accelerate import PartialState, tracking  # heavy: loaded on first use

    PartialState()  # accelerate's logger needs it: the PPO loop made it already (dist.accelerator), a test has not
    if name == "tensorboard":
        tracker = tracking.TensorBoardTracker("", logging_dir)  # the folder itself: no run subfolder
    elif name == "wandb":
        tracker = tracking.WandBTracker(os.getenv("WANDB_PROJECT", "huggingface"), name=run_name)
    elif name == "mlflow":
        tracker = tracking.MLflowTracker(os.getenv("MLFLOW_EXPERIMENT_NAME", "Default"), run_name=run_name)
    elif name == "trackio":
        tracker = tracking.TrackioTracker("huggingface", name=run_name)  # TrainingArguments.project's default
    elif name == "comet_ml":
        tracker = tracking.CometMLTracker(os.getenv("COMET_PROJECT_NAME"))  # comet's own default when unset
    else:  # clearml, dvclive, swanlab: accelerate's run name
        tracker = tracking.LOGGER_TYPE_TO_CLASS[name](run_name)
    tracker.main_process_only = False  # StepLog makes trackers on the main process alone: no rank check per call
    return tracker


class Trackers:
    """The started trackers of one PPO run. Each call goes to every tracker; one that raises is reported in one
    warning line and dropped, so a tracker never stops training."""

    def __init__(self, names: list[str], run_name: str, logging_dir: str, config: dict[str, Any] | None = None,
                 make: Callable[[str, str, str], Any] = make_tracker):
        self.live: dict[str, Any] = {}
        for name in names:
            tracker = self._call(name, "start", lambda n=name: make(n, run_name, logging_dir))
            if tracker is False or self._call(name, "start", tracker.start) is False:
                continue
            self.live[name] = tracker
            if config and name != "tensorboard":  # TensorBoard: the curves alone, as the Trainer stages write
                self._call(name, "start", lambda t=tracker: t.store_init_configuration(config))

    def _call(self, name: str, what: str, fn: Callable[[], Any]) -> Any:
        """``fn()``; False (and one warning line, the tracker dropped) when it raises."""
        try:
            return fn()
        except Exception as e:  # noqa: BLE001 — any failure of a tracker's library: one line, training goes on
            self.live.pop(name, None)
            first = (str(e).strip().splitlines() or [""])[0][:200]
            print(f"warning: report_to {name} failed at {what} ({type(e).__name__}: {first}); PPO goes on without "
                  "it, 05_ppo/log.jsonl has every step", file=sys.stderr)
            return False

    def log(self, values: dict[str, float], step: int) -> None:
        for name, tracker in list(self.live.items()):
            self._call(name, f"step {step}", lambda t=tracker: t.log(values, step=step))

    def close(self) -> None:
        for name, tracker in list(self.live.items()):
            self._call(name, "the end", tracker.finish)
        self.live = {}
