"""Stage 03: supervised fine-tuning with TRL's SFTTrainer (QLoRA, LoRA or full fine-tuning).

Reads the step-by-step data and open-domain samples (``worlds/data.py``), trains with the loss on the
response only, checkpoints every ``[sft].save_steps`` (a rerun resumes from the last complete checkpoint; one
cut short by a full disk or a kill is set aside: ``models/checkpoints.py``),
and saves the model (adapter, or full weights) plus tokenizer and model card to ``03_sft/model``. On the
arithmetic world it also measures greedy held-out accuracy before and after training.
Under ``accelerate launch`` the Trainer runs DDP / DeepSpeed; only rank 0 measures and writes.

    python -m rleif_kit.sft --params params/tiny-cpu.toml
    accelerate launch --config_file params/accelerate/ddp.yaml -m rleif_kit.sft --params params/wizardmath-7b.toml
"""

from __future__ import annotations

import json
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rleif_kit.checks.verdicts import check_sft_learning, check_step_format, format_verdicts
from rleif_kit.core import distributed as dist
from rleif_kit.core import trainer_args
from rleif_kit.core.config import RunConfig
from rleif_kit.core.disk import writing
from rleif_kit.core.jsonl import read_jsonl
from rleif_kit.core.launch import load_result, maybe_launch
from rleif_kit.core.paths import RunPaths
from rleif_kit.core.plots import plot_accuracy_bars, plot_loss_curve, save_figure
from rleif_kit.core.stages import SFT
from rleif_kit.core.verdict import Verdict
from rleif_kit.models import trainer_logs
from rleif_kit.models.checkpoints import needed_bytes, resume_checkpoint
from rleif_kit.models.loading import (
    SFT_INFO,
    load_causal_lm,
    load_for_training,
    load_merged,
    load_tokenizer,
    trainable_parameters,
    use_bf16,
    use_fp16,
)
from rleif_kit.models.refs import model_ref, relink_adapter
from rleif_kit.sft.card import write_sft_card
from rleif_kit.sft.examples import build_sft_examples
from rleif_kit.sft.tokenize import tokenized_examples
from rleif_kit.worlds import world_for
from rleif_kit.worlds.data import heldout_problems
from rleif_kit.worlds.heldout_eval import evaluate_heldout
from rleif_kit.worlds.tiny_corpus import ensure_base_model
from rleif_kit.worlds.before_after import before_after_table
from rleif_kit.worlds.intros import stage_intro
from rleif_kit.worlds.words import run_words

# The stage's public face: what its notebook and ``python -m rleif_kit.sft`` use; the plots and the verdicts' text
# are defined in core/plots.py and checks/verdicts.py and offered here, so the notebook reads one stage module.
__all__ = ["stage_intro", "SFTResult", "run_sft", "before_after", "heldout_title", "plot_heldout", "plot_loss_curve",
           "plot_accuracy_bars", "save_figure", "format_verdicts"]


@dataclass
class SFTResult:
    model_dir: Path
    finetune: str
    examples: int
    steps: int
    runtime_s: float
    log: list[dict] = field(default_factory=list)  # one row per logging step: step, loss, learning_rate, ...
    accuracy_before: float | None = None
    accuracy_after: float | None = None
    verdicts: list[Verdict] = field(default_factory=list)

    @property
    def first_loss(self) -> float:
        return next(r["loss"] for r in self.log if "loss" in r)

    @property
    def final_loss(self) -> float:
        return [r["loss"] for r in self.log if "loss" in r][-1]


def _trainer_args(cfg: RunConfig, paths: RunPaths, bf16: bool):
    import torch  # heavy: loaded on first use
    from trl import SFTConfig  # heavy: loaded on first use

    s = cfg.sft
    return SFTConfig(**trainer_args.merged(dict(
        output_dir=str(paths.sft_checkpoints), seed=cfg.base.seed, data_seed=cfg.base.seed,
        max_length=s.max_seq_len, completion_only_loss=True, packing=False,
        num_train_epochs=s.epochs, max_steps=s.max_steps, learning_rate=s.lr,
        per_device_train_batch_size=s.batch_size, gradient_accumulation_steps=s.grad_accum,
        warmup_steps=s.warmup_steps or s.warmup_ratio, lr_scheduler_type=s.lr_scheduler, weight_decay=s.weight_decay,
        activation_checkpointing=s.gradient_checkpointing,
        logging_steps=s.logging_steps, save_strategy="steps", save_steps=s.save_steps, save_total_limit=2,
        bf16=bf16, fp16=use_fp16(cfg.base.fp16), use_cpu=not torch.cuda.is_available(),
        report_to=trainer_logs.report_to(cfg, "sft"), run_name=trainer_logs.run_name(cfg, "sft"),
        dataloader_num_workers=0,
        train_sampling_strategy=_sampling(s),
    ), s.trainer_args))  # [sft] trainer_args: what the kit has no key for (core/trainer_args.py)


def _sampling(s) -> str:
    """transformers' ``train_sampling_strategy`` for ``[sft]``: balanced micro-batches, length groups, or random."""
    if s.balance_batches:
        return "batch_rebalance"
    return "group_by_length" if s.group_by_length else "random"


def _seeded_sampler(trainer: Any, seed: int) -> None:
    """BatchRebalanceSampler draws its batches from a seed of its own (42) that the Trainer does not set: the run's
    seed is given to it here, so that another seed draws other batches as the random sampler does."""
    real = trainer._get_train_sampler

    def sampler(*args, **kwargs):
        got = real(*args, **kwargs)
        if type(got).__name__ == "BatchRebalanceSampler":
            got.seed = seed
        return got

    trainer._get_train_sampler = sampler


def train_sft(cfg: RunConfig, paths: RunPaths, examples: list[dict], base_path: str) -> tuple[Any, Any, dict]:
    """Train on ``examples``; returns (trainer, tokenizer, initial trainable parameters)."""
    from datasets import Dataset  # heavy: loaded on first use
    from trl import SFTTrainer  # heavy: loaded on first use

    bf16 = use_bf16(cfg.base.bf16)
    tokenizer = load_tokenizer(base_path)
    tokenizer.padding_side = "right"
    model = load_for_training(base_path, cfg.sft, bf16)
    initial = trainable_parameters(model)
    data = Dataset.from_dict(tokenized_examples(tokenizer, examples))  # TRL's tokens, in batches (sft/tokenize.py)
    trainer = SFTTrainer(model=model, args=_trainer_args(cfg, paths, bf16), train_dataset=data,
                         processing_class=tokenizer,
                         callbacks=[trainer_logs.jsonl_callback(paths.sft_log), *trainer_logs.callbacks(cfg, paths, "sft")])
    # TRL drafts a card into checkpoints/ at every save ("a fine-tuned version of [None]"); the model's card is
    # ours (sft/card.py, in the model folder), so the draft is switched off
    trainer.create_model_card = lambda *args, **kwargs: None
    _seeded_sampler(trainer, cfg.base.seed)
    checkpoints = paths.sft_checkpoints
    with dist.main_first():  # rank 0 sets an incomplete checkpoint aside (models/checkpoints.py)
        resume = resume_checkpoint(checkpoints)
    with writing(lambda: checkpoints / f"checkpoint-{trainer.state.global_step}", lambda: needed_bytes(checkpoints)):
        trainer.train(resume_from_checkpoint=resume)  # a full disk mid-save: one line naming the checkpoint
    dist.debug_dump("sft", trainer.model.named_parameters())
    return trainer, tokenizer, initial


def save_model(trainer: Any, tokenizer: Any, out_dir: Path, info: dict) -> None:
    """Adapter (LoRA/QLoRA) or full weights, plus the tokenizer and ``sft_info.json``, in standard formats. An
    adapter's own config names its base as ``info`` does (``models.refs``: relative to the folder, or a hub id).
    Written into ``model.tmp`` beside it and renamed when whole: a save cut short (a full disk: one line) never
    stands at ``out_dir``, where the reward models and PPO would load it."""
    tokenizer.padding_side = "left"
    building = out_dir.with_name(out_dir.name + ".tmp")  # a sibling: a relative base reference holds for both
    if dist.is_main():
        shutil.rmtree(building, ignore_errors=True)
    dist.barrier()
    with writing(out_dir):
        dist.save_model_dir(trainer, tokenizer, building, {SFT_INFO: json.dumps(info, indent=2) + "\n"})
        if dist.is_main() and "base_model" in info:
            relink_adapter(building, info["base_model"])
        if dist.is_main():
            shutil.rmtree(out_dir, ignore_errors=True)
            building.rename(out_dir)


def _heldout_accuracy(cfg: RunConfig, paths: RunPaths, model: Any, tokenizer: Any, tag: str) -> float:
    problems = heldout_problems(cfg, paths)[: cfg.sft.eval_samples]
    result = evaluate_heldout(world_for(cfg), model, tokenizer, problems, cfg.eval, out_path=paths.sft_heldout(tag),
                              desc=f"held-out ({tag})")
    return result["accuracy"]


def run_sft(cfg: RunConfig, paths: RunPaths) -> SFTResult:
    """Build the data, measure the untrained model, train, save, measure again."""
    if maybe_launch(cfg, "rleif_kit.sft"):  # [base].launcher = "accelerate": the same, in launched processes
        return load_result(SFTResult, paths.sft_result)
    with dist.main_first():  # under accelerate launch rank 0 builds the tiny model and the data, the others read
        base_path = ensure_base_model(cfg)
        examples = build_sft_examples(cfg, paths) if dist.is_main() else list(read_jsonl(paths.sft_data))
    verdicts = [check_step_format([e["completion"] for e in examples if e["source"] != "open_domain"],
                                  cfg.diagnostics, seed=cfg.base.seed, source=paths.rel(paths.sft_data),
                                  world=world_for(cfg))]
    measure = bool(world_for(cfg).heldout_benchmark) and cfg.sft.eval_samples > 0 and dist.is_main()  # rank 0
    acc_before = acc_after = None
    if measure:
        base = load_causal_lm(base_path)  # a hub id out of reach: one line at once, not the library's retries
        acc_before = _heldout_accuracy(cfg, paths, base, load_tokenizer(base_path), "before")
        del base
    start = time.perf_counter()
    trainer, tokenizer, _ = train_sft(cfg, paths, examples, base_path)
    runtime = time.perf_counter() - start
    base_ref = model_ref(base_path, paths.sft_model, paths.output_dir, given=cfg.base.model_name)
    save_model(trainer, tokenizer, paths.sft_model,
               {"finetune": cfg.sft.finetune, "base_model": base_ref, "steps": trainer.state.global_step})
    dist.barrier()  # the saved model is complete
    if measure and dist.world_size() > 1:  # the saved copy: DeepSpeed ZeRO-3 holds only shards in memory
        acc_after = _heldout_accuracy(cfg, paths, *load_merged(paths.sft_model, inference=True), "after")
    elif measure:
        model = trainer.model.merge_and_unload() if cfg.sft.finetune != "full" else trainer.model
        acc_after = _heldout_accuracy(cfg, paths, model, tokenizer, "after")
    if acc_before is not None and acc_after is not None:
        verdicts.append(check_sft_learning(acc_before, acc_after, cfg.diagnostics,
                                           source=paths.rel(paths.sft_heldout("after")), world=world_for(cfg)))
    log = list(read_jsonl(paths.sft_log))
    result = SFTResult(paths.sft_model, cfg.sft.finetune, len(examples), trainer.state.global_step, runtime,
                       log, acc_before, acc_after, verdicts)
    if dist.is_main():  # last, so that the card has the accuracy after training
        write_sft_card(cfg, paths, result, base_ref, base_path, examples)
    return result


# ------------------------------------------------------------------ the looks at the run

def heldout_title(cfg: RunConfig) -> str:
    """The held-out bars' title in the run's words: ``Held-out pass@1 on tiny_code tasks (greedy)``."""
    w = run_words(cfg)
    return f"Held-out {w.score} on {w.world} {w.tasks} (greedy)"


def plot_heldout(cfg: RunConfig, result: SFTResult) -> Any:
    """The held-out score before and after SFT as two bars, titled and labelled in the run's words."""
    return plot_accuracy_bars({"untrained": result.accuracy_before, "after SFT": result.accuracy_after},
                              title=heldout_title(cfg), score=run_words(cfg).score)


def before_after(cfg: RunConfig, paths: RunPaths) -> Any:
    """One held-out item with the untrained model's answer and the SFT model's (``eval_before/after.jsonl``)."""
    return before_after_table(lambda: heldout_problems(cfg, paths), paths.sft_heldout("before"),
                              paths.sft_heldout("after"), ("untrained", "after SFT"), run_words(cfg), SFT)
