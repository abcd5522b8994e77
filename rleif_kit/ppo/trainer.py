"""Stage 05: PPO with the RLEIF reward r = rI * rA — a small loop meant to be read top to bottom.

TRL 1.16 has no PPOTrainer, and no peer combines two reward models into one reward, so the loop is
ours. One step:

1. **Rollout.** ``rollout_batch`` evolved instructions → sampled responses (``gen_batch`` at a time)
   → log-probs under the policy and the reference (adapter off), and values, without gradients.
2. **Reward.** ``rI`` = IRM score of the instruction, ``rA`` = PRM aggregate of the response (or the
   arithmetic verifier, a perfect PRM, with ``[reward_model].answer_reward = "verifier"``); the scalar
   ``[ppo].reward_formula`` goes on the last response token, ``-kl_coef * KL`` on every token.
3. **Advantages.** GAE with ``gamma``, ``lam``; whitened.
4. **Updates.** ``ppo_epochs`` passes in ``mini_batch`` slices: clipped policy loss + ``vf_coef`` × clipped
   value loss, gradient clipping.
5. **Log, guard, checkpoint.** One JSONL row per step; the KL guard stops the run when the KL passes
   ``kl_limit`` or anything is not finite, keeping the last good checkpoint.

Under ``accelerate launch`` (``distributed.py``) each rank takes its slice of the rollout batch, DDP
averages the gradients, the log row's figures are those of the whole batch (so every rank takes the same
guard decision), and only rank 0 writes files. On one process all of this is a no-op.

Before the first update, the reward-health gate scores a sample with both reward models and refuses to
start on a broken reward unless ``[ppo].force`` (``reward_gate``). The math lives in ``ppo_math.py``, the
policy in ``ppo/policy.py``, the passes over a rollout in ``ppo/passes.py``, the reward in ``ppo/rewards.py``,
the log row in ``ppo/step_row.py`` and its timing in ``ppo/phases.py``; the A/B and export in ``ppo/stage.py``.
"""

from __future__ import annotations

import math
import random
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from rleif_kit.core import distributed as dist
from rleif_kit.core.config import RunConfig
from rleif_kit.core.jsonl import JsonlWriter, read_jsonl, write_jsonl
from rleif_kit.core.paths import RunPaths
from rleif_kit.core.stages import PPO
from rleif_kit.core.verdict import Verdict
from rleif_kit.models.trainer_logs import StepLog
from rleif_kit.ppo import ppo_math as pm
from rleif_kit.ppo.policy import (
    Policy,
    last_checkpoint,
    load_checkpoint,
    load_policy,
    prepare,
    save_checkpoint,
)
from rleif_kit.ppo.gate import reward_gate
from rleif_kit.ppo.passes import kl_after_update, pass_width, score_rollout, view
from rleif_kit.ppo.phases import PhaseTimer, rollout_fields
from rleif_kit.ppo.rewards import RewardScorer, raise_if_failed, save_gate
from rleif_kit.ppo.rollout import Rollout, generate_rollout
from rleif_kit.ppo.samples import save_rollout_samples
from rleif_kit.ppo.step_row import guard, step_record
from rleif_kit.worlds.data import instruction_pool

STAGE = PPO
RANK_MEANS = ("kl", "kl_after", "entropy", "response_len", "policy_loss", "value_loss", "clip_frac", "approx_kl",
              "explained_variance", "gen_tokens_per_s", "pad_ratio")  # per-rank means

# ------------------------------------------------------------------------- the loop

@dataclass
class PPOResult:
    steps: int  # steps completed (including resumed ones)
    log: list[dict]
    gate: list[Verdict] = field(default_factory=list)
    stopped: str = ""  # why the KL guard stopped the run ('' when it ran to the end)
    model_dir: Path | None = None
    resumed_from: int = 0
    runtime_s: float = 0.0


def _batch_for_step(pool: Sequence[dict], step: int, size: int, seed: int) -> list[dict]:
    """The instructions of step ``step``: a seeded shuffle of the pool per epoch over it, so a resumed
    run draws exactly the batches it would have drawn."""
    per_epoch = max(1, len(pool) // size)
    epoch, k = divmod(step, per_epoch)
    order = list(pool)
    random.Random(seed * 1000 + epoch).shuffle(order)
    return order[k * size:(k + 1) * size] if len(order) >= size else [order[i % len(order)] for i in range(size)]


def ppo_step(policy: Policy, optimizer: Any, roll: Rollout, scores: dict, cfg: RunConfig, kl_coef: float) -> dict:
    """Advantages from the rollout's rewards, then ``ppo_epochs`` clipped updates; returns the step's stats."""
    import torch  # heavy: loaded on first use

    ppo, mask = cfg.ppo, roll.response_mask
    score = torch.tensor(scores["reward"], dtype=torch.float32, device=mask.device)
    kl_tokens = roll.logp - roll.ref_logp
    rewards = pm.token_rewards(score, kl_tokens, kl_coef, mask)
    adv, returns = pm.gae(rewards, roll.values, mask, ppo.gamma, ppo.lam)
    adv = pm.masked_whiten(adv, mask)
    policy.model.train()  # activation checkpointing runs in train mode only; load_policy switched dropout off
    B, stats = mask.shape[0], {"policy_loss": [], "value_loss": [], "clip_frac": [], "approx_kl": []}
    computed = 0  # tokens the update's passes computed, padding included (the log's pad_ratio)
    for _ in range(ppo.ppo_epochs):
        for idx in torch.randperm(B).split(ppo.mini_batch):
            logp, values, _ = view(policy, roll, idx)
            computed += len(idx) * pass_width(roll, idx)
            pl, clip_frac = pm.policy_loss(logp, roll.logp[idx], adv[idx], mask[idx], ppo.clip_range)
            stats["approx_kl"].append(pm.approx_kl(logp.detach(), roll.logp[idx], mask[idx]).item())
            vl = pm.value_loss(values, roll.values[idx], returns[idx], mask[idx], ppo.clip_range)
            loss = pl + ppo.vf_coef * vl
            if dist.any_rank(not torch.isfinite(loss)):
                return {"policy_loss": float("nan"), "value_loss": float("nan"), "computed_tokens": computed}
            optimizer.zero_grad()
            dist.accelerator().backward(loss)
            dist.accelerator().clip_grad_norm_(policy.parameters(), ppo.max_grad_norm)
            optimizer.step()
            stats["policy_loss"].append(pl.item()), stats["value_loss"].append(vl.item())
            stats["clip_frac"].append(clip_frac.item())
    out = {k: sum(v) / len(v) for k, v in stats.items()}
    out["computed_tokens"] = computed
    out["kl_after"] = kl_after_update(policy, roll, ppo.mini_batch)
    out["explained_variance"] = pm.explained_variance(roll.values, returns, mask)  # the value head before the update
    return out


def _read_log(path: Path, upto: int) -> list[dict]:
    return [r for r in read_jsonl(path) if r["step"] < upto]  # a torn last line (a crash mid-write) is dropped


def run_ppo(cfg: RunConfig, paths: RunPaths, pool: Sequence[dict] | None = None, scorer: RewardScorer | None = None,
            policy: Policy | None = None, gate: list[Verdict] | None = None,
            progress: bool = True) -> tuple[Policy, PPOResult]:
    """Gate (unless given), then ``total_steps`` PPO steps, resuming from the last checkpoint.

    Raises RewardGateFailed when a gate check fails and ``[ppo].force`` is off.
    """
    import torch  # heavy: loaded on first use
    from tqdm.auto import tqdm  # heavy: loaded on first use

    if cfg.ppo.generation_backend == "vllm":
        raise NotImplementedError("[ppo] generation_backend = 'vllm' is not supported yet by our PPO loop (it needs "
                                  "the adapter in vLLM at every step): use 'transformers', or algorithm 'grpo'")
    ppo = cfg.ppo
    dist.shard(range(ppo.rollout_batch))  # fails early, with the fix, when the batch does not divide
    pool = list(pool if pool is not None else instruction_pool(cfg, paths))
    policy = policy or load_policy(cfg, paths)
    if scorer is None:
        scorer = RewardScorer(cfg, paths)
    n_params = sum(p.numel() for p in policy.model.parameters())
    if n_params > 1e9 and ppo.rollout_batch < 64:
        print(f"warning: [ppo] rollout_batch = {ppo.rollout_batch} on a {n_params / 1e9:.0f}B model: PPO is "
              "unstable below 64 prompts per batch", file=sys.stderr)
    optimizer = torch.optim.AdamW(policy.parameters(), lr=ppo.lr)
    optimizer = prepare(policy, optimizer)  # accelerate: DDP on several ranks, a pass-through on one
    kl_ctl = pm.AdaptiveKL(ppo.kl_coef, ppo.kl_target or None)
    checkpoints, log_path = paths.ppo_checkpoints, paths.ppo_log
    start = 0
    resume = last_checkpoint(checkpoints)
    if resume is not None:
        state = load_checkpoint(policy, optimizer, resume)
        start, kl_ctl.coef, gate = state["step"], state["kl_coef"], []
        print(f"resuming from {resume.name} (step {start})")
    else:
        if gate is None:
            gate = reward_gate(cfg, paths, policy, scorer, pool)
        if dist.is_main():
            save_gate(paths.ppo_gate, gate)
        if dist.any_rank(any(v.status == "fail" for v in gate)):
            raise_if_failed(gate, ppo.force)
    log = _read_log(log_path, start)
    if dist.is_main():
        write_jsonl(log_path, log)  # the steps after the checkpoint resumed from are redone
    writer = JsonlWriter(log_path, fsync_every=1) if dist.is_main() else None
    saved_s = 0.0  # seconds the last checkpoint took: reported in the next step's row
    result = PPOResult(start, log, gate, resumed_from=start)
    t0 = time.perf_counter()
    bar = tqdm(total=ppo.total_steps, initial=start, desc="PPO", disable=not progress or not dist.is_main())
    scalars = StepLog(cfg, paths, "ppo", ppo.total_steps, start, enabled=dist.is_main())  # TensorBoard, progress
    for step in range(start, ppo.total_steps):
        step_t0, timer = time.perf_counter(), PhaseTimer()
        torch.manual_seed(cfg.base.seed * 7919 + step)
        batch = dist.shard(_batch_for_step(pool, step, ppo.rollout_batch, cfg.base.seed))  # this rank's slice
        prompts = [scorer.world.prompt_for(r, cot=cfg.eval.cot_prompt) for r in batch]
        with timer("generate"):
            roll = generate_rollout(policy, prompts, cfg)
        roll.trim = ppo.trim_padding
        score_rollout(policy, roll, ppo.mini_batch, timer)
        with timer("reward"):
            scores = scorer(batch, roll.responses)
        with timer("update"):
            update = ppo_step(policy, optimizer, roll, scores, cfg, kl_ctl.coef)
        update.update(rollout_fields(int(roll.response_mask.sum().item()), timer.seconds["generate"],
                                     update.pop("computed_tokens"), ppo.ppo_epochs * int(roll.attention_mask.sum())))
        row = step_record(step, dist.gather_lists(scores), roll, update, kl_ctl.coef)  # rewards of the whole batch
        row.update({k: round(v, 3) for k, v in getattr(scorer, "timings", {}).items()})  # verify_s: the sandbox
        nan = float("nan")  # the same keys on every rank, or the all-reduce would hang: a missing figure is NaN
        row.update(dist.gather_mean({k: nan if row[k] is None else row[k] for k in RANK_MEANS if k in row}))
        for k in ("explained_variance", "gen_tokens_per_s", "pad_ratio"):  # undefined, not a number: null in the log
            if k in row and not math.isfinite(row[k]):
                row[k] = None
        result.stopped = guard(row, ppo.kl_limit)
        save_rollout_samples(paths.ppo_rollouts, step, ppo.total_steps - 1, bool(result.stopped), batch, roll, scores)
        row.update(timer.fields(), checkpoint_s=round(saved_s, 3))  # the checkpoint saved after the previous step
        row["step_s"] = round(time.perf_counter() - step_t0 + saved_s, 3)  # the phases and the bookkeeping between
        if writer is not None:
            writer.write(row)
        result.log.append(row)
        scalars.add(row, step)
        bar.update(1)
        bar.set_postfix(reward=f"{row['reward_mean']:.3f}", kl=f"{row['kl']:.2f}")
        if result.stopped:
            break
        kl_ctl.update(row["kl"], ppo.rollout_batch)
        result.steps = step + 1
        saved_t0 = time.perf_counter()  # after the step's row is written: a crash never leaves a checkpoint
        if result.steps % ppo.save_every == 0 or result.steps == ppo.total_steps:  # ahead of its log
            if dist.is_main():
                save_checkpoint(policy, optimizer, checkpoints / f"step-{result.steps:06d}",
                                {"step": result.steps, "kl_coef": kl_ctl.coef})
            dist.barrier()
        saved_s = time.perf_counter() - saved_t0
    bar.close()
    scalars.close()
    if writer is not None:
        writer.close()
    dist.debug_dump("ppo", policy.named_trainable().items())
    result.runtime_s = time.perf_counter() - t0
    if result.stopped:
        good = last_checkpoint(checkpoints)
        print(f"KL guard stopped PPO: {result.stopped}. Last good checkpoint: {good or 'none (the SFT model)'}",
              file=sys.stderr)
        if good is not None:
            load_checkpoint(policy, optimizer, good)
    return policy, result
