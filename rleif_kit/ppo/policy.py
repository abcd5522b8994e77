"""The PPO policy: the SFT model with a LoRA adapter and a value head; the reference is the same model
with the adapter switched off, so no second copy sits in memory.

Why the reference is the SFT policy and never the pre-SFT base: when SFT itself produced an adapter,
that adapter is merged into the weights first (``models.loading.resolve_rm_base("sft")``, re-quantised
to 4-bit for QLoRA runs), and only then is the PPO adapter added; disabling it gives back the SFT model.
"""

from __future__ import annotations

import contextlib
import json
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rleif_kit.core import distributed as dist
from rleif_kit.core.config import RunConfig
from rleif_kit.core.disk import size_of, writing
from rleif_kit.core.paths import RunPaths, staged_dir
from rleif_kit.models.loading import load_causal_lm, load_tokenizer, nf4_config, resolve_rm_base, use_bf16

VALUE_HEAD = "value_head.safetensors"  # beside the exported weights: safetensors too, no pickle in a Hub folder
PICKLED_VALUE_HEAD = "value_head.pt"  # what exports before it wrote (torch.save): removed when 05 exports again


@dataclass
class Policy:
    model: Any  # PeftModel: the SFT weights (frozen) + the trainable PPO adapter
    value_head: Any  # torch.nn.Linear(hidden, 1) on the last hidden state (None for GRPO)
    tokenizer: Any
    wrapped: Any = None  # PolicyModule as accelerate prepared it (DDP on several ranks); set by train_ppo

    def parameters(self) -> list:
        return [p for p in self.model.parameters() if p.requires_grad] + list(self.value_head.parameters())

    def named_trainable(self) -> dict[str, Any]:
        named = {f"policy.{n}": p for n, p in self.model.named_parameters() if p.requires_grad}
        named.update({f"value_head.{n}": p for n, p in self.value_head.named_parameters()})
        return named


def load_policy(cfg: RunConfig, paths: RunPaths) -> Policy:
    """The SFT model (adapter merged; 4-bit when SFT was QLoRA) with a fresh, seeded PPO adapter."""
    import torch  # heavy: loaded on first use
    from peft import LoraConfig, get_peft_model  # heavy: loaded on first use

    sft_path = resolve_rm_base(cfg, paths, "sft", "[ppo] policy")
    dtype = torch.bfloat16 if use_bf16(cfg.base.bf16) else torch.float32
    kwargs: dict[str, Any] = {"dtype": dtype}
    if cfg.sft.finetune == "qlora":
        kwargs["quantization_config"] = nf4_config(dtype)
    base = load_causal_lm(sft_path, **kwargs)  # a hub id out of reach: one line, not the hub's retries
    for p in base.parameters():
        p.requires_grad_(False)
    torch.manual_seed(cfg.base.seed)  # the adapter's A matrices and the value head start the same on every run
    lora = LoraConfig(r=cfg.ppo.lora_r, lora_alpha=cfg.ppo.lora_alpha, lora_dropout=0.0,
                      target_modules=list(cfg.sft.lora_targets), task_type="CAUSAL_LM", bias="none")
    if cfg.sft.gradient_checkpointing:  # recompute activations in the update pass (what lets 7B PPO fit 24 GB)
        base.activation_checkpointing_enable(activation_checkpointing_kwargs={"use_reentrant": False})
        base.enable_input_require_grads()
    model = get_peft_model(base, lora)
    disable_dropout(model)
    value_head = torch.nn.Linear(base.config.hidden_size, 1)
    torch.nn.init.normal_(value_head.weight, std=1e-3)
    torch.nn.init.zeros_(value_head.bias)
    value_head.to(device=next(base.parameters()).device, dtype=torch.float32)
    tokenizer = load_tokenizer(sft_path)
    return Policy(model, value_head, tokenizer)


def forward(policy: Policy, input_ids, attention_mask, with_values: bool = True, reference: bool = False):
    """(logits, values) over the whole sequence; ``reference`` switches the adapter off (the SFT policy).

    Position ids come from the attention mask, so a left-padded prompt sees the same positions here
    as during generation. A forward that will be backpropagated goes through ``policy.wrapped`` when
    set, so that DDP all-reduces the gradients; the rest (no gradient, reference) runs on the plain model.
    """
    import torch  # heavy: loaded on first use

    if policy.wrapped is not None and not reference and torch.is_grad_enabled():
        return policy.wrapped(input_ids, attention_mask, with_values)
    position_ids = (attention_mask.cumsum(dim=1) - 1).clamp(min=0)
    ctx = policy.model.disable_adapter() if reference else contextlib.nullcontext()
    with ctx:
        out = policy.model(input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids,
                           output_hidden_states=with_values)
    if not with_values:
        return out.logits, None
    hidden = out.hidden_states[-1].float()
    return out.logits, policy.value_head(hidden).squeeze(-1)


def disable_dropout(model: Any) -> None:
    """Dropout off everywhere (``nn.Dropout`` layers and the attention's own rate) while the model can stay in
    train mode, where activation checkpointing runs: the update's log-probs are then the rollout's until the
    weights move (the ratio is exactly 1 at the first minibatch), whatever dropout the checkpoint was trained with."""
    import torch  # heavy: loaded on first use

    for m in model.modules():
        if isinstance(m, torch.nn.Dropout):
            m.p = 0.0
        if isinstance(getattr(m, "attention_dropout", None), float):
            m.attention_dropout = 0.0


def policy_module(policy: Policy):
    """The adapter-carrying model and the value head as one ``torch.nn.Module``, for ``accelerator.prepare``:
    DDP wraps one module, and its forward is ``forward`` above."""
    import torch  # heavy: loaded on first use

    class PolicyModule(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.model, self.value_head = policy.model, policy.value_head

        def forward(self, input_ids, attention_mask, with_values: bool = True):
            return forward(Policy(self.model, self.value_head, None), input_ids, attention_mask, with_values)

    return PolicyModule()


def prepare(policy: Policy, optimizer: Any) -> Any:
    """``accelerator.prepare`` of the trainable parts and their optimizer; sets ``policy.wrapped`` and returns
    the prepared optimizer. On one process both come back as they were (on the accelerator's device)."""
    acc = dist.accelerator()
    if acc.distributed_type == "DEEPSPEED":
        raise ValueError("our PPO loop runs DDP (params/accelerate/ddp.yaml); DeepSpeed is for SFT and the reward "
                         "models")
    quantized = getattr(policy.model, "is_loaded_in_4bit", False)  # already on its GPU: accelerate must not move it
    policy.wrapped, optimizer = acc.prepare(policy_module(policy), optimizer, device_placement=[not quantized, None])
    return optimizer


# --------------------------------------------------------------------- checkpoints

def save_checkpoint(policy: Policy, optimizer: Any, directory: Path, state: dict) -> None:
    """Trainable weights, optimizer and loop state; written to a temp dir then renamed (crash-safe). A full disk:
    one line naming the checkpoint (and the size of the last one), the temp dir removed, the earlier ones kept."""
    import torch  # heavy: loaded on first use

    previous = last_checkpoint(directory.parent)
    with writing(directory, lambda: size_of(previous) if previous else None):
        try:
            with staged_dir(directory) as tmp:
                torch.save({n: p.detach().cpu() for n, p in policy.named_trainable().items()}, tmp / "trainable.pt")
                torch.save(optimizer.state_dict(), tmp / "optimizer.pt")
                (tmp / "state.json").write_text(json.dumps(state, indent=2) + "\n")
        except BaseException:
            shutil.rmtree(directory.with_name(directory.name + ".tmp"), ignore_errors=True)
            raise


def last_checkpoint(checkpoints: Path) -> Path | None:
    done = sorted(d for d in checkpoints.glob("step-*") if (d / "state.json").exists() and not d.name.endswith(".tmp"))
    return done[-1] if done else None


def load_checkpoint(policy: Policy, optimizer: Any, directory: Path) -> dict:
    """Trainable weights (and the optimizer's state, unless ``optimizer`` is None) and the loop state."""
    import torch  # heavy: loaded on first use

    saved = torch.load(directory / "trainable.pt")
    params = policy.named_trainable()
    missing = set(params) ^ set(saved)
    if missing:
        raise ValueError(f"{directory} does not match this policy (different LoRA shape?): {sorted(missing)[:3]}")
    with torch.no_grad():
        for name, p in params.items():
            p.copy_(saved[name])
    if optimizer is not None:
        optimizer.load_state_dict(torch.load(directory / "optimizer.pt"))
    return json.loads((directory / "state.json").read_text())


def save_value_head(value_head: Any, path: Path) -> None:
    """The value head's ``weight`` and ``bias`` as safetensors (the format ``save_pretrained`` gives the model)."""
    from safetensors.torch import save_file  # heavy: loaded on first use

    save_file({k: v.detach().float().cpu().contiguous() for k, v in value_head.state_dict().items()}, str(path),
              metadata={"format": "pt", "module": "torch.nn.Linear(hidden_size, 1) on the last hidden state"})


def load_value_head(path: Path) -> Any:
    """The value head an export saved (``VALUE_HEAD``), as the ``torch.nn.Linear`` PPO trained, in float32."""
    import torch  # heavy: loaded on first use
    from safetensors.torch import load_file  # heavy: loaded on first use

    state = load_file(str(path))
    head = torch.nn.Linear(state["weight"].shape[1], state["weight"].shape[0])
    head.load_state_dict(state)
    return head


def export_policy(policy: Policy, out_dir: Path, card: str) -> None:
    """Standalone transformers weights (PPO adapter merged into the SFT weights), tokenizer, value head, card: a
    folder ``from_pretrained`` and the Hub take as it is, every tensor in safetensors."""
    with writing(out_dir):  # a full disk: one line; the stage is not marked done, a rerun exports again
        out_dir.mkdir(parents=True, exist_ok=True)
        merged = policy.model.merge_and_unload()
        merged.save_pretrained(out_dir)
        policy.tokenizer.save_pretrained(out_dir)
        (out_dir / PICKLED_VALUE_HEAD).unlink(missing_ok=True)  # an earlier export's pickle
        if policy.value_head is not None:  # GRPO trains without one
            save_value_head(policy.value_head, out_dir / VALUE_HEAD)
        (out_dir / "README.md").write_text(card)
