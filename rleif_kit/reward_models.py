"""Stage 04 (first half): the instruction reward model (IRM), trained with TRL's RewardTrainer.

The IRM scores an evolved instruction in [0, 1] (the sigmoid of its reward head): rI in the RLEIF
reward ``r = rI * rA``. It learns from preference pairs of sibling variants (``irm_data.py``); a
held-out split of sibling groups — never pairs of a group seen in training — gives its pairwise
accuracy. ``[reward_model].irm_base = "sft"`` starts it from the SFT model (merged when SFT made an
adapter), which on the tiny model learns far faster than a random init.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from rleif_kit.config import RunConfig
from rleif_kit.paths import RunPaths


@dataclass
class IRMResult:
    model_dir: Path
    train_pairs: int
    heldout_pairs: int
    heldout_accuracy: float
    log: list[dict] = field(default_factory=list)


def resolve_rm_base(cfg: RunConfig, paths: RunPaths, name: str, key: str) -> str:
    """``"sft"`` → the SFT model as full weights (adapter merged once); else a path or hub id."""
    from rleif_kit.models import resolve_model_name

    if name != "sft":
        return resolve_model_name(name, cfg, key=key)
    info_path = paths.sft_model / "sft_info.json"
    if not info_path.exists():
        raise FileNotFoundError(f"{key} = 'sft' needs the SFT model at {paths.sft_model}: run 03_sft first")
    if json.loads(info_path.read_text())["finetune"] == "full":
        return str(paths.sft_model)
    merged = paths.stage("04_reward_models") / "sft_merged"
    if not (merged / "config.json").exists():
        from rleif_kit.sft import load_sft_model

        model, tokenizer = load_sft_model(paths.sft_model)
        model.save_pretrained(merged)
        tokenizer.save_pretrained(merged)
    return str(merged)


def split_by_group(pairs: Sequence[dict], heldout_share: float, seed: int) -> tuple[list[dict], list[dict]]:
    """Hold out whole sibling groups, so held-out accuracy measures unseen instructions."""
    groups = sorted({str(p["group"]) for p in pairs})
    random.Random(seed).shuffle(groups)
    held = set(groups[: max(1, round(len(groups) * heldout_share))]) if groups else set()
    return [p for p in pairs if str(p["group"]) not in held], [p for p in pairs if str(p["group"]) in held]


def load_scorer(path: str):
    """A sequence-classification model with one output (the reward head) and its tokenizer."""
    from transformers import AutoModelForSequenceClassification

    from rleif_kit.models import load_tokenizer

    tokenizer = load_tokenizer(path)
    model = AutoModelForSequenceClassification.from_pretrained(path, num_labels=1)
    model.config.pad_token_id = tokenizer.pad_token_id  # Llama has none; the score head reads the last token
    return model, tokenizer


def irm_score(model: Any, tokenizer: Any, instructions: Sequence[str], batch_size: int = 64,
              max_length: int = 512) -> list[float]:
    """rI for each instruction: the sigmoid of the reward head, in [0, 1], batched."""
    import torch

    was_training = model.training
    model.eval()
    tokenizer.padding_side = "right"
    device = next(model.parameters()).device
    scores: list[float] = []
    with torch.no_grad():
        for i in range(0, len(instructions), batch_size):
            enc = tokenizer(list(instructions[i:i + batch_size]), return_tensors="pt", padding=True,
                            truncation=True, max_length=max_length).to(device)
            scores += torch.sigmoid(model(**enc).logits[:, 0].float()).tolist()
    model.train(was_training)
    return scores


def pairwise_accuracy(model: Any, tokenizer: Any, pairs: Sequence[dict]) -> float:
    """Share of pairs whose chosen instruction scores above the rejected one."""
    if not pairs:
        return 0.0
    chosen = irm_score(model, tokenizer, [p["chosen_text"] for p in pairs])
    rejected = irm_score(model, tokenizer, [p["rejected_text"] for p in pairs])
    return sum(c > r for c, r in zip(chosen, rejected)) / len(pairs)


def train_irm(cfg: RunConfig, paths: RunPaths, pairs: Sequence[dict], heldout_share: float = 0.2) -> tuple[Any, Any, IRMResult]:
    """Train the IRM on ``pairs`` (full fine-tuning of ``irm_base``); save it with a model card."""
    import torch
    from datasets import Dataset
    from trl import RewardConfig, RewardTrainer

    from rleif_kit.models import use_bf16

    rm = cfg.reward_model
    train, heldout = split_by_group(pairs, heldout_share, cfg.base.seed)
    model, tokenizer = load_scorer(resolve_rm_base(cfg, paths, rm.irm_base, "[reward_model] irm_base"))
    tokenizer.padding_side = "right"
    out_dir = paths.stage("04_reward_models") / "irm"
    steps = int(rm.rm_epochs * -(-len(train) // rm.rm_batch_size))
    args = RewardConfig(output_dir=str(out_dir / "checkpoints"), learning_rate=rm.rm_lr, num_train_epochs=rm.rm_epochs,
                        per_device_train_batch_size=rm.rm_batch_size, save_strategy="no",
                        logging_steps=max(1, min(10, steps // 10)),  # at least ~10 points on the curve
                        report_to=["none"], use_cpu=not torch.cuda.is_available(), bf16=use_bf16(cfg.base.bf16),
                        max_length=cfg.sft.max_seq_len, seed=cfg.base.seed, disable_tqdm=False)
    data = Dataset.from_list([{"chosen": p["chosen_text"], "rejected": p["rejected_text"]} for p in train])
    trainer = RewardTrainer(model=model, args=args, train_dataset=data, processing_class=tokenizer)
    trainer.train()
    accuracy = pairwise_accuracy(trainer.model, tokenizer, heldout)
    trainer.model.save_pretrained(out_dir)
    tokenizer.save_pretrained(out_dir)
    result = IRMResult(out_dir, len(train), len(heldout), accuracy,
                       [r for r in trainer.state.log_history if "loss" in r])
    (out_dir / "README.md").write_text(
        f"# Instruction reward model (IRM)\n\nBase: `{rm.irm_base}`. Trained on {len(train)} preference pairs "
        f"of evolved sibling variants; held-out pairwise accuracy {accuracy:.3f} on {len(heldout)} pairs "
        f"from unseen sibling groups. lr {rm.rm_lr}, epochs {rm.rm_epochs}, batch {rm.rm_batch_size}.\n"
        "Score: sigmoid of the reward head, in [0, 1] (rI).\n")
    return trainer.model, tokenizer, result
