"""The one place that knows where each artifact lives under ``[base].output_dir``.

Stages read what earlier stages wrote only through these names, so moving a file is a one-line
change here. The layout is the run directory of DESIGN.md §3. The properties only name paths: writers
create folders (``write_jsonl``, ``write_json_atomic``, ``save_pretrained`` do), readers never do, so
reading a run (07, doctor, resume) leaves no empty stage folder behind.
"""

from __future__ import annotations

import shutil
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from rleif_kit.core.stages import DEDUP, DIAGNOSTICS, EVAL, EVOLVE, PPO, REWARD_MODELS, SETUP, SFT, STAGES

DONE_MARKER = ".done.json"
RM_ROWS = {"irm": "irm_pairs.jsonl", "prm": "prm_steps.jsonl"}  # what each reward model trains on


@contextmanager
def staged_dir(target: Path, replace: bool = True) -> Iterator[Path]:
    """A fresh sibling folder (``<target>.tmp``) to write a directory artifact into; it takes the place of
    ``target`` only when the block ends without an error, so a crash never leaves half of it at ``target``.
    With ``replace=False`` an existing ``target`` must be empty (else OSError, nothing replaced)."""
    tmp = target.with_name(target.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    yield tmp
    if target.exists():
        if replace:
            shutil.rmtree(target)
        else:
            target.rmdir()  # refuses a directory that is not empty
    tmp.rename(target)


@dataclass(frozen=True)
class RunPaths:
    """Artifact paths of one run: ``output_dir`` holds the artifacts, ``report_dir`` the notebooks
    (None where only artifacts are read, e.g. a previous iteration of the loop)."""

    output_dir: Path
    report_dir: Path | None = None

    def stage_dir(self, name: str) -> Path:
        """``<output_dir>/<stage>/`` (not created)."""
        if name not in STAGES:
            raise ValueError(f"unknown stage {name!r}; stages are {', '.join(STAGES)}")
        return self.output_dir / name

    def rel(self, path: Path) -> str:
        """``path`` relative to the run directory when it lies inside it (how verdicts name their sources)."""
        path = Path(path)
        return str(path.relative_to(self.output_dir)) if path.is_relative_to(self.output_dir) else str(path)

    def stage(self, name: str) -> Path:
        """``<output_dir>/<stage>/``, created on first use (for writers)."""
        d = self.stage_dir(name)
        d.mkdir(parents=True, exist_ok=True)
        return d

    def tensorboard(self, model: str) -> Path:
        """``tensorboard/<NN_model>/``: the TensorBoard event files of ``sft``, ``irm``, ``prm`` or ``ppo`` (GRPO
        too), one folder each, so ``tensorboard --logdir <output_dir>/tensorboard`` shows the four side by side."""
        folders = {"sft": SFT, "irm": REWARD_MODELS[:3] + "irm", "prm": REWARD_MODELS[:3] + "prm", "ppo": PPO}
        if model not in folders:
            raise ValueError(f"no TensorBoard folder for {model!r}; models are {', '.join(folders)}")
        return self.output_dir / "tensorboard" / folders[model]

    def done_marker(self, stage: str) -> Path:
        """``<stage>/.done.json``: written by the runner when the stage's notebook finished (resume)."""
        return self.stage_dir(stage) / DONE_MARKER

    # run level
    @property
    def resolved_config(self) -> Path:
        return self.output_dir / "config.resolved.toml"

    @property
    def manifest(self) -> Path:
        return self.output_dir / "manifest.json"

    @property
    def metrics(self) -> Path:
        return self._reports / "metrics.json"

    @property
    def figures(self) -> Path:
        d = self._reports / "figures"
        d.mkdir(parents=True, exist_ok=True)
        return d

    @property
    def _reports(self) -> Path:
        if self.report_dir is None:
            raise ValueError(f"no report directory for the run at {self.output_dir}")
        return self.report_dir

    # 00_setup's data step
    @property
    def data_report(self) -> Path:
        return self.stage_dir(SETUP) / "data_report.json"

    @property
    def probe_set(self) -> Path:
        """Held-out evaluation items with their gold solutions in the step format: what a world without its own
        held-out split (math) gives the counterfactual probes. Written by the data step."""
        return self.stage_dir(SETUP) / "probe_set.jsonl"

    @property
    def seeds_rejected(self) -> Path:
        """Training questions the data step did not make seeds, each with its reason."""
        return self.stage_dir(SETUP) / "seeds_rejected.jsonl"

    # the outer loop ([loop] iterations): iteration k > 1 is a run of its own under iter-k/
    @property
    def loop_seeds(self) -> Path:
        """An iteration's seeds: what the previous iteration kept."""
        return self.output_dir / "seeds.jsonl"

    @property
    def loop_summary(self) -> Path:
        return self._reports / "loop_summary.json"

    # a world's own files (its fixed splits): <output_dir>/<world>/
    def world_dir(self, name: str) -> Path:
        return self.output_dir / name

    @property
    def arith_heldout(self) -> Path:
        return self.world_dir("arith") / "heldout.jsonl"

    # 01_evolve
    @property
    def evolved(self) -> Path:
        return self.stage_dir(EVOLVE) / "evolved.jsonl"

    @property
    def eliminated(self) -> Path:
        return self.stage_dir(EVOLVE) / "eliminated.jsonl"

    @property
    def evolve_failed(self) -> Path:
        return self.stage_dir(EVOLVE) / "failed.jsonl"

    @property
    def evolve_usage(self) -> Path:
        return self.stage_dir(EVOLVE) / "usage.json"

    @property
    def evolve_usage_ledger(self) -> Path:
        """01's requests, each as it was sent (``llm/usage.py``), from which ``usage.json``'s total is rebuilt. Only
        01's: the fan-out and the SFT data's rewrites, through the same model, keep their own ledgers."""
        return self.stage_dir(EVOLVE) / "usage.jsonl"

    @property
    def evolve_summary(self) -> Path:
        return self.stage_dir(EVOLVE) / "summary.json"

    @property
    def evolve_meta(self) -> Path:
        """What the records of 01_evolve were made under: records of another meta are moved aside."""
        return self.stage_dir(EVOLVE) / "meta.json"

    @property
    def response_cache(self) -> Path:
        """Every endpoint response of the run (``[evol_instruct] cache``): evolution, answers, judges."""
        return self.stage_dir(EVOLVE) / "cache.sqlite"

    # 02_dedup
    @property
    def dedup_instructions(self) -> Path:
        return self.stage_dir(DEDUP) / "instructions.jsonl"

    @property
    def kept_instructions(self) -> Path | None:
        """What later stages read as the run's instructions: 02's deduplicated ones, else 01's evolved ones;
        None before 01 has run."""
        return next((p for p in (self.dedup_instructions, self.evolved) if p.exists()), None)

    @property
    def dedup_removed(self) -> Path:
        return self.stage_dir(DEDUP) / "removed.jsonl"

    @property
    def dedup_report(self) -> Path:
        return self.stage_dir(DEDUP) / "dedup_report.json"

    @property
    def embedding_cache(self) -> Path:
        return self.stage_dir(DEDUP) / "embeddings.sqlite"

    @property
    def sft_rows(self) -> Path:
        """The SFT data 02_dedup builds (instruction/response/source), which 03_sft trains on."""
        return self.stage_dir(DEDUP) / "sft.jsonl"

    @property
    def sft_rejected(self) -> Path:
        return self.stage_dir(DEDUP) / "sft_rejected.jsonl"

    @property
    def rewrite_steps_usage_ledger(self) -> Path:
        """The requests that rewrote evolved answers into steps for ``sft.jsonl`` (the evolve model), as sent."""
        return self.stage_dir(DEDUP) / "rewrite_steps.usage.jsonl"

    # 03_sft
    @property
    def sft_data(self) -> Path:
        """The SFT examples actually trained on (prompt/completion), as built by the SFT stage."""
        return self.stage_dir(SFT) / "train.jsonl"

    @property
    def sft_model(self) -> Path:
        return self.stage_dir(SFT) / "model"

    @property
    def sft_checkpoints(self) -> Path:
        return self.stage_dir(SFT) / "checkpoints"

    @property
    def sft_log(self) -> Path:
        return self.stage_dir(SFT) / "log.jsonl"

    @property
    def sft_result(self) -> Path:
        """What a notebook with ``[base] launcher = "accelerate"`` reads back from the launched ranks."""
        return self.stage_dir(SFT) / "result.json"

    def sft_heldout(self, tag: str) -> Path:
        """Per-problem held-out answers of the untrained (``before``) or trained (``after``) model."""
        return self.stage_dir(SFT) / f"eval_{tag}.jsonl"

    # 04_reward_models
    @property
    def irm_model(self) -> Path:
        return self.stage_dir(REWARD_MODELS) / "irm"

    @property
    def prm_model(self) -> Path:
        return self.stage_dir(REWARD_MODELS) / "prm"

    @property
    def sft_merged(self) -> Path:
        """The SFT adapter merged into its base, when a reward model starts from ``"sft"``."""
        return self.stage_dir(REWARD_MODELS) / "sft_merged"

    @property
    def irm_fanout(self) -> Path:
        return self.stage_dir(REWARD_MODELS) / "irm_fanout.jsonl"

    @property
    def irm_rankings(self) -> Path:
        return self.stage_dir(REWARD_MODELS) / "irm_rankings.jsonl"

    @property
    def prm_samples(self) -> Path:
        return self.stage_dir(REWARD_MODELS) / "prm_samples.jsonl"

    @property
    def prm_judged(self) -> Path:
        return self.stage_dir(REWARD_MODELS) / "prm_judged.jsonl"

    def rm_rows(self, which: str) -> Path:
        """The rows ``which`` (``irm`` / ``prm``) trains on: read by every rank of a launched training."""
        return self.stage_dir(REWARD_MODELS) / RM_ROWS[which]

    def rm_model(self, which: str) -> Path:
        return {"irm": self.irm_model, "prm": self.prm_model}[which]

    def rm_result(self, which: str) -> Path:
        """What a notebook with ``[base] launcher = "accelerate"`` reads back from the launched training."""
        return self.rm_model(which) / "result.json"

    # 05_ppo
    @property
    def ppo_model(self) -> Path:
        return self.stage_dir(PPO) / "model"

    @property
    def ppo_checkpoints(self) -> Path:
        return self.stage_dir(PPO) / "checkpoints"

    @property
    def ppo_log(self) -> Path:
        return self.stage_dir(PPO) / "log.jsonl"

    @property
    def ppo_rollouts(self) -> Path:
        """The first few rollouts of the first and the last PPO step (question, response, rI, rA, r, KL)."""
        return self.stage_dir(PPO) / "rollouts.jsonl"

    @property
    def ppo_gate(self) -> Path:
        return self.stage_dir(PPO) / "gate.json"

    @property
    def ppo_result(self) -> Path:
        return self.stage_dir(PPO) / "result.json"

    @property
    def grpo_dir(self) -> Path:
        return self.stage_dir(PPO) / "grpo"

    def ppo_heldout(self, model: str) -> Path:
        """Per-problem held-out answers of ``sft`` or ``ppo`` in 05's A/B."""
        return self.stage_dir(PPO) / f"eval_{model}.jsonl"

    # 06_eval
    @property
    def eval_dir(self) -> Path:
        """``06_eval/<model>/<benchmark>.jsonl`` (+ ``.meta.json``) per model and benchmark."""
        return self.stage_dir(EVAL)

    def eval_model_dir(self, model: str) -> Path:
        return self.stage_dir(EVAL) / model

    def eval_items(self, model: str, benchmark: str) -> Path:
        return self.eval_model_dir(model) / f"{benchmark}.jsonl"

    @property
    def eval_summary(self) -> Path:
        return self.stage_dir(EVAL) / "summary.json"

    @property
    def math_verify_disagreements(self) -> Path:
        """Items, every model and benchmark, where the strict scorer and math-verify disagree (both readings)."""
        return self.stage_dir(EVAL) / "math_verify_disagreements.jsonl"

    # 07_reward_diagnostics
    @property
    def verdicts(self) -> Path:
        return self.stage_dir(DIAGNOSTICS) / "verdicts.json"


RELATIVE = RunPaths(Path("."))  # artifact paths relative to a run directory: how verdicts name their sources
