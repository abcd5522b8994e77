"""Load a base model and tokenizer, and wrap it for QLoRA, LoRA or full fine-tuning.

Model names resolve as a local directory first, then as a hub id already in the Hugging Face
cache, then (only when the hub is reachable and not switched off with HF_HUB_OFFLINE) as a hub id.
A name that resolves nowhere is one clear error before any work starts.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from rleif_kit.config import RunConfig
from rleif_kit.sections import SFTConfig


class ModelNotFound(ValueError):
    pass


def _in_hf_cache(repo_id: str) -> bool:
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:  # pragma: no cover - transformers always brings it
        return False
    found = try_to_load_from_cache(repo_id, "config.json")
    return isinstance(found, str)


def _on_hub(repo_id: str) -> bool:
    if os.environ.get("HF_HUB_OFFLINE", "0") not in ("0", "", "false", "False"):
        return False
    try:
        from huggingface_hub import file_exists

        return bool(file_exists(repo_id, "config.json"))
    except Exception:  # no network, bad id, gated repo without a token: not resolvable from here
        return False


def resolve_model_name(name: str, cfg: RunConfig, key: str = "[base] model_name") -> str:
    """A loadable location for ``name``: an absolute local directory, or a hub id."""
    local = cfg.resolve(name)
    if local.is_dir():
        if not (local / "config.json").exists():
            raise ModelNotFound(f"{cfg.source}: {key} = {name!r}: {local} exists but has no config.json")
        return str(local)
    looks_like_id = name.count("/") == 1 and not name.startswith((".", "/", "~"))
    if looks_like_id and (_in_hf_cache(name) or _on_hub(name)):
        return name
    if tiny_build_target(cfg) == local:
        return str(local)  # built on first use by ensure_base_model
    raise ModelNotFound(
        f"{cfg.source}: {key} = {name!r} resolves nowhere: no directory {local}, and no hub id "
        f"'{name}' in the Hugging Face cache. Download the weights (e.g. `huggingface-cli download "
        f"meta-llama/Llama-2-7b-hf --local-dir ./models/Llama-2-7b-hf`) and set {key} to that path."
    )


def tiny_build_target(cfg: RunConfig) -> Path | None:
    """Where the tiny model is built, when the preset asks for one (``[tiny].build``)."""
    return cfg.resolve(cfg.base.model_name) if cfg.tiny.build else None


def tiny_corpus(cfg: RunConfig) -> list[str]:
    """Texts the tiny tokenizer is trained on: prompts and solutions of the arithmetic world."""
    from rleif_kit import arith
    from rleif_kit.evaluation.prompts import math_prompt

    problems = arith.generate_problems(cfg.tiny.corpus_problems, seed=cfg.base.seed, prefix="corpus",
                                       max_steps=cfg.arith.max_steps, max_operand=cfg.arith.max_operand)
    corpus = [math_prompt(r["question"], cot=True) + " " + r["solution"] for r in problems]
    open_domain = cfg.resolve(cfg.sft.open_domain_path) if cfg.sft.open_domain_path else None
    if open_domain and open_domain.exists():
        from rleif_kit.sft_data import load_instructions

        corpus.extend(math_prompt(r["instruction"]) + " " + r["response"]
                      for r in load_instructions(open_domain, "[sft] open_domain_path"))
    return corpus


def ensure_base_model(cfg: RunConfig) -> str:
    """Resolve ``[base].model_name``, building the offline tiny Llama first when the preset says so and no
    model is there yet. A model already at that path (a loop iteration's PPO policy, say) is never replaced."""
    from rleif_kit import tiny

    target = tiny_build_target(cfg)
    if target is not None and not (target / "config.json").exists():
        shape = tiny.TinyShape(vocab_size=cfg.tiny.vocab_size, hidden_size=cfg.tiny.hidden_size,
                               layers=cfg.tiny.layers, heads=cfg.tiny.heads,
                               intermediate_size=cfg.tiny.intermediate_size)
        tiny.build_tiny_model(target, tiny_corpus(cfg), shape, seed=cfg.base.seed)
    return resolve_model_name(cfg.base.model_name, cfg)


def use_bf16(requested: bool) -> bool:
    """bf16 only where a GPU supports it; otherwise fp32 with one warning line."""
    import torch

    if not requested:
        return False
    if torch.cuda.is_available() and torch.cuda.is_bf16_supported():
        return True
    print("warning: bf16 requested but this machine has no bf16-capable GPU: training in fp32", file=sys.stderr)
    return False


def load_tokenizer(path: str):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(path)
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token  # Llama-2 has no pad token; EOS is the usual stand-in
    return tok


def nf4_config(compute_dtype: Any) -> Any:
    """The QLoRA quantisation every 4-bit load in the kit uses: NF4 with double quantisation."""
    from transformers import BitsAndBytesConfig

    return BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_use_double_quant=True,
                              bnb_4bit_compute_dtype=compute_dtype)


def load_for_training(path: str, sft: SFTConfig, bf16: bool) -> Any:
    """The model ready for training: 4-bit + LoRA (qlora), LoRA, or all weights trainable (full)."""
    import torch
    from transformers import AutoModelForCausalLM

    dtype = torch.bfloat16 if bf16 else torch.float32
    kwargs: dict[str, Any] = {"dtype": dtype}
    if sft.finetune == "qlora":
        kwargs["quantization_config"] = nf4_config(dtype)
    model = AutoModelForCausalLM.from_pretrained(path, **kwargs)
    if sft.finetune == "full":
        return model
    from peft import LoraConfig, get_peft_model, prepare_model_for_kbit_training

    if sft.finetune == "qlora":
        model = prepare_model_for_kbit_training(model, use_gradient_checkpointing=sft.gradient_checkpointing)
    lora = LoraConfig(r=sft.lora_r, lora_alpha=sft.lora_alpha, lora_dropout=sft.lora_dropout,
                      target_modules=list(sft.lora_targets), task_type="CAUSAL_LM", bias="none")
    return get_peft_model(model, lora)


def trainable_parameters(model) -> dict[str, Any]:
    """Name → detached copy of every trainable parameter (tests compare before and after)."""
    return {n: p.detach().clone() for n, p in model.named_parameters() if p.requires_grad}


def report_to(requested: list[str]) -> list[str]:
    """`report_to` for a transformers Trainer: the requested integrations, TensorBoard left out with a note when it
    is not installed; ["none"] when nothing is left."""
    import importlib.util

    out = []
    for name in requested:
        if name == "tensorboard" and importlib.util.find_spec("tensorboard") is None:
            print("note: report_to tensorboard skipped: tensorboard is not installed")
            continue
        out.append(name)
    return out or ["none"]
