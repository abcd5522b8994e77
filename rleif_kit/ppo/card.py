"""The exported PPO policy's card (``models/cards.py`` renders it): the SFT model after RLEIF's PPO with the reward
``[ppo] reward_formula``, as standalone transformers weights (the PPO adapter merged), its settings, last-step
figures and a generation snippet."""

from __future__ import annotations

import os
from typing import Any

from rleif_kit.core.config import RunConfig
from rleif_kit.core.paths import RunPaths
from rleif_kit.core.plots import plot_ppo_curves
from rleif_kit.models.cards import TAGS, ModelCard, generation_usage, hub_id, save_figures
from rleif_kit.ppo.policy import VALUE_HEAD
from rleif_kit.worlds import world_for

PPO_INFO = "ppo_info.json"  # steps and stop reason of the exported policy (06 reads it as "this folder is done")
EXAMPLE = "Tom has 3 pens. He buys 2 more pens. How many pens does he have now?"  # when the pool is empty


def _training(cfg: RunConfig, steps: int) -> dict[str, Any]:
    ppo, rm = cfg.ppo, cfg.reward_model
    rows: dict[str, Any] = {
        "algorithm": "our PPO loop (rleif_kit/ppo/trainer.py)" if ppo.algorithm == "ppo" else "TRL GRPOTrainer",
        "steps": steps, "reward": f"`{ppo.reward_formula}`",
        "rA from": f"the PRM, {rm.prm_aggregate} over steps" if rm.answer_reward == "prm" else rm.answer_reward,
        "learning rate": ppo.lr, "KL coefficient (against the SFT policy)": ppo.kl_coef,
        "adaptive KL target": ppo.kl_target or "off", "clip range": ppo.clip_range,
        "rollout batch / mini-batch / epochs": f"{ppo.rollout_batch} / {ppo.mini_batch} / {ppo.ppo_epochs}",
        "GAE gamma / lambda": f"{ppo.gamma} / {ppo.lam}", "value-loss weight": ppo.vf_coef,
        "sampling temperature": ppo.temperature, "max new tokens": ppo.max_new_tokens,
        "PPO adapter r / alpha": f"{ppo.lora_r} / {ppo.lora_alpha}, merged into these weights", "seed": cfg.base.seed}
    if ppo.algorithm == "grpo":
        rows["responses per prompt"] = ppo.num_generations
    return rows


def build_card(cfg: RunConfig, paths: RunPaths, result: Any, instruction: str | None) -> ModelCard:
    """The card of ``result`` (a ``PPOResult``); draws its curves into the export folder."""
    folder, last = paths.ppo_model, (result.log[-1] if result.log else {})
    template = world_for(cfg).train_template(cot=cfg.eval.cot_prompt)
    sft = os.path.relpath(paths.sft_model, folder)
    figures = {"ppo_curves": plot_ppo_curves(result.log)} if result.log else {}
    root = hub_id(cfg.base.model_name)
    opener = " with the chain-of-thought opener" if cfg.eval.cot_prompt else ""
    log = os.path.relpath(paths.ppo_log, folder)
    answer = ("the process reward model" if cfg.reward_model.answer_reward == "prm"
              else f"the {cfg.reward_model.answer_reward} (`[reward_model] answer_reward`)")
    rollouts = (f" `{os.path.relpath(paths.ppo_rollouts, folder)}` holds sample rollouts with their rI, rA and r."
                if paths.ppo_rollouts.exists() else "")
    return ModelCard(
        title="PPO policy (RLEIF stage 05)",
        summary=("The SFT model after Reinforcement Learning from Evol-Instruct Feedback (the WizardMath recipe): "
                 f"{'PPO' if cfg.ppo.algorithm == 'ppo' else 'GRPO'} on evolved instructions with the reward "
                 f"`{cfg.ppo.reward_formula}`, rI from the instruction reward model and rA from {answer}, and a "
                 f"per-token KL penalty against the SFT policy (`{sft}`). Standalone weights: the PPO adapter is "
                 "merged in, so no base is needed."),
        metadata={"base_model": root, "base_model_relation": "finetune" if root else None,
                  "tags": [*TAGS, "ppo" if cfg.ppo.algorithm == "ppo" else "grpo", "rlhf"],
                  "library_name": "transformers", "pipeline_tag": "text-generation"},
        usage=generation_usage(template, instruction or EXAMPLE, cfg.eval.max_new_tokens),
        prompt=(f"The SFT model's prompt, which PPO's rollouts used too: the WizardMath / Alpaca template{opener}, "
                "the instruction as `{instruction}`; the model answers in steps ending `The answer is: X`.\n\n"
                f"```text\n{template}\n```"),
        training=_training(cfg, result.steps),
        results={"last step: mean reward": last.get("reward_mean"), "last step: KL": last.get("kl"),
                 "last step: mean rI / rA": None if not last else f"{last.get('rI_mean', float('nan')):.3f} / "
                                                                   f"{last.get('rA_mean', float('nan')):.3f}",
                 "runtime (s)": round(result.runtime_s)},
        data=(f"Rollouts on the run's evolved instructions; the per-step log (`{log}`) has reward, rI, rA, KL, "
              f"entropy and the losses of every step.{rollouts}"),
        figures=save_figures(folder, figures),
        files={PPO_INFO: "steps trained, why training stopped early (empty when it did not), the algorithm and the "
                         "SFT policy it started from (relative to this folder)",
               **({VALUE_HEAD: "PPO's value head (a Linear on the last hidden state), for inspection; not needed to "
                               "generate"} if cfg.ppo.algorithm == "ppo" else {}),
               "figures/": "the figures above"})
