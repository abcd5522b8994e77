"""``trainer_args``: a TOML table in ``[sft]``, ``[reward_model]`` and ``[ppo]`` passed through to the TRL config the
stage builds, for the trainer settings the kit has no key of its own for (``optim``, ``gradient_checkpointing_kwargs``,
``dataloader_num_workers``, ``packing``, ``torch_compile``, ...).

Which config each table reaches:

- ``[sft] trainer_args``: ``trl.SFTConfig`` (``sft/stage.py``)
- ``[reward_model] trainer_args``: ``trl.RewardConfig`` for the IRM and ``transformers.TrainingArguments`` for the
  PRM (``rewards/rm_training.py``); a key only RewardConfig has (``center_rewards_coefficient``) reaches the IRM only
- ``[ppo] trainer_args``: ``trl.GRPOConfig``, with ``algorithm = "grpo"`` only (``ppo/grpo.py``); the kit's own PPO
  loop has no TRL config to pass them to

Each key is checked when the config loads, against that class's dataclass fields (a misspelt one gets a "did you
mean"), and a key the kit sets itself is refused with the kit's key to set instead (``learning_rate``: ``[sft]
lr``) or why the kit owns it (``output_dir``): one value, one place. The values the kit chooses without a key of its
own are only defaults a table may change: ``[sft]`` packing (false), dataloader_num_workers (0), save_total_limit
(2); ``[reward_model]`` logging_steps (about 10 points on the curve), disable_tqdm, warmup_steps (the PRM's 0.05);
``[ppo]`` lr_scheduler_type ("constant"), warmup_steps (0), vllm_mode ("colocate"), disable_tqdm. The values
themselves are checked by TRL when the stage builds its config. The TRL classes are imported only for a table that
is not empty.
"""

from __future__ import annotations

import dataclasses
import difflib
import importlib
from typing import Any

CHECKPOINTS = "the stage's checkpoints folder under [base] output_dir"
HARDWARE = "from the hardware: a GPU when there is one"
LOGGING = "[base] report_to"
RUN_NAME = "the tracker run's name, <run>-<model> (tiny-cpu-sft): set [base] run_name"

# the TRL config each section's table reaches: (module, class)
TARGETS = {"sft": ("trl", "SFTConfig"), "reward_model": ("trl", "RewardConfig"), "ppo": ("trl", "GRPOConfig")}

# keys the kit sets itself -> the kit's key to set instead ("[section] key"), or why the kit owns it
KIT_SET: dict[str, dict[str, str]] = {
    "sft": {
        "output_dir": CHECKPOINTS, "seed": "[base] seed", "data_seed": "[base] seed",
        "max_length": "[sft] max_seq_len", "num_train_epochs": "[sft] epochs", "max_steps": "[sft] max_steps",
        "learning_rate": "[sft] lr", "per_device_train_batch_size": "[sft] batch_size",
        "gradient_accumulation_steps": "[sft] grad_accum", "warmup_steps": "[sft] warmup_steps (or warmup_ratio)",
        "warmup_ratio": "[sft] warmup_ratio", "lr_scheduler_type": "[sft] lr_scheduler",
        "weight_decay": "[sft] weight_decay", "activation_checkpointing": "[sft] gradient_checkpointing",
        "gradient_checkpointing": "[sft] gradient_checkpointing", "logging_steps": "[sft] logging_steps",
        "save_steps": "[sft] save_steps", "save_strategy": "'steps': the checkpoints a rerun resumes from",
        "bf16": "[base] bf16", "fp16": "[base] fp16", "use_cpu": HARDWARE,
        "report_to": "[sft] report_to (or [base] report_to)",
        "completion_only_loss": "SFT learns the responses only, as the recipe does (sft/tokenize.py)",
        "train_sampling_strategy": "[sft] group_by_length / balance_batches",
        "group_by_length": "[sft] group_by_length", "run_name": RUN_NAME,
    },
    "reward_model": {
        "output_dir": CHECKPOINTS, "seed": "[base] seed", "learning_rate": "[reward_model] rm_lr",
        "num_train_epochs": "[reward_model] rm_epochs", "per_device_train_batch_size": "[reward_model] rm_batch_size",
        "max_length": "[reward_model] rm_max_len", "bf16": "[base] bf16", "use_cpu": HARDWARE, "report_to": LOGGING,
        "save_strategy": "'no': a reward model is trained again from its start, never resumed",
        "remove_unused_columns": "the PRM's collator reads its label column", "run_name": RUN_NAME,
    },
    "ppo": {
        "output_dir": CHECKPOINTS, "seed": "[base] seed", "learning_rate": "[ppo] lr",
        "max_steps": "[ppo] total_steps", "per_device_train_batch_size": "[ppo] mini_batch",
        "steps_per_generation": "[ppo] rollout_batch (divided by mini_batch)",
        "num_generations": "[ppo] num_generations", "num_iterations": "[ppo] ppo_epochs",
        "max_completion_length": "[ppo] max_new_tokens", "temperature": "[ppo] temperature",
        "beta": "[ppo] kl_coef", "epsilon": "[ppo] clip_range", "max_grad_norm": "[ppo] max_grad_norm",
        "logging_steps": "one log row per PPO step, which 05's log and curves read",
        "save_strategy": "'no': GRPO saves its policy at the end", "bf16": "[base] bf16", "use_cpu": HARDWARE,
        "report_to": LOGGING,
        "use_vllm": "[ppo] generation_backend", "run_name": RUN_NAME,
    },
}
def config_class(section: str) -> Any:
    """The TRL config class ``[section] trainer_args`` reaches (imported here: heavy)."""
    module, name = TARGETS[section]
    return getattr(importlib.import_module(module), name)


def field_names(cls: Any) -> list[str]:
    return [f.name for f in dataclasses.fields(cls) if f.init]


def problems(section: str, table: dict[str, Any], algorithm: str = "grpo") -> list[str]:
    """One line per key of ``[section] trainer_args`` that cannot pass (each starting ``trainer_args.<key>``, the
    caller adds where it was set); [] when every key is a field of the TRL config and none is the kit's.
    ``algorithm``: ``[ppo] algorithm``, whose table reaches TRL only under GRPO."""
    if not table:
        return []
    if section == "ppo" and algorithm != "grpo":
        return [f"trainer_args: reaches TRL's GRPOConfig, used with algorithm = 'grpo' only; algorithm = "
                f"{algorithm!r} is the kit's own PPO loop, set by the other [ppo] keys"]
    cls = config_class(section)
    known = field_names(cls)
    out = []
    for key in table:
        kit = KIT_SET[section].get(key)
        if kit and kit.startswith("["):
            out.append(f"trainer_args.{key}: the kit sets it from {kit}: set that instead")
        elif kit:
            out.append(f"trainer_args.{key}: the kit sets it ({kit})")
        elif key not in known:
            close = difflib.get_close_matches(key, known, n=1)
            hint = f" (did you mean '{close[0]}'?)" if close else ""
            out.append(f"trainer_args.{key}: not a field of {TARGETS[section][0]}.{cls.__name__}{hint}")
    return out


def merged(kit: dict[str, Any], table: dict[str, Any], cls: Any = None) -> dict[str, Any]:
    """The kit's arguments with the table's on top (checked at load: only keys the kit leaves open or chooses as a
    default); with ``cls``, only the table's keys that are fields of ``cls`` (the PRM's TrainingArguments takes the
    keys of ``[reward_model] trainer_args`` that are not RewardConfig's own)."""
    names = set(field_names(cls)) if cls is not None else None
    return {**kit, **{k: v for k, v in table.items() if names is None or k in names}}
