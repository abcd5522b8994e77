"""A saved IRM or PRM back from disk for scoring (full weights, or base + adapter), and the head class each
kind of reward model has."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rleif_kit.core.stages import REWARD_MODELS
from rleif_kit.models.loading import from_pretrained, load_tokenizer, nf4_config, use_bf16
from rleif_kit.models.refs import resolve_ref
from rleif_kit.reward_scoring.prm import CALIBRATION

RM_INFO = "rm_info.json"  # what a saved reward model is: its head, fine-tuning and base


HEADS = {"sequence": ("AutoModelForSequenceClassification", 1, "SEQ_CLS"),  # IRM: one reward per text
         "token": ("AutoModelForTokenClassification", 2, "TOKEN_CLS"),  # PRM: correct / not, per token
         "likelihood": ("AutoModelForCausalLM", None, "CAUSAL_LM")}  # generative PRM (rewards/prm_likelihood.py)


# The PRM's two classes by name, in its config.json (not LABEL_0 / LABEL_1): scoring reads index 1 ("right"),
# P(step correct), and a reader of the saved model sees which index that is.
PRM_LABELS = {0: "wrong", 1: "right"}
LABELS = {"token": PRM_LABELS}


def head_labels(head: str) -> dict[str, dict]:
    """``id2label`` / ``label2id`` keyword arguments of a head's ``from_pretrained`` ({} for the IRM's one score)."""
    names = LABELS.get(head)
    return {} if names is None else {"id2label": dict(names), "label2id": {v: k for k, v in names.items()}}


def head_kwargs(head: str) -> dict[str, Any]:
    """A head's ``from_pretrained`` keyword arguments: its number of outputs (none for a language model, whose head is
    its vocabulary) and its label names (:func:`head_labels`)."""
    _, num_labels, _ = HEADS[head]
    return {**({} if num_labels is None else {"num_labels": num_labels}), **head_labels(head)}


def head_class(head: str):
    import transformers  # heavy: loaded on first use

    name, labels, task = HEADS[head]
    return getattr(transformers, name), labels, task


def load_rm(model_dir: str | Path, load_in_4bit: bool = False, bf16: bool = False) -> tuple[Any, Any]:
    """A saved IRM or PRM for scoring: full weights, or base + adapter (merged unless 4-bit); bf16 when
    asked and the GPU has it, else fp32."""
    import torch  # heavy: loaded on first use

    model_dir = Path(model_dir)
    info_path = model_dir / RM_INFO
    if not info_path.exists():
        raise FileNotFoundError(f"{model_dir} is not a saved reward model (no {RM_INFO}): run {REWARD_MODELS}")
    info = json.loads(info_path.read_text())
    base = resolve_ref(info.get("base_model", ""), model_dir)  # stored relative to the folder (models.refs)
    cls, _, _ = head_class(info["head"])
    tokenizer = load_tokenizer(str(model_dir))

    dtype = torch.bfloat16 if (load_in_4bit or use_bf16(bf16)) else torch.float32  # fp32 only on CPUs
    kwargs: dict[str, Any] = {"dtype": dtype, **head_kwargs(info["head"])}
    if load_in_4bit:
        kwargs["quantization_config"] = nf4_config(torch.bfloat16)
    if info["finetune"] == "full":
        model = cls.from_pretrained(model_dir, **kwargs)
    else:
        from peft import PeftModel  # heavy: loaded on first use

        # the base may be a hub id: out of reach and not cached, one line at once, not the library's retries
        model = PeftModel.from_pretrained(from_pretrained(cls.from_pretrained, base, **kwargs), model_dir)
        if not load_in_4bit:
            model = model.merge_and_unload()
    model.config.pad_token_id = tokenizer.pad_token_id
    if "calibration" in info:  # a generative PRM's (rewards/prm_likelihood.py): what scoring reads
        setattr(model.config, CALIBRATION, list(info["calibration"]))
    model.eval()
    for p in model.parameters():
        p.requires_grad_(False)
    return model, tokenizer
