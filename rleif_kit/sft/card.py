"""The SFT model's card (``README.md`` in the model folder, ``models/cards.py`` renders it): what was trained from
what, with which settings and prompt, and a usage snippet that loads the folder — full weights, or the adapter
on the base that ``sft_info.json`` names relative to the folder. Its words come from the run's world and reward
(``worlds/words.py``): the world's prompt and answer format, its held-out score, and as the snippet's example a
held-out item the trained model answered right."""

from __future__ import annotations

import os
from typing import Any, Sequence

from rleif_kit.core.config import RunConfig
from rleif_kit.core.jsonl import read_jsonl
from rleif_kit.core.paths import RunPaths
from rleif_kit.core.plots import plot_accuracy_bars, plot_loss_curve
from rleif_kit.models.cards import (
    ModelCard,
    base_license,
    generation_usage,
    hub_id,
    recipe_tags,
    save_figures,
    template_opener,
    write_card,
)
from rleif_kit.models.loading import SFT_INFO
from rleif_kit.worlds import world_for
from rleif_kit.worlds.data import heldout_problems
from rleif_kit.worlds.words import run_words

EXAMPLE = "Tom has 3 pens. He buys 2 more pens. How many pens does he have now?"  # no data and no held-out answer


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


def _prompt(cfg: RunConfig, world: Any) -> str:
    template = world.train_template(cot=cfg.eval.cot_prompt)
    space = "one space and " if world.completion("x").startswith(" ") else ""  # the trained completion's form
    note = f" Benchmarks of their own differ on purpose: {world.prompt_note}." if world.prompt_note else ""
    return (f"Every example is the {world.name} world's training prompt{template_opener(world, cfg.eval.cot_prompt)} "
            f"(`{{instruction}}` filled in), then {space}the response in the world's answer format "
            f"({world.format_name}), then EOS. The held-out evaluation prompts the same way.{note}\n\n"
            f"```text\n{template}\n```")


def card_example(cfg: RunConfig, paths: RunPaths, examples: Sequence[dict]) -> str:
    """The card's usage example: the first held-out item the trained model answered right (``03_sft/eval_after.jsonl``,
    judged by the world), so the snippet shows a response the world counts right; else the first instruction
    trained on; else a fixed one."""
    after = paths.sft_heldout("after")
    right = {r["id"] for r in read_jsonl(after) if r.get("correct") is True} if after.exists() else set()
    question = next((p["question"] for p in heldout_problems(cfg, paths) if p["id"] in right), None) if right else None
    return question or next((e["instruction"] for e in examples
                             if e.get("source") != "open_domain" and "instruction" in e), EXAMPLE)


def build_card(cfg: RunConfig, paths: RunPaths, result: Any, base_ref: str, base_location: str,
               examples: Sequence[dict]) -> ModelCard:
    """The card of ``result`` (an ``SFTResult``), in the run's world (its prompt, its answer format, its held-out
    score and a {task} the model answered right); draws its figures into the model folder."""
    folder, world = paths.sft_model, world_for(cfg)
    words = run_words(cfg, world)
    figures, logged = {}, any("loss" in r for r in result.log)
    if logged:
        figures["training_loss"] = plot_loss_curve(result.log)
    if result.accuracy_before is not None and result.accuracy_after is not None:
        figures["heldout_score"] = plot_accuracy_bars(
            {"untrained": result.accuracy_before, "after SFT": result.accuracy_after},
            title=f"Held-out {words.score}, {words.world} {words.tasks} (greedy)", score=words.score)
    adapter = cfg.sft.finetune != "full"
    instruction = card_example(cfg, paths, examples)
    template = world.train_template(cot=cfg.eval.cot_prompt)
    data = os.path.relpath(paths.sft_data, folder)
    by_source: dict[str, int] = {}
    for e in examples:
        by_source[e.get("source", "?")] = by_source.get(e.get("source", "?"), 0) + 1
    sources = ", ".join(f"{n} {k}" for k, n in by_source.items())
    reads = ", ".join(f"{t} from {words.sources[t]}" for t in words.terms)
    root = hub_id(cfg.base.model_name)
    return ModelCard(
        title="SFT model (RLEIF stage 03)",
        summary=(f"The base model fine-tuned ({cfg.sft.finetune}) on {words.tasks} of the {words.world} world answered "
                 f"in its format ({words.answer_format}), the first stage of RLEIF (Reinforcement Learning from "
                 f"Evol-Instruct Feedback, the {words.recipe} recipe). PPO starts from it, with the reward "
                 f"`{words.formula}`: {reads}."
                 + (f" This folder holds a LoRA adapter; `sft_info.json` names its base (`{base_ref}`)." if adapter
                    else "")),
        metadata={"base_model": root, "base_model_relation": ("adapter" if adapter else "finetune") if root else None,
                  "datasets": hub_datasets(cfg),
                  "tags": [*recipe_tags(world.recipe), "sft", "trl", *(["lora"] if adapter else [])],
                  "library_name": "peft" if adapter else "transformers", "pipeline_tag": "text-generation",
                  "license": base_license(base_location)},
        usage=generation_usage(template, instruction, cfg.eval.max_new_tokens, base_ref if adapter else None),
        prompt=_prompt(cfg, world),
        training=_training(cfg, base_ref, result.examples, result.steps),
        results={"first logged loss": result.first_loss if logged else None,
                 "final logged loss": result.final_loss if logged else None,
                 f"held-out {words.score} before / after": None if result.accuracy_after is None
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
