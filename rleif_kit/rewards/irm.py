"""Stage 04 (first half): the instruction reward model (IRM), trained with TRL's RewardTrainer.

The IRM scores an evolved instruction in [0, 1] (the sigmoid of its reward head): rI in the RLEIF
reward ``r = rI * rA``. It learns from preference pairs of sibling variants (``irm_data.py``); a
held-out split of sibling groups — never pairs of a group seen in training — gives its pairwise
accuracy. ``[reward_model].irm_base = "sft"`` starts it from the SFT model (merged when SFT made an
adapter), which on the tiny model learns far faster than a random init.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from rleif_kit.core import distributed as dist
from rleif_kit.core.config import RunConfig
from rleif_kit.core.launch import load_result
from rleif_kit.core.paths import RunPaths
from rleif_kit.models.loading import load_tokenizer, nf4_config, resolve_rm_base, rm_report_to, use_bf16
from rleif_kit.reward_scoring.heldout import split_by_group
from rleif_kit.reward_scoring.irm import irm_score
from rleif_kit.reward_scoring.load import RM_INFO, head_class, load_rm
from rleif_kit.rewards.launched import launch_training


@dataclass
class IRMResult:
    model_dir: Path
    train_pairs: int
    heldout_pairs: int
    heldout_accuracy: float
    log: list[dict] = field(default_factory=list)
    runtime_s: float = 0.0


def load_rm_for_training(path: str, head: str, cfg: RunConfig, bf16: bool) -> tuple[Any, Any]:
    """A reward model on ``path`` with a new head, wrapped per ``[reward_model].rm_finetune``.

    LoRA shapes come from ``[sft]``; the new head is always fully trained (PEFT's ``modules_to_save``
    for the SEQ_CLS / TOKEN_CLS tasks), since a LoRA on a randomly initialised head learns nothing.
    """
    import torch

    cls, num_labels, task = head_class(head)
    finetune = cfg.reward_model.rm_finetune
    dtype = torch.bfloat16 if bf16 else torch.float32
    kwargs: dict[str, Any] = {"dtype": dtype, "num_labels": num_labels}
    if finetune == "qlora":
        kwargs["quantization_config"] = nf4_config(dtype)
    tokenizer = load_tokenizer(path)
    torch.manual_seed(cfg.base.seed)  # the new head and the LoRA A matrices start the same on every run
    model = cls.from_pretrained(path, **kwargs)
    model.config.pad_token_id = tokenizer.pad_token_id  # Llama has none; the score head reads the last token
    if finetune == "full":
        return model, tokenizer
    from peft import LoraConfig, get_peft_model, prepare_model_for_kbit_training

    if finetune == "qlora":
        model = prepare_model_for_kbit_training(model, use_gradient_checkpointing=cfg.sft.gradient_checkpointing)
    sft = cfg.sft
    lora = LoraConfig(r=sft.lora_r, lora_alpha=sft.lora_alpha, lora_dropout=sft.lora_dropout,
                      target_modules=list(sft.lora_targets), task_type=task, bias="none")
    return get_peft_model(model, lora), tokenizer


def save_rm(model: Any, tokenizer: Any, out_dir: Path, info: dict, card: str) -> None:
    """Full weights, or the LoRA adapter (with its head) and ``rm_info.json`` naming the base; a model card.
    ``model`` may be the Trainer that trained it (under accelerate launch every rank calls this; rank 0 writes)."""
    dist.save_model_dir(model, tokenizer, out_dir, {RM_INFO: json.dumps(info, indent=2) + "\n",
                                                    "README.md": card})


def loss_log(trainer: Any) -> list[dict]:
    return [r for r in trainer.state.log_history if "loss" in r]


def pairwise_accuracy(model: Any, tokenizer: Any, pairs: Sequence[dict]) -> float:
    """Share of pairs whose chosen instruction scores above the rejected one."""
    if not pairs:
        return 0.0
    chosen = irm_score(model, tokenizer, [p["chosen_text"] for p in pairs])
    rejected = irm_score(model, tokenizer, [p["rejected_text"] for p in pairs])
    return sum(c > r for c, r in zip(chosen, rejected)) / len(pairs)


def train_irm(cfg: RunConfig, paths: RunPaths, pairs: Sequence[dict], heldout_share: float | None = None) -> tuple[Any, Any, IRMResult]:
    """Train the IRM on ``pairs`` (per ``rm_finetune``) with TRL's RewardTrainer; save it with a model card."""
    import torch
    from datasets import Dataset
    from trl import RewardConfig, RewardTrainer

    rm = cfg.reward_model
    out_dir = paths.irm_model
    if launch_training(cfg, paths, "irm", pairs, heldout_share):  # [base].launcher = "accelerate"

        return *load_rm(out_dir, bf16=cfg.base.bf16), load_result(IRMResult, paths.rm_result("irm"))
    heldout_share = rm.rm_heldout_share if heldout_share is None else heldout_share
    train, heldout = split_by_group(pairs, heldout_share, cfg.base.seed)
    if not train:
        raise ValueError("no IRM training pairs: the judged sibling sets gave no preferences")
    base = resolve_rm_base(cfg, paths, rm.irm_base, "[reward_model] irm_base")
    bf16 = use_bf16(cfg.base.bf16)
    model, tokenizer = load_rm_for_training(base, "sequence", cfg, bf16)
    tokenizer.padding_side = "right"
    steps = int(rm.rm_epochs * -(-len(train) // rm.rm_batch_size))
    args = RewardConfig(output_dir=str(out_dir / "checkpoints"), learning_rate=rm.rm_lr, num_train_epochs=rm.rm_epochs,
                        per_device_train_batch_size=rm.rm_batch_size, save_strategy="no",
                        logging_steps=max(1, min(10, steps // 10)),  # at least ~10 points on the curve
                        report_to=rm_report_to(cfg), use_cpu=not torch.cuda.is_available(), bf16=bf16,
                        max_length=rm.rm_max_len, seed=cfg.base.seed, disable_tqdm=False)
    data = Dataset.from_list([{"chosen": p["chosen_text"], "rejected": p["rejected_text"]} for p in train])
    trainer = RewardTrainer(model=model, args=args, train_dataset=data, processing_class=tokenizer)
    start = time.perf_counter()
    trainer.train()
    runtime = time.perf_counter() - start
    accuracy = pairwise_accuracy(trainer.model, tokenizer, heldout)
    result = IRMResult(out_dir, len(train), len(heldout), accuracy, loss_log(trainer), runtime)
    card = (f"# Instruction reward model (IRM)\n\nBase: `{rm.irm_base}` ({rm.rm_finetune}). Trained on {len(train)} "
            f"preference pairs of evolved sibling variants; held-out pairwise accuracy {accuracy:.3f} on "
            f"{len(heldout)} pairs from unseen sibling groups. lr {rm.rm_lr}, epochs {rm.rm_epochs}, batch "
            f"{rm.rm_batch_size}.\nScore: sigmoid of the reward head, in [0, 1] (rI).\n")
    save_rm(trainer, tokenizer, out_dir, {"head": "sequence", "finetune": rm.rm_finetune, "base_model": base},
            card)
    return trainer.model, tokenizer, result
