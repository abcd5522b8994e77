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
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from rleif_kit import distributed as dist
from rleif_kit.config import RunConfig
from rleif_kit.paths import RunPaths


@dataclass
class IRMResult:
    model_dir: Path
    train_pairs: int
    heldout_pairs: int
    heldout_accuracy: float
    log: list[dict] = field(default_factory=list)
    runtime_s: float = 0.0


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
    with dist.main_first():  # under accelerate launch rank 0 merges, the others read its copy
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


HEADS = {"sequence": ("AutoModelForSequenceClassification", 1, "SEQ_CLS"),  # IRM: one reward per text
         "token": ("AutoModelForTokenClassification", 2, "TOKEN_CLS")}  # PRM: correct / not, per token


def _head_class(head: str):
    import transformers

    name, labels, task = HEADS[head]
    return getattr(transformers, name), labels, task


def load_rm_for_training(path: str, head: str, cfg: RunConfig, bf16: bool) -> tuple[Any, Any]:
    """A reward model on ``path`` with a new head, wrapped per ``[reward_model].rm_finetune``.

    LoRA shapes come from ``[sft]``; the new head is always fully trained (PEFT's ``modules_to_save``
    for the SEQ_CLS / TOKEN_CLS tasks), since a LoRA on a randomly initialised head learns nothing.
    """
    import torch

    from rleif_kit.models import load_tokenizer

    cls, num_labels, task = _head_class(head)
    finetune = cfg.reward_model.rm_finetune
    dtype = torch.bfloat16 if bf16 else torch.float32
    kwargs: dict[str, Any] = {"dtype": dtype, "num_labels": num_labels}
    if finetune == "qlora":
        from rleif_kit.models import nf4_config

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
    dist.save_model_dir(model, tokenizer, out_dir, {"rm_info.json": json.dumps(info, indent=2) + "\n",
                                                    "README.md": card})


def load_rm(model_dir: str | Path, load_in_4bit: bool = False, bf16: bool = False) -> tuple[Any, Any]:
    """A saved IRM or PRM for scoring: full weights, or base + adapter (merged unless 4-bit); bf16 when
    asked and the GPU has it, else fp32."""
    import torch

    from rleif_kit.models import load_tokenizer

    model_dir = Path(model_dir)
    info_path = model_dir / "rm_info.json"
    if not info_path.exists():
        raise FileNotFoundError(f"{model_dir} is not a saved reward model (no rm_info.json): run 04_reward_models")
    info = json.loads(info_path.read_text())
    cls, num_labels, _ = _head_class(info["head"])
    tokenizer = load_tokenizer(str(model_dir))
    from rleif_kit.models import use_bf16

    dtype = torch.bfloat16 if (load_in_4bit or use_bf16(bf16)) else torch.float32  # fp32 only on CPUs
    kwargs: dict[str, Any] = {"dtype": dtype, "num_labels": num_labels}
    if load_in_4bit:
        from rleif_kit.models import nf4_config

        kwargs["quantization_config"] = nf4_config(torch.bfloat16)
    if info["finetune"] == "full":
        model = cls.from_pretrained(model_dir, **kwargs)
    else:
        from peft import PeftModel

        model = PeftModel.from_pretrained(cls.from_pretrained(info["base_model"], **kwargs), model_dir)
        if not load_in_4bit:
            model = model.merge_and_unload()
    model.config.pad_token_id = tokenizer.pad_token_id
    model.eval()
    for p in model.parameters():
        p.requires_grad_(False)
    return model, tokenizer


def rm_report_to(cfg: RunConfig) -> list[str]:
    """``[sft].report_to`` passes through to the reward-model trainers (TensorBoard when installed)."""
    from rleif_kit.models import report_to

    return report_to(list(cfg.sft.report_to))


def loss_log(trainer: Any) -> list[dict]:
    return [r for r in trainer.state.log_history if "loss" in r]


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


def train_irm(cfg: RunConfig, paths: RunPaths, pairs: Sequence[dict], heldout_share: float | None = None) -> tuple[Any, Any, IRMResult]:
    """Train the IRM on ``pairs`` (per ``rm_finetune``) with TRL's RewardTrainer; save it with a model card."""
    import torch
    from datasets import Dataset
    from trl import RewardConfig, RewardTrainer

    from rleif_kit.models import use_bf16
    from rleif_kit.reward_stage import launch_training

    rm = cfg.reward_model
    out_dir = paths.stage("04_reward_models") / "irm"
    if launch_training(cfg, paths, "irm", pairs, heldout_share):  # [base].launcher = "accelerate"
        from rleif_kit.launch import load_result

        return *load_rm(out_dir, bf16=cfg.base.bf16), load_result(IRMResult, out_dir / "result.json")
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
