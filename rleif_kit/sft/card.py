"""The SFT model's card (``README.md`` in the model folder, ``models/cards.py`` renders it): what was trained from
what, with which settings and prompt, and a usage snippet that loads the folder — full weights, or the adapter
on the base that ``sft_info.json`` names relative to the folder."""

from __future__ import annotations

import os
from typing import Any, Sequence

from rleif_kit.core.config import RunConfig
from rleif_kit.core.paths import RunPaths
from rleif_kit.core.plots import plot_accuracy_bars, plot_loss_curve
from rleif_kit.models.cards import TAGS, ModelCard, base_license, generation_usage, hub_id, save_figures, write_card
from rleif_kit.models.loading import SFT_INFO
from rleif_kit.worlds import world_for

EXAMPLE = "Tom has 3 pens. He buys 2 more pens. How many pens does he have now?"  # when the data has none


def hub_datasets(cfg: RunConfig) -> list[str]:
    """The hub datasets the SFT data was built from (``gsm8k_train`` / ``math_train`` = "hub"), by repo id."""
    s = cfg.sft
    return [hub.split(":")[0] for train, hub in ((s.gsm8k_train, s.gsm8k_hub), (s.math_train, s.math_hub))
            if train == "hub"]


def _training(cfg: RunConfig, base_ref: str, examples: int, steps: int) -> dict[str, Any]:
    s = cfg.sft
    rows: dict[str, Any] = {
        "fine-tuning": s.finetune, "base model": base_ref, "examples": examples, "optimizer steps": steps,
        "epochs": s.epochs if s.max_steps < 0 else f"max_steps {s.max_steps}", "learning rate": s.lr,
        "schedule": f"{s.lr_scheduler}, warm-up {f'{s.warmup_steps} steps' if s.warmup_steps else s.warmup_ratio}",
        "batch": f"{s.batch_size} per device x {s.grad_accum} accumulation"
                 + (", each step's examples split by length into its micro-batches" if s.balance_batches else ""),
        "max sequence length": s.max_seq_len,
        "weight decay": s.weight_decay, "loss": "on the response only (TRL SFTTrainer, completion_only_loss)",
        "seed": cfg.base.seed}
    if s.finetune != "full":
        rows.update({"LoRA r / alpha / dropout": f"{s.lora_r} / {s.lora_alpha} / {s.lora_dropout}",
                     "LoRA targets": list(s.lora_targets)})
    if s.finetune == "qlora":
        rows["quantisation"] = "4-bit NF4, double quantisation (bitsandbytes)"
    return rows


def _prompt(cfg: RunConfig) -> str:
    template = world_for(cfg).train_template(cot=cfg.eval.cot_prompt)
    opener = " with the chain-of-thought opener" if cfg.eval.cot_prompt else ""
    return (f"Every example is the WizardMath / Alpaca prompt{opener} (`{{instruction}}` filled in), then one space "
            "and the step-by-step response (`Step 1: ... The answer is: X`), then EOS. The evaluation prompts the "
            f"same way.\n\n```text\n{template}\n```")


def build_card(cfg: RunConfig, paths: RunPaths, result: Any, base_ref: str, base_location: str,
               examples: Sequence[dict]) -> ModelCard:
    """The card of ``result`` (an ``SFTResult``); draws its figures into the model folder."""
    folder = paths.sft_model
    figures, logged = {}, any("loss" in r for r in result.log)
    if logged:
        figures["training_loss"] = plot_loss_curve(result.log)
    if result.accuracy_before is not None and result.accuracy_after is not None:
        figures["heldout_accuracy"] = plot_accuracy_bars(
            {"untrained": result.accuracy_before, "after SFT": result.accuracy_after},
            title="Held-out arithmetic accuracy (greedy)")
    adapter = cfg.sft.finetune != "full"
    instruction = next((e["instruction"] for e in examples if e.get("source") != "open_domain" and "instruction" in e),
                       EXAMPLE)
    template = world_for(cfg).train_template(cot=cfg.eval.cot_prompt)
    data = os.path.relpath(paths.sft_data, folder)
    by_source: dict[str, int] = {}
    for e in examples:
        by_source[e.get("source", "?")] = by_source.get(e.get("source", "?"), 0) + 1
    sources = ", ".join(f"{n} {k}" for k, n in by_source.items())
    root = hub_id(cfg.base.model_name)
    return ModelCard(
        title="SFT model (RLEIF stage 03)",
        summary=(f"The base model fine-tuned ({cfg.sft.finetune}) on step-by-step solutions, the first stage of "
                 "RLEIF (Reinforcement Learning from Evol-Instruct Feedback, the WizardMath recipe). Its step format "
                 "is what the process reward model scores and what PPO starts from."
                 + (f" This folder holds a LoRA adapter; `sft_info.json` names its base (`{base_ref}`)." if adapter
                    else "")),
        metadata={"base_model": root, "base_model_relation": ("adapter" if adapter else "finetune") if root else None,
                  "datasets": hub_datasets(cfg), "tags": [*TAGS, "sft", "trl", *(["lora"] if adapter else [])],
                  "library_name": "peft" if adapter else "transformers", "pipeline_tag": "text-generation",
                  "license": base_license(base_location)},
        usage=generation_usage(template, instruction, cfg.eval.max_new_tokens, base_ref if adapter else None),
        prompt=_prompt(cfg),
        training=_training(cfg, base_ref, result.examples, result.steps),
        results={"first logged loss": result.first_loss if logged else None,
                 "final logged loss": result.final_loss if logged else None,
                 "held-out accuracy before / after": None if result.accuracy_after is None
                 else f"{result.accuracy_before:.3f} / {result.accuracy_after:.3f}",
                 "runtime (s)": round(result.runtime_s)},
        data=(f"`{data}`: the {len(examples)} examples trained on ({sources}), one JSON object per line: `id`, "
              "`source`, `instruction`, `prompt` (the full prompt above) and `completion` (what the loss is on)."),
        figures=save_figures(folder, figures),
        files={SFT_INFO: "how the kit loads this folder: `finetune` (full, lora, qlora), `base_model` (the base an "
                         "adapter goes on: a path relative to this folder, or a hub id) and `steps`",
               "figures/": "the figures above"})


def write_sft_card(cfg: RunConfig, paths: RunPaths, result: Any, base_ref: str, base_location: str,
                   examples: Sequence[dict]) -> None:
    write_card(paths.sft_model, build_card(cfg, paths, result, base_ref, base_location, examples))
