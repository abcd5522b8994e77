"""``[ppo].algorithm = "grpo"``: TRL's GRPOTrainer with the RLEIF reward, as an alternative to our PPO loop.

TRL sums the outputs of several reward functions, so ``r = rI * rA`` (or any ``reward_formula``) must be
computed inside ONE callable: :class:`RLEIFReward` calls the same :class:`rleif_kit.rewards.reward.RewardScorer`
the PPO loop uses, the PRM's step scores aggregated into rA by ``[reward_model] prm_aggregate`` included. GRPO needs
no value head: each prompt's ``num_generations`` responses are their own baseline.

What TRL 1.16's GRPOTrainer takes (``trl/trainer/grpo_trainer.py``): a reward function returns one float (or None)
per completion (``_calculate_rewards`` refuses any other length), and ``_generate_and_score_completions`` turns
the weighted sum of the functions into ONE advantage per completion, normalised within its prompt's group
(``scale_rewards``), which ``_compute_loss`` spreads over every token. So the solution-level r is what GRPO can
take; ``[ppo] reward_granularity = "step"`` (each step's credit at its last token) is refused with GRPO at config
time (``core/config.py``): the step credits sum to the same r, and a (B, T) advantage is open only to a subclass
that replaces TRL's private ``_generate_and_score_completions``. Several reward functions with ``reward_weights``
would give the same r for a weighted-sum formula and no more (the terms are scored together; a product cannot be
split), so the kit keeps one callable and hands TRL each term's mean through the ``log_metric`` it passes (the
trackers get ``rA_mean`` as from our PPO loop) and each response's terms through ``log_extra`` (the completions
table of ``log_completions``). Mapping of our keys: one step = ``rollout_batch`` responses (``rollout_batch /
num_generations`` prompts), updated in ``mini_batch`` slices, ``ppo_epochs`` times (TRL's
``num_iterations``); ``kl_coef`` is TRL's ``beta``, ``clip_range`` its ``epsilon``.
"""

from __future__ import annotations

import statistics
import time
from typing import Any, Sequence

from rleif_kit.core import trainer_args
from rleif_kit.core.config import RunConfig
from rleif_kit.core.paths import RunPaths
from rleif_kit.models import trainer_logs
from rleif_kit.models.generation import require_vllm
from rleif_kit.models.loading import load_causal_lm, load_tokenizer, resolve_rm_base, use_bf16
from rleif_kit.ppo.policy import disable_dropout
from rleif_kit.ppo.trainer import TERMS, PPOResult  # TERMS: a column each in TRL's completions table
from rleif_kit.rewards.reward import term_log_fields


class RLEIFReward:
    """The callable TRL calls with (prompts, completions); keeps each reward term's statistics for the log."""

    __name__ = "rleif_reward"  # TRL names the logged reward column after the function

    def __init__(self, scorer: Any, by_prompt: dict[str, dict]):
        self.scorer, self.by_prompt, self.pending, self.verify_s = scorer, by_prompt, [], 0.0

    def __call__(self, prompts: Sequence[str], completions: Sequence[str], log_metric: Any = None,
                 log_extra: Any = None, **_: Any) -> list[float]:
        """r per completion; TRL passes ``log_metric`` (a scalar into its logs, so the trackers) and ``log_extra``
        (a column of its completions table): each term's mean goes to the first, each response's terms to the
        second."""
        records = [self.by_prompt[p] for p in prompts]
        scores = self.scorer(records, [c.strip() for c in completions])
        self.pending.append(scores)
        self.verify_s += getattr(self.scorer, "timings", {}).get("verify_s", 0.0)
        for name, value in (term_means([scores]).items() if log_metric else ()):
            log_metric(name, value)
        for term in (TERMS if log_extra else ()):
            if scores.get(term):
                log_extra(term, list(scores[term]))
        return scores["reward"]

    def drain(self) -> dict[str, float]:
        """Mean rI, rA and share of rA < 0.5 over the calls since the last drain, the share of responses the world's
        verifier calls right (the pass rate, for code) and the seconds it took (the sandbox, for code)."""
        verify_s, pending, self.pending, self.verify_s = self.verify_s, self.pending, [], 0.0
        out = term_means(pending)
        return {**out, "verify_s": round(verify_s, 3)} if out and verify_s else out


def term_means(batches: Sequence[dict]) -> dict[str, float]:
    """Mean rI and rA, the share of rA < 0.5, the share the world's verifier calls right and rV / rF's columns,
    over the scorer's outputs ``batches`` ({} when they hold no response)."""
    keys = ("rI", "rA", "rV", "rV_missing", "rF", "correct")
    merged = {k: [x for s in batches for x in s.get(k, [])] for k in keys}
    ri, ra = merged["rI"], merged["rA"]
    if not ra:
        return {}
    judged = [c for c in merged.pop("correct") if c is not None]
    return {"rI_mean": statistics.fmean(ri), "rA_mean": statistics.fmean(ra),
            "low_rA_share": sum(a < 0.5 for a in ra) / len(ra),
            **({"right_share": sum(judged) / len(judged)} if judged else {}),
            **term_log_fields({k: v for k, v in merged.items() if v})}


def grpo_config(cfg: RunConfig, paths: RunPaths, bf16: bool, progress: bool = True) -> Any:
    """TRL's GRPOConfig from ``[ppo]`` (one PPO step = one rollout batch and its updates), then ``[ppo]
    trainer_args`` (core/trainer_args.py)."""
    import torch  # heavy: loaded on first use
    from trl import GRPOConfig  # heavy: loaded on first use

    ppo = cfg.ppo
    per_step = ppo.rollout_batch // ppo.mini_batch * ppo.ppo_epochs  # optimizer steps per rollout
    kit = dict(output_dir=str(paths.grpo_dir), learning_rate=ppo.lr,
               max_steps=ppo.total_steps * per_step, per_device_train_batch_size=ppo.mini_batch,
               steps_per_generation=ppo.rollout_batch // ppo.mini_batch, num_generations=ppo.num_generations,
               num_iterations=ppo.ppo_epochs, max_completion_length=ppo.max_new_tokens,
               temperature=ppo.temperature, beta=ppo.kl_coef, epsilon=ppo.clip_range,
               max_grad_norm=ppo.max_grad_norm, logging_steps=per_step, save_strategy="no",
               report_to=trainer_logs.report_to(cfg, "ppo"), run_name=trainer_logs.run_name(cfg, "ppo"),
               use_cpu=not torch.cuda.is_available(), bf16=bf16,
               seed=cfg.base.seed, disable_tqdm=not progress,
               lr_scheduler_type="constant", warmup_steps=0,  # as our PPO loop: TRL's default decays to 0
               use_vllm=ppo.generation_backend == "vllm", vllm_mode="colocate")
    return GRPOConfig(**trainer_args.merged(kit, ppo.trainer_args))


def run_grpo(cfg: RunConfig, paths: RunPaths, pool: Sequence[dict], scorer: Any, progress: bool = True):
    """Train with GRPO; returns (model with the adapter, tokenizer, PPOResult-shaped log)."""
    import torch  # heavy: loaded on first use
    from datasets import Dataset  # heavy: loaded on first use
    from peft import LoraConfig  # heavy: loaded on first use
    from transformers import TrainerCallback  # heavy: loaded on first use
    from trl import GRPOTrainer  # heavy: loaded on first use

    ppo = cfg.ppo
    sft_path = resolve_rm_base(cfg, paths, "sft", "[ppo] policy")
    by_prompt = {scorer.world.prompt_for(r, cot=cfg.eval.cot_prompt): r for r in pool}  # as SFT trained
    reward = RLEIFReward(scorer, by_prompt)
    log: list[dict] = []

    class ToLog(TrainerCallback):
        def on_log(self, args, state, control, logs=None, **kwargs):
            if logs and "reward" in logs:
                log.append({"step": len(log), "reward_mean": logs["reward"], "reward_std": logs.get("reward_std", 0.0),
                            "kl": logs.get("kl", 0.0), "entropy": logs.get("entropy", 0.0),
                            "response_len": logs.get("completions/mean_length", 0.0),
                            "learning_rate": logs.get("learning_rate"), **reward.drain()})

    if ppo.generation_backend == "vllm":  # TRL runs vLLM beside the trainer and syncs the weights each step
        require_vllm("[ppo] generation_backend")
    bf16 = use_bf16(cfg.base.bf16)
    args = grpo_config(cfg, paths, bf16, progress)
    lora = LoraConfig(r=ppo.lora_r, lora_alpha=ppo.lora_alpha, lora_dropout=0.0,
                      target_modules=list(cfg.sft.lora_targets),
                      task_type="CAUSAL_LM", bias="none")
    tokenizer = load_tokenizer(sft_path)
    tokenizer.padding_side = "left"
    model = load_causal_lm(sft_path, dtype=torch.bfloat16 if bf16 else torch.float32)  # a hub id: one line offline
    disable_dropout(model)  # as our PPO loop: the ratio is exactly 1 before the weights move
    trainer = GRPOTrainer(model=model, reward_funcs=reward, args=args,
                          train_dataset=Dataset.from_list([{"prompt": p} for p in by_prompt]),
                          processing_class=tokenizer, peft_config=lora,
                          callbacks=[ToLog(), *trainer_logs.callbacks(cfg, paths, "ppo")])
    start = time.perf_counter()
    trainer.train()
    return trainer.model, tokenizer, PPOResult(len(log), log, runtime_s=time.perf_counter() - start)
