"""What training the IRM and the PRM share: the start (launched, or the base resolved and loaded with a new
head), the Trainer arguments, the timed training and the save. ``irm.py`` and ``prm.py`` keep only what
differs: their data, their Trainer (TRL's RewardTrainer; ``transformers.Trainer`` with a step-label
collator) and their held-out measure.
"""

from __future__ import annotations

import contextlib
import json
import time
from pathlib import Path
from typing import Any

from rleif_kit.core import distributed as dist
from rleif_kit.core import trainer_args
from rleif_kit.core.config import RunConfig
from rleif_kit.core.disk import writing
from rleif_kit.core.paths import RunPaths
from rleif_kit.models import trainer_logs
from rleif_kit.models.loading import from_pretrained, load_tokenizer, nf4_config, resolve_rm_base, use_bf16
from rleif_kit.models.refs import relink_adapter
from rleif_kit.rewards.reward import RM_INFO, head_class, head_kwargs

CHECKPOINTS = "checkpoints"  # the Trainer's output_dir inside the model folder (nothing is saved there: no resume,
# so an interrupted reward model is trained again from its start and its log, from trainer.state, has no repeats)


def load_rm_for_training(path: str, head: str, cfg: RunConfig, bf16: bool) -> tuple[Any, Any]:
    """A reward model on ``path`` with a new head, wrapped per ``[reward_model].rm_finetune``.

    LoRA shapes come from ``[sft]``; the new head is always fully trained (PEFT's ``modules_to_save``
    for the SEQ_CLS / TOKEN_CLS tasks), since a LoRA on a randomly initialised head learns nothing.
    """
    import torch  # heavy: loaded on first use

    cls, _, task = head_class(head)
    finetune = cfg.reward_model.rm_finetune
    dtype = torch.bfloat16 if bf16 else torch.float32
    kwargs: dict[str, Any] = {"dtype": dtype, **head_kwargs(head)}
    if finetune == "qlora":
        kwargs["quantization_config"] = nf4_config(dtype)
    tokenizer = load_tokenizer(path)
    torch.manual_seed(cfg.base.seed)  # the new head and the LoRA A matrices start the same on every run
    model = from_pretrained(cls.from_pretrained, path, **kwargs)  # a hub id out of reach: one line, no retries
    model.config.pad_token_id = tokenizer.pad_token_id  # Llama has none; the score head reads the last token
    if finetune == "full":
        return model, tokenizer
    from peft import LoraConfig, get_peft_model, prepare_model_for_kbit_training  # heavy: loaded on first use

    if finetune == "qlora":
        model = prepare_model_for_kbit_training(model, use_gradient_checkpointing=cfg.sft.gradient_checkpointing)
    sft = cfg.sft
    lora = LoraConfig(r=sft.lora_r, lora_alpha=sft.lora_alpha, lora_dropout=sft.lora_dropout,
                      target_modules=list(sft.lora_targets), task_type=task, bias="none")
    return get_peft_model(model, lora), tokenizer


def expand_layers(model: Any, n: int) -> None:
    """``n`` decoder layers on top of ``model``'s, each a copy of its last layer with the attention's output and
    the MLP's down projection zeroed, so the residual stream passes through unchanged and the model computes what it
    did (LLaMA Pro's block expansion, Wu et al. 2024). Why, for a PRM: in the base, what a token's position predicts
    (the result after ``3 + 5 =``) exists only at that position's last layer, where no later token can read it; one
    more layer lets a step's end attend to it and compare it with the result written. Llama-shaped models only."""
    import copy

    import torch  # heavy: loaded on first use

    layers = getattr(model.base_model, "layers", None)
    if not isinstance(layers, torch.nn.ModuleList) or not layers or not hasattr(layers[-1], "self_attn"):
        raise ValueError(f"[reward_model] prm_extra_layers: {type(model).__name__} has no Llama-shaped decoder "
                         "layers to copy (prm_extra_layers = 0 trains it as it is)")
    for _ in range(n):
        new = copy.deepcopy(layers[-1])
        torch.nn.init.zeros_(new.self_attn.o_proj.weight)
        torch.nn.init.zeros_(new.mlp.down_proj.weight)
        new.self_attn.layer_idx = len(layers)
        layers.append(new)
    model.config.num_hidden_layers = len(layers)


def save_rm(model: Any, tokenizer: Any, out_dir: Path, info: dict, card: str) -> None:
    """Full weights, or the LoRA adapter (with its head) and ``rm_info.json`` naming the base; a model card.
    ``model`` may be the Trainer that trained it (under accelerate launch every rank calls this; rank 0 writes)."""
    with writing(out_dir):  # a full disk: one line (core/disk.py); the stage is not marked done, a rerun retrains
        dist.save_model_dir(model, tokenizer, out_dir, {RM_INFO: json.dumps(info, indent=2) + "\n",
                                                        "README.md": card})
        if dist.is_main() and "base_model" in info:  # an adapter's config names its base as the info file does
            relink_adapter(out_dir, info["base_model"])
    if dist.is_main():  # the Trainer's output_dir, empty with save_strategy "no": no clutter in the model folder
        with contextlib.suppress(OSError):
            (out_dir / CHECKPOINTS).rmdir()


def loss_log(trainer: Any) -> list[dict]:
    return [r for r in trainer.state.log_history if "loss" in r]


def start_training(cfg: RunConfig, paths: RunPaths, base_name: str, key: str, head: str,
                   extra_layers: int = 0) -> tuple[str, bool, Any, Any]:
    """(resolved base, bf16, model with a new ``head``, tokenizer) for a reward model starting from ``base_name``,
    ``extra_layers`` identity layers on top (:func:`expand_layers`)."""
    base = resolve_rm_base(cfg, paths, base_name, key)
    bf16 = use_bf16(cfg.base.bf16)
    model, tokenizer = load_rm_for_training(base, head, cfg, bf16)
    if extra_layers:
        expand_layers(model, extra_layers)
    return base, bf16, model, tokenizer


def trainer_args_for(cls: Any, cfg: RunConfig, out_dir: Path, rows: int, bf16: bool, model: str = "irm",
                     **own: Any) -> Any:
    """``cls`` (TRL's RewardConfig for the IRM, TrainingArguments for the PRM) with the arguments both reward models
    train with (``[reward_model]`` lr, epochs and batch; ``model`` "irm" or "prm" names the tracker run), the model's
    ``own`` ones, then ``[reward_model] trainer_args`` (the keys ``cls`` has: core/trainer_args.py)."""
    import torch  # heavy: loaded on first use

    rm = cfg.reward_model
    steps = int(rm.rm_epochs * -(-rows // rm.rm_batch_size))
    kit = dict(output_dir=str(out_dir / CHECKPOINTS), learning_rate=rm.rm_lr, num_train_epochs=rm.rm_epochs,
               per_device_train_batch_size=rm.rm_batch_size, save_strategy="no",
               logging_steps=max(1, min(10, steps // 10)),  # at least ~10 points on the curve
               report_to=trainer_logs.report_to(cfg, model),  # the IRM's and the PRM's: [base] report_to
               run_name=trainer_logs.run_name(cfg, model),
               use_cpu=not torch.cuda.is_available(), bf16=bf16, seed=cfg.base.seed,
               disable_tqdm=False, **own)
    return cls(**trainer_args.merged(kit, rm.trainer_args, cls))


def timed_train(trainer: Any) -> float:
    """Train; the wall time in seconds."""
    start = time.perf_counter()
    trainer.train()
    return time.perf_counter() - start
