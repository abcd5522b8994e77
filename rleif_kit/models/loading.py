"""Load a base model and tokenizer, and wrap it for QLoRA, LoRA or full fine-tuning.

Model names resolve as a local directory first, then as a hub id already in the Hugging Face
cache, then (only when the hub is reachable and not switched off with HF_HUB_OFFLINE) as a hub id.
A name that resolves nowhere is one clear error before any work starts.

A hub id is loaded from the cache alone (``local_files_only``) when one request without retries finds the hub out
of reach: offline, the library would otherwise retry each file for 23 s (1 + 2 + 4 + 8 + 8 s of "Retrying in ..."
lines, twice for a tokenizer) before its own error. What the cache lacks then is one line (``ModelNotFound``).
"""

from __future__ import annotations

import functools
import json
import os
import re
import sys
from pathlib import Path
from typing import Any

from rleif_kit.core import distributed as dist
from rleif_kit.core.config import RunConfig, SFTConfig
from rleif_kit.core.disk import writing
from rleif_kit.core.paths import RunPaths, staged_dir
from rleif_kit.core.stages import SFT
from rleif_kit.models.refs import resolve_ref

SFT_INFO = "sft_info.json"  # what 03_sft saved: full weights, or an adapter and the base it goes on


class ModelNotFound(ValueError):
    pass


def _in_hf_cache(repo_id: str) -> bool:
    try:
        from huggingface_hub import try_to_load_from_cache  # heavy: loaded on first use
    except ImportError:  # pragma: no cover - transformers always brings it
        return False
    found = try_to_load_from_cache(repo_id, "config.json")
    return isinstance(found, str)


def _offline_env() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "0") not in ("0", "", "false", "False")


def _looks_like_id(name: str) -> bool:
    return bool(re.fullmatch(r"[\w.-]+(/[\w.-]+)?", name)) and not name.startswith((".", "/", "~"))


@functools.lru_cache(maxsize=None)  # one request per id and process: a dead network costs its timeout once
def _hub_answer(repo_id: str) -> bool | None:
    """Whether the hub has ``repo_id``'s config.json, or None when the hub did not answer (no network, a proxy
    that refuses): one HEAD request, which huggingface_hub sends without retries."""
    try:
        from huggingface_hub import file_exists  # heavy: loaded on first use
        from huggingface_hub.errors import HfHubHTTPError
    except ImportError:  # pragma: no cover - transformers always brings it
        return None
    try:
        return bool(file_exists(repo_id, "config.json"))
    except HfHubHTTPError:  # the hub answered: gated, or a token it refuses; not loadable from here
        return False
    except Exception:  # transport errors (connection refused, DNS, timeout), offline mode: no answer
        return None


def _on_hub(repo_id: str) -> bool:
    return not _offline_env() and _hub_answer(repo_id) is True


def hub_out_of_reach(name: str) -> str | None:
    """Why a hub id must come from the cache alone ("HF_HUB_OFFLINE is set", "the hub does not answer"), or None
    for a local directory, a name that is no hub id, or a hub that answers."""
    if Path(name).expanduser().is_dir() or not _looks_like_id(name):
        return None
    if _offline_env():
        return "HF_HUB_OFFLINE is set"
    return "the hub does not answer (no network?)" if _hub_answer(name) is None else None


def from_pretrained(load: Any, name: str | Path, **kwargs: Any) -> Any:
    """``load(name, **kwargs)`` (a ``from_pretrained``), from the cache alone while the hub is out of reach; what
    the cache lacks then is a ModelNotFound line, not the library's minute of retries."""
    why = hub_out_of_reach(str(name))
    if why is None:
        return load(name, **kwargs)
    kwargs["local_files_only"] = True
    if _is_auto_model(load):  # its look for an adapter config is not told local_files_only: 23 s of retries
        kwargs["adapter_kwargs"] = {**(kwargs.get("adapter_kwargs") or {}), "local_files_only": True}
    try:
        return load(name, **kwargs)
    except OSError:  # transformers: not in the cached files
        raise ModelNotFound(f"{name!r} is not a local directory, {why}, and the Hugging Face cache has no complete "
                            f"copy of it. {_where_to_get(str(name), 'the model name')}") from None


def _is_auto_model(load: Any) -> bool:
    """Whether ``load`` is an ``AutoModel*.from_pretrained`` (a tokenizer's takes no ``adapter_kwargs``: it would
    store them in its config)."""
    try:
        from transformers.models.auto.auto_factory import _BaseAutoModelClass  # heavy: loaded on first use
    except ImportError:  # pragma: no cover - a transformers that moved it: the retries come back, nothing breaks
        return False
    owner = getattr(load, "__self__", None)
    return isinstance(owner, type) and issubclass(owner, _BaseAutoModelClass)


def load_causal_lm(name: str | Path, **kwargs: Any) -> Any:
    """``AutoModelForCausalLM.from_pretrained`` through :func:`from_pretrained`: a hub id out of reach that the
    cache lacks is one line at once."""
    from transformers import AutoModelForCausalLM  # heavy: loaded on first use

    return from_pretrained(AutoModelForCausalLM.from_pretrained, name, **kwargs)


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
        f"'{name}' in the Hugging Face cache. {_where_to_get(name, key)}"
    )


# Names the recipe's papers use that are not a download as written (WizardMath's Table: the IRM starts from
# Wizard-E, an instruction model WizardLM never published).
_KNOWN = {
    "wizard-e-7b": "Wizard-E-7B, the paper's IRM base, was never published: use an open instruction-tuned 7B of "
                   "your choice (e.g. a Llama-2-7b chat model) as a local path or hub id, or \"sft\" for this "
                   "run's own SFT model",
    "llama-2-7b-hf": "Llama-2-7b-hf is gated on the hub: accept its license at huggingface.co/meta-llama/"
                     "Llama-2-7b-hf, then `hf download meta-llama/Llama-2-7b-hf --local-dir ./models/Llama-2-7b-hf`",
}


def _where_to_get(name: str, key: str) -> str:
    known = _KNOWN.get(Path(name).name.lower())
    if known:
        return f"{known}; then set {key} to it."
    return (f"Download the weights (`hf download <org>/<model> --local-dir ./models/<model>`) where the hub is "
            f"reachable and set {key} to that path.")


def tiny_build_target(cfg: RunConfig) -> Path | None:
    """Where the tiny model is built, when the preset asks for one (``[tiny].build``)."""
    return cfg.resolve(cfg.base.model_name) if cfg.tiny.build else None


def sft_info(path: str | Path) -> dict:
    """``sft_info.json`` of a model directory (an SFT adapter names its base there); full weights without one.
    ``base_model`` comes back loadable: stored relative to the folder (``models.refs``), it is resolved here."""
    info_file = Path(path) / SFT_INFO
    info = json.loads(info_file.read_text()) if info_file.exists() else {"finetune": "full"}
    if "base_model" in info:
        info["base_model"] = resolve_ref(info["base_model"], Path(path))
    return info


def load_merged(path: str | Path, inference: bool = False) -> tuple[Any, Any]:
    """(model, tokenizer) of a model directory: full weights, or the base named in its ``sft_info.json`` with
    this adapter merged in. ``inference``: on the best device (bf16 on a GPU that has it), in eval mode;
    otherwise fp32 on the CPU, as a base for merging or further training."""
    import torch  # heavy: kept off the CLI's start-up path
    from peft import PeftModel  # heavy: loaded on first use
    from transformers import AutoModelForCausalLM  # heavy: loaded on first use

    path = Path(path)
    if not (path / "config.json").exists() and not (path / SFT_INFO).exists():
        raise FileNotFoundError(f"{path} is not a saved model (no config.json or {SFT_INFO})")
    device = "cuda" if inference and torch.cuda.is_available() else "cpu"
    dtype = torch.bfloat16 if device == "cuda" and torch.cuda.is_bf16_supported() else torch.float32
    info = sft_info(path)
    if info.get("finetune") == "full":
        model = AutoModelForCausalLM.from_pretrained(path, dtype=dtype)
    else:
        base = from_pretrained(AutoModelForCausalLM.from_pretrained, info["base_model"], dtype=dtype)
        model = PeftModel.from_pretrained(base, path).merge_and_unload()
    if inference:
        model = model.to(device).eval()
    return model, load_tokenizer(str(path))


def use_bf16(requested: bool) -> bool:
    """bf16 only where a GPU supports it; otherwise fp32 with one warning line."""
    import torch  # heavy: loaded on first use

    if not requested:
        return False
    if torch.cuda.is_available() and torch.cuda.is_bf16_supported():
        return True
    print("warning: bf16 requested but this machine has no bf16-capable GPU: training in fp32", file=sys.stderr)
    return False


def use_fp16(requested: bool) -> bool:
    """fp16 (mixed precision with loss scaling) only on a GPU; otherwise fp32 with one warning line."""
    import torch  # heavy: loaded on first use

    if not requested:
        return False
    if torch.cuda.is_available():
        return True
    print("warning: fp16 requested but this machine has no GPU: training in fp32", file=sys.stderr)
    return False


def load_tokenizer(path: str):
    from transformers import AutoTokenizer  # heavy: loaded on first use

    tok = from_pretrained(AutoTokenizer.from_pretrained, path)
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token  # Llama-2 has no pad token; EOS is the usual stand-in
    return tok


def nf4_config(compute_dtype: Any) -> Any:
    """The QLoRA quantisation every 4-bit load in the kit uses: NF4 with double quantisation."""
    from transformers import BitsAndBytesConfig  # heavy: loaded on first use

    return BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_use_double_quant=True,
                              bnb_4bit_compute_dtype=compute_dtype)


def load_for_training(path: str, sft: SFTConfig, bf16: bool) -> Any:
    """The model ready for training: 4-bit + LoRA (qlora), LoRA, or all weights trainable (full)."""
    import torch  # heavy: loaded on first use
    from transformers import AutoModelForCausalLM  # heavy: loaded on first use

    dtype = torch.bfloat16 if bf16 else torch.float32
    kwargs: dict[str, Any] = {"dtype": dtype}
    if sft.finetune == "qlora":
        kwargs["quantization_config"] = nf4_config(dtype)
    model = from_pretrained(AutoModelForCausalLM.from_pretrained, path, **kwargs)
    if sft.finetune == "full":
        return model
    from peft import LoraConfig, get_peft_model, prepare_model_for_kbit_training  # heavy: loaded on first use

    if sft.finetune == "qlora":
        model = prepare_model_for_kbit_training(model, use_gradient_checkpointing=sft.gradient_checkpointing)
    lora = LoraConfig(r=sft.lora_r, lora_alpha=sft.lora_alpha, lora_dropout=sft.lora_dropout,
                      target_modules=list(sft.lora_targets), task_type="CAUSAL_LM", bias="none")
    return get_peft_model(model, lora)


def trainable_parameters(model) -> dict[str, Any]:
    """Name → detached copy of every trainable parameter (tests compare before and after)."""
    return {n: p.detach().clone() for n, p in model.named_parameters() if p.requires_grad}


def resolve_rm_base(cfg: RunConfig, paths: RunPaths, name: str, key: str) -> str:
    """``"sft"`` → the SFT model as full weights (adapter merged once); else a path or hub id."""
    if name != "sft":
        return resolve_model_name(name, cfg, key=key)
    if not (paths.sft_model / SFT_INFO).exists():
        raise FileNotFoundError(f"{key} = 'sft' needs the SFT model at {paths.sft_model}: run {SFT} first")
    if sft_info(paths.sft_model)["finetune"] == "full":
        return str(paths.sft_model)
    merged = paths.sft_merged
    with dist.main_first():  # under accelerate launch rank 0 merges, the others read its copy
        if not (merged / "config.json").exists():
            model, tokenizer = load_merged(paths.sft_model)
            # written aside and renamed when whole: a merge cut short (a full disk) is never taken for the model
            with writing(merged), staged_dir(merged) as building:
                model.save_pretrained(building)
                tokenizer.save_pretrained(building)
    return str(merged)
