"""Stage 04 (first half): the instruction reward model (IRM), trained with TRL's RewardTrainer.

The IRM scores an evolved instruction in [0, 1] (the sigmoid of its reward head): rI in the RLEIF
reward ``r = rI * rA``. It learns from preference pairs of sibling variants (``irm_data.py``); a
held-out split of sibling groups — never pairs of a group seen in training — gives its pairwise
accuracy. ``[reward_model].irm_base = "sft"`` starts it from the SFT model (merged when SFT made an
adapter), which on the tiny model learns far faster than a random init.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from rleif_kit.core.config import RunConfig
from rleif_kit.core.launch import load_result
from rleif_kit.core.paths import RunPaths
from rleif_kit.models import trainer_logs
from rleif_kit.models.refs import model_ref
from rleif_kit.rewards.launched import launch_training
from rleif_kit.rewards.reward import irm_score, load_rm
from rleif_kit.rewards.rm_cards import irm_card, readme
from rleif_kit.rewards.rm_datasets import pair_rows, save_rows, split_by_group
from rleif_kit.rewards.rm_training import loss_log, save_rm, start_training, timed_train, trainer_args_for


@dataclass
class IRMResult:
    model_dir: Path
    train_pairs: int
    heldout_pairs: int
    heldout_accuracy: float
    log: list[dict] = field(default_factory=list)
    runtime_s: float = 0.0


def pairwise_accuracy(model: Any, tokenizer: Any, pairs: Sequence[dict]) -> float:
    """Share of pairs whose chosen instruction scores above the rejected one."""
    if not pairs:
        return 0.0
    chosen = irm_score(model, tokenizer, [p["chosen"] for p in pairs])
    rejected = irm_score(model, tokenizer, [p["rejected"] for p in pairs])
    return sum(c > r for c, r in zip(chosen, rejected)) / len(pairs)


def train_irm(cfg: RunConfig, paths: RunPaths, pairs: Sequence[dict], heldout_share: float | None = None) -> tuple[Any, Any, IRMResult]:
    """Train the IRM on ``pairs`` (per ``rm_finetune``) with TRL's RewardTrainer; save it with a model card, the
    pairs in ``irm_pairs.jsonl``."""
    from datasets import Dataset  # heavy: loaded on first use
    from trl import RewardConfig, RewardTrainer  # heavy: loaded on first use

    rm, out_dir = cfg.reward_model, paths.irm_model
    if launch_training(cfg, paths, "irm", pairs, heldout_share):  # [base].launcher = "accelerate"
        return *load_rm(out_dir, bf16=cfg.base.bf16), load_result(IRMResult, paths.rm_result("irm"))
    heldout_share = rm.rm_heldout_share if heldout_share is None else heldout_share
    train, heldout = split_by_group(pairs, heldout_share, cfg.base.seed)
    if not train:
        raise ValueError("no IRM training pairs: the judged sibling sets gave no preferences")
    save_rows(paths, "irm", pair_rows(train, heldout))  # the dataset beside the model (rm_datasets.py)
    base, bf16, model, tokenizer = start_training(cfg, paths, rm.irm_base, "[reward_model] irm_base", "sequence")
    tokenizer.padding_side = "right"
    args = trainer_args_for(RewardConfig, cfg, out_dir, len(train), bf16, max_length=rm.rm_max_len)
    data = Dataset.from_list([{"chosen": p["chosen"], "rejected": p["rejected"]} for p in train])  # TRL's names
    trainer = RewardTrainer(model=model, args=args, train_dataset=data, processing_class=tokenizer,
                            callbacks=trainer_logs.callbacks(cfg, paths, "irm"))
    runtime = timed_train(trainer)
    accuracy = pairwise_accuracy(trainer.model, tokenizer, heldout)
    result = IRMResult(out_dir, len(train), len(heldout), accuracy, loss_log(trainer), runtime)
    ref = model_ref(base, out_dir, paths.output_dir, given=None if rm.irm_base == "sft" else rm.irm_base)
    save_rm(trainer, tokenizer, out_dir, {"head": "sequence", "finetune": rm.rm_finetune, "base_model": ref},
            readme(irm_card, cfg, paths, result, ref, base, heldout or train))
    return trainer.model, tokenizer, result
