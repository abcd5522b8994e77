"""Stage 05: PPO with the RLEIF reward r = rI * rA — a small loop meant to be read top to bottom.

TRL 1.16 has no PPOTrainer, and no peer combines two reward models into one reward, so the loop is
ours. One step:

1. **Rollout.** ``rollout_batch`` evolved instructions → sampled responses (``gen_batch`` at a time)
   → log-probs under the policy and the reference (adapter off), and values, without gradients.
2. **Reward.** ``rI`` = IRM score of the instruction, ``rA`` = PRM aggregate of the response (or the
   arithmetic verifier, a perfect PRM, with ``[reward_model].answer_reward = "verifier"``); the scalar
   ``[ppo].reward_formula`` goes on the last response token — or, with ``[ppo] reward_granularity = "step"``, split
   over the steps, each part on the token where its step ends (``step_credit.py``) — and ``-kl_coef * KL`` on every
   token.
3. **Advantages.** GAE with ``gamma``, ``lam``; whitened.
4. **Updates.** ``ppo_epochs`` passes in ``mini_batch`` slices: clipped policy loss + ``vf_coef`` × clipped
   value loss, gradient clipping.
5. **Log, guard, checkpoint.** One JSONL row per step; the KL guard stops the run when the KL passes
   ``kl_limit`` or anything is not finite, keeping the last good checkpoint.

Under ``accelerate launch`` (``distributed.py``) each rank takes its slice of the rollout batch, DDP
averages the gradients, the log row's figures are those of the whole batch (so every rank takes the same
guard decision), and only rank 0 writes files. On one process all of this is a no-op.

Before the first update, the reward-health gate (``stage.py``, which calls this loop) scores a sample with both
reward models and refuses to start on a broken reward unless ``[ppo].force``. This file reads in the order of a
step: the rollout and its passes without gradient, the step's log row and the rollouts kept to be read, the
bookkeeping that writes them, the update (``ppo_step``), and the loop itself (``train_ppo``) last. Beside it: the
math in ``ppo_math.py``, the policy in ``policy.py``, the reward in ``rewards/reward.py``; the gate, the A/B and
the export in ``stage.py``.

The passes. With ``[ppo] trim_padding`` a pass computes only the columns its rows use, and the passes without
gradient take the rows grouped by length (shortest first), so a group of short rows is a short pass; results come
back in the rollout's row order. Values are unchanged: positions come from the attention mask, and a real token
never attends to a padding one.

Where a step's time goes (``<name>_s`` in ``05_ppo/log.jsonl``, TensorBoard's ``time/`` group and the report):
``generate`` (sampling the responses), ``policy_pass`` (log-probs and values of the rollout under the policy),
``ref_pass`` (the reference's log-probs), ``reward`` (IRM, PRM or verifier; the sandbox's share of it is
``verify_s``) and ``update`` (the clipped updates and the KL after them); then ``checkpoint_s``, the save after
the previous step (a row is written before its checkpoint, so a crash never leaves a checkpoint ahead of its log),
and ``step_s``, all of it with the bookkeeping between the phases. Beside them: ``gen_tokens_per_s`` (response
tokens sampled per second of ``generate``) and ``pad_ratio`` (tokens the update's passes computed per real token
they covered, padding included; 1.0 is none). On a GPU the timer synchronises the device at each phase boundary,
so asynchronous kernels count in the phase that queued them.

The rollouts kept to be read (``05_ppo/rollouts.jsonl``): the first ones of the first step (the SFT policy) and
of the last (the trained policy), each with its instruction, response, every term (rI, rA, rV, rF: None where
the reward formula leaves it out), r and KL — ``log.jsonl`` says how the means moved, these rows show what moved
them.
"""

from __future__ import annotations

import contextlib
import math
import random
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator, Sequence

from rleif_kit.core import distributed as dist
from rleif_kit.core.config import RunConfig
from rleif_kit.core.jsonl import JsonlWriter, read_jsonl, write_jsonl
from rleif_kit.core.paths import RunPaths
from rleif_kit.core.reward_formula import parse_reward_formula
from rleif_kit.core.verdict import Verdict
from rleif_kit.models.generation import plain_sampling
from rleif_kit.models.trainer_logs import StepLog
from rleif_kit.ppo import ppo_math as pm
from rleif_kit.ppo import step_credit
from rleif_kit.ppo.policy import (
    Policy,
    forward,
    last_checkpoint,
    load_checkpoint,
    load_policy,
    prepare,
    save_checkpoint,
)
from rleif_kit.rewards.reward import RewardScorer, step_log_fields, term_log_fields, truth_log_fields
from rleif_kit.worlds.data import instruction_pool


@dataclass
class Rollout:
    input_ids: Any  # [B, P + T]: left-padded prompt, then the response, right-padded
    attention_mask: Any
    response_mask: Any  # [B, T]: 1 on response tokens (EOS included), 0 on padding
    prompt_width: int
    responses: list[str]
    logp: Any = None
    ref_logp: Any = None
    values: Any = None
    entropy: float = 0.0
    temperature: float = 1.0  # the sampling temperature: log-probs are taken at the same one
    trim: bool = False  # passes compute only the columns their rows use ([ppo] trim_padding; view)


def _response_tokens(row: list[int], eos_id: int) -> list[int]:
    """The sampled tokens up to and including the first EOS (all of them when there is none)."""
    return row[: row.index(eos_id) + 1] if eos_id in row else row


def generate_rollout(policy: Policy, prompts: Sequence[str], cfg: RunConfig) -> Rollout:
    """Sample one response per prompt, ``gen_batch`` prompts at a time, and lay them out as one batch."""
    import torch  # heavy: loaded on first use

    tok, ppo = policy.tokenizer, cfg.ppo
    tok.padding_side = "left"
    device = next(policy.model.parameters()).device
    prompt_ids, response_ids = [], []
    policy.model.eval()
    for start in range(0, len(prompts), ppo.gen_batch):
        chunk = list(prompts[start:start + ppo.gen_batch])
        enc = tok(chunk, return_tensors="pt", padding=True).to(device)
        with torch.no_grad(), plain_sampling(policy.model):  # not the checkpoint's repetition_penalty & co.
            out = policy.model.generate(**enc, do_sample=True, temperature=ppo.temperature, top_p=1.0, top_k=0,
                                        max_new_tokens=ppo.max_new_tokens, pad_token_id=tok.pad_token_id,
                                        eos_token_id=tok.eos_token_id)
        width = enc["input_ids"].shape[1]
        for i in range(len(chunk)):
            prompt_ids.append(enc["input_ids"][i][enc["attention_mask"][i].bool()].tolist())
            response_ids.append(_response_tokens(out[i, width:].tolist(), tok.eos_token_id))
    P, T = max(map(len, prompt_ids)), max(1, max(map(len, response_ids)))
    pad = tok.pad_token_id
    ids = torch.tensor([[pad] * (P - len(p)) + p + r + [pad] * (T - len(r)) for p, r in zip(prompt_ids, response_ids)])
    attn = torch.tensor([[0] * (P - len(p)) + [1] * (len(p) + len(r)) + [0] * (T - len(r))
                         for p, r in zip(prompt_ids, response_ids)])
    resp_mask = torch.tensor([[1.0] * len(r) + [0.0] * (T - len(r)) for r in response_ids])
    texts = [tok.decode(r, skip_special_tokens=True).strip() for r in response_ids]
    return Rollout(ids.to(device), attn.to(device), resp_mask.to(device), P, texts, temperature=ppo.temperature)


def response_view(policy: Policy, ids, attn, prompt_width: int, reference: bool = False, with_values: bool = True,
                  temperature: float = 1.0):
    """(log-probs of the response tokens, values, logits), each [B, T, ...].

    The logits are divided by the sampling ``temperature``, so the log-probs are those of the distribution
    the rollout was sampled from (policy and reference alike): PPO's ratio and the KL stay on-policy.
    """
    logits, values = forward(policy, ids, attn, with_values=with_values and not reference, reference=reference)
    T = ids.shape[1] - prompt_width
    logits = logits[:, prompt_width - 1: prompt_width - 1 + T] / temperature  # position t predicts token t + 1
    logp = pm.token_logprobs(logits, ids[:, prompt_width:])
    vals = values[:, prompt_width - 1: prompt_width - 1 + T] if values is not None else None
    return logp, vals, logits


def _slices(roll: Rollout, mini_batch: int) -> list:
    """The rollout's rows in ``mini_batch`` groups for the passes without gradient: in order, or, with
    ``trim_padding``, grouped by length (shortest first), so that each group's trimmed width is its own."""
    import torch  # heavy: loaded on first use

    if not roll.trim:
        return [slice(s, s + mini_batch) for s in range(0, roll.input_ids.shape[0], mini_batch)]
    order = torch.argsort(roll.attention_mask.sum(dim=1), stable=True)
    return list(order.split(mini_batch))


def view(policy: Policy, roll: Rollout, rows, **kw):
    """``response_view`` of the rollout's ``rows`` (a slice or an index tensor) at its sampling temperature.

    With ``trim_padding`` only the columns some row of ``rows`` attends to are computed: a left-padded prompt's
    leading pads and the responses' trailing pads, which no real token attends to (positions come from the
    attention mask, so they do not change); the results are padded back to the rollout's width, with zeros where
    the response mask is 0 anyway."""
    import torch.nn.functional as F  # heavy: loaded on first use

    ids, attn, width = roll.input_ids[rows], roll.attention_mask[rows], roll.prompt_width
    if not roll.trim:
        return response_view(policy, ids, attn, width, temperature=roll.temperature, **kw)
    left, right = _columns(attn, width)
    logp, values, logits = response_view(policy, ids[:, left:right], attn[:, left:right], width - left,
                                         temperature=roll.temperature, **kw)
    missing = ids.shape[1] - right
    if missing:
        logp = F.pad(logp, (0, missing))
        values = F.pad(values, (0, missing)) if values is not None else None
        logits = F.pad(logits, (0, 0, 0, missing))
    return logp, values, logits


def score_rollout(policy: Policy, roll: Rollout, mini_batch: int, timer: PhaseTimer | None = None) -> None:
    """Fill in the rollout's log-probs (policy and reference), values and mean entropy, without gradients."""
    import torch  # heavy: loaded on first use

    timer, groups = timer or PhaseTimer(), _slices(roll, mini_batch)
    logps, refs, vals, ents = [], [], [], []
    with torch.no_grad():
        with timer("policy_pass"):
            for sl in groups:
                logp, values, logits = view(policy, roll, sl)
                logps.append(logp), vals.append(values), ents.append(pm.entropy_from_logits(logits))
        with timer("ref_pass"):
            for sl in groups:
                refs.append(view(policy, roll, sl, reference=True)[0])
    rows = _in_order(groups)
    roll.logp, roll.ref_logp, roll.values = rows(logps), rows(refs), rows(vals)
    roll.entropy = pm.masked_mean(rows(ents), roll.response_mask).item()


def _in_order(groups: list):
    """A function putting per-group results (rows in ``groups`` order) back in the rollout's row order."""
    import torch  # heavy: loaded on first use

    if isinstance(groups[0], slice):
        return torch.cat
    inverse = torch.argsort(torch.cat(groups))
    return lambda parts: torch.cat(parts)[inverse]


def kl_after_update(policy: Policy, roll: Rollout, mini_batch: int) -> float:
    """KL per sequence of the UPDATED policy to the reference, on this rollout's responses: what a checkpoint
    saved now holds.

    The rollout's own KL describes the policy before the updates; an update that blew the policy up would
    only show in the next rollout, after a checkpoint of the broken policy could have been saved. The samples
    come from the policy before the update, so the plain log-ratio (k1) would be off-policy and can go below
    zero; this is the k3 estimate (``ppo_math.kl_k3``) importance-weighted from the old policy to the new one,
    which is never negative and is 0 exactly when the new policy is the reference.
    """
    import torch  # heavy: loaded on first use

    kls = []
    with torch.no_grad():
        for sl in _slices(roll, mini_batch):
            logp, _, _ = view(policy, roll, sl, with_values=False)
            kls.append(pm.kl_k3(logp, roll.logp[sl], roll.ref_logp[sl], roll.response_mask[sl]))
    return torch.cat(kls).mean().item()  # a mean over rows: their order does not matter


def _columns(attn, prompt_width: int) -> tuple[int, int]:
    """[left, right): the columns some row of ``attn`` attends to, at least the prompt's last and one response
    column (the logits at the prompt's last column predict the first response token)."""
    used = attn.any(dim=0).nonzero().flatten()
    return min(int(used[0]), prompt_width - 1), max(int(used[-1]) + 1, prompt_width + 1)


def pass_width(roll: Rollout, rows) -> int:
    """How many columns a pass over ``rows`` computes (the rollout's whole width without ``trim_padding``)."""
    if not roll.trim:
        return roll.input_ids.shape[1]
    left, right = _columns(roll.attention_mask[rows], roll.prompt_width)
    return right - left


PHASES = ("generate", "policy_pass", "ref_pass", "reward", "update")


def _sync() -> None:
    import torch  # heavy: loaded on first use (the trainer has it loaded already)

    if torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.synchronize()


class PhaseTimer:
    """Seconds per phase of one step: ``with timer("generate"): ...``; a phase entered twice adds up."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}

    @contextlib.contextmanager
    def __call__(self, phase: str) -> Iterator[None]:
        if phase not in PHASES:
            raise ValueError(f"unknown PPO phase {phase!r}; one of {', '.join(PHASES)}")
        _sync()
        start = time.perf_counter()
        try:
            yield
        finally:
            _sync()
            self.seconds[phase] = self.seconds.get(phase, 0.0) + time.perf_counter() - start

    def fields(self) -> dict[str, float]:
        return {f"{phase}_s": round(self.seconds[phase], 3) for phase in PHASES if phase in self.seconds}


def rollout_fields(response_tokens: int, generate_s: float, computed_tokens: int, real_tokens: int) -> dict:
    """``gen_tokens_per_s`` and ``pad_ratio`` of one rollout (None where a count is 0)."""
    return {"gen_tokens_per_s": round(response_tokens / generate_s, 2) if generate_s > 0 else None,
            "pad_ratio": round(computed_tokens / real_tokens, 4) if real_tokens else None}


KL_ADVICE = ("lower [ppo] lr (1e-6 for 7B), raise kl_coef (0.1), keep clip_range 0.2, and use rollout_batch >= 64 "
             "for 7B")


def step_record(step: int, scores: dict, roll: Rollout, update: dict, kl_coef: float) -> dict:
    """One log row: reward mean/std, mean rI and rA, share of rA < 0.5, KL per sequence, entropy, ..., and where
    a verifier judges the responses, reward against truth: the AUC of rA and of r over right vs wrong responses
    (``rA_truth_auc``, ``r_truth_auc``; None when the batch is all right or all wrong), their mean rewards, and
    the share right."""
    kl = pm.sequence_kl(roll.logp, roll.ref_logp, roll.response_mask)
    r = scores["reward"]
    return {"step": step, "reward_mean": statistics.fmean(r), "reward_std": statistics.pstdev(r),
            "rI_mean": statistics.fmean(scores["rI"]), "rA_mean": statistics.fmean(scores["rA"]),
            "low_rA_share": sum(a < 0.5 for a in scores["rA"]) / len(r),
            "flagged_share": sum(scores["flagged"]) / len(r), "kl": kl.mean().item(), "kl_coef": kl_coef,
            "entropy": roll.entropy, "response_len": roll.response_mask.sum(dim=1).mean().item(), **update,
            **truth_log_fields(scores.get("correct", []), scores), **term_log_fields(scores),
            **step_log_fields(scores)}


def guard(row: dict, kl_limit: float) -> str:
    """'' when the step is healthy; else why the run must stop."""
    keys = ("kl", "kl_after", "policy_loss", "value_loss", "reward_mean")
    bad = [k for k in keys if not math.isfinite(row.get(k, 0.0))]
    if bad:
        return f"step {row['step']}: {', '.join(bad)} not finite — {KL_ADVICE}"
    kl = max(row["kl"], row.get("kl_after", row["kl"]))
    if kl > kl_limit:
        return f"step {row['step']}: KL {kl:.2f} passed the limit {kl_limit:g} — {KL_ADVICE}"
    return ""


SAMPLES = 4  # rollouts kept per saved step: enough to see a good and a bad one, few enough to read


TERMS = ("rI", "rA", "rV", "rF")  # a rollout record carries each: None where the reward formula does not use it


def sample_rows(step: int, batch: Sequence[dict], responses: Sequence[str], scores: dict, kl: Sequence[float],
                n: int = SAMPLES, terms: Iterable[str] = ("rI", "rA")) -> list[dict]:
    """The first ``n`` rollouts of one step as records (``instruction_id``: the instruction's own id), every term
    of :data:`TERMS` (None where ``terms``, the formula's, leaves it out), r, and ``correct`` (the world's truth;
    None where it has none), and at the step level each step's score and its credit (None at the solution level), the
    same keys for every world."""
    used = set(terms)
    return [{"step": step, "instruction_id": r["id"], "question": r["text"], "response": responses[i],
             **{t: scores[t][i] if t in used and t in scores else None for t in TERMS}, "r": scores["reward"][i],
             "kl": kl[i], "flagged": scores["flagged"][i], "correct": (scores.get("correct") or [None] * n)[i],
             **{k: scores[k][i] if k in scores else None for k in ("step_scores", "step_credits")}}
            for i, r in enumerate(batch[:n])]


def save_rollout_samples(path: Path, step: int, last_step: int, stopped: bool, batch: Sequence[dict], roll: Any,
                         scores: dict, n: int = SAMPLES, terms: Iterable[str] = ("rI", "rA")) -> None:
    """Keep step ``step``'s first ``n`` rollouts when it is the first step, the last, or the one the guard stopped
    at; a rerun of a step replaces its rows (a resumed run redoes the step it crashed in), step 0 all of them."""
    if not dist.is_main() or (step not in (0, last_step) and not stopped):
        return
    kl = pm.sequence_kl(roll.logp[:n], roll.ref_logp[:n], roll.response_mask[:n]).tolist()  # KL per sequence
    # step 0 starts a fresh training: an earlier run's rows (its last step) go; a resumed run redoes one step
    rows = [r for r in read_jsonl(path) if r["step"] != step] if path.exists() and step > 0 else []
    write_jsonl(path, sorted(rows + sample_rows(step, batch, roll.responses, scores, kl, n, terms),
                             key=lambda r: r["step"]))


RANK_MEANS = ("kl", "kl_after", "entropy", "response_len", "policy_loss", "value_loss", "clip_frac", "approx_kl",
              "explained_variance", "gen_tokens_per_s", "pad_ratio", "steps_placed_share")  # per-rank means

# ------------------------------------------------------------------ the bookkeeping of a step


class StepBook:
    """The loop's bookkeeping, one call a step (:meth:`close`): the step's log row — the rewards of the whole batch
    (gathered from every rank), the per-rank means, the reward's and the phases' seconds, the checkpoint before it
    — the KL guard's verdict on it, the kept rollouts, and the row written to ``05_ppo/log.jsonl``, TensorBoard and
    the progress bar. On one process the gathers are no-ops; only rank 0 writes."""

    def __init__(self, cfg: RunConfig, paths: RunPaths, log: list[dict], start: int, progress: bool):
        from tqdm.auto import tqdm  # heavy: loaded on first use

        self.cfg, self.paths, self.saved_s = cfg, paths, 0.0  # saved_s: the last checkpoint's, in the next row
        self.terms = parse_reward_formula(cfg.ppo.reward_formula).terms  # what the kept rollouts carry
        main, total = dist.is_main(), cfg.ppo.total_steps
        if main:  # the steps after the checkpoint resumed from are redone
            write_jsonl(paths.ppo_log, log)
        self.writer = JsonlWriter(paths.ppo_log, fsync_every=1) if main else None
        self.bar = tqdm(total=total, initial=start, desc="PPO", disable=not progress or not main)
        self.scalars = StepLog(cfg, paths, "ppo", total, start, enabled=main)  # TensorBoard, progress lines

    def begin(self) -> PhaseTimer:
        """A step starts: its clock, and the timer of its phases."""
        self.step_t0, self.timer = time.perf_counter(), PhaseTimer()
        return self.timer

    def close(self, step: int, batch: Sequence[dict], roll: Rollout, scores: dict, update: dict, kl_coef: float,
              scorer: Any) -> tuple[dict, str]:
        """The step's row, written, and the guard's word on it ('' or why the run must stop)."""
        ppo = self.cfg.ppo
        update.update(rollout_fields(int(roll.response_mask.sum().item()), self.timer.seconds["generate"],
                                     update.pop("computed_tokens"), ppo.ppo_epochs * int(roll.attention_mask.sum())))
        row = step_record(step, dist.gather_lists(scores), roll, update, kl_coef)  # rewards of the whole batch
        row.update({k: round(v, 3) for k, v in getattr(scorer, "timings", {}).items()})  # verify_s: the sandbox
        nan = float("nan")  # the same keys on every rank, or the all-reduce would hang: a missing figure is NaN
        row.update(dist.gather_mean({k: nan if row[k] is None else row[k] for k in RANK_MEANS if k in row}))
        for k in ("explained_variance", "gen_tokens_per_s", "pad_ratio", "steps_placed_share"):  # undefined: null
            if k in row and not math.isfinite(row[k]):
                row[k] = None
        stopped = guard(row, ppo.kl_limit)
        save_rollout_samples(self.paths.ppo_rollouts, step, ppo.total_steps - 1, bool(stopped), batch, roll, scores,
                             terms=self.terms)
        row.update(self.timer.fields(), checkpoint_s=round(self.saved_s, 3))  # saved after the previous step
        row["step_s"] = round(time.perf_counter() - self.step_t0 + self.saved_s, 3)  # phases and the bookkeeping
        self.saved_s = 0.0
        if self.writer is not None:
            self.writer.write(row)
        self.scalars.add(row, step)
        self.bar.update(1)
        self.bar.set_postfix(reward=f"{row['reward_mean']:.3f}", kl=f"{row['kl']:.2f}")
        return row, stopped

    @contextlib.contextmanager
    def checkpoint(self) -> Iterator[None]:
        """Time a checkpoint's save: the next step's row reports it."""
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.saved_s = time.perf_counter() - t0

    def finish(self) -> None:
        self.bar.close()
        self.scalars.close()
        if self.writer is not None:
            self.writer.close()


# ------------------------------------------------------------------ the update, and the loop

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
    placement: dict = {}
    if "step_credits" in scores:  # [ppo] reward_granularity = "step": each step's part of r where the step ends
        dense, placement = step_credit.credit_tensor(policy.tokenizer, roll, scores)
        rewards = dense - kl_coef * kl_tokens * mask
    else:  # all of r on the last token
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
    out.update(placement, computed_tokens=computed)
    out["kl_after"] = kl_after_update(policy, roll, ppo.mini_batch)
    out["explained_variance"] = pm.explained_variance(roll.values, returns, mask)  # the value head before the update
    return out


def _read_log(path: Path, upto: int) -> list[dict]:
    return [r for r in read_jsonl(path) if r["step"] < upto]  # a torn last line (a crash mid-write) is dropped


def check_can_start(cfg: RunConfig) -> None:
    """What our loop refuses before any work (``stage.run_ppo`` asks before the gate samples): vLLM generation, and
    a rollout batch the ranks cannot share evenly (the error names the fix)."""
    if cfg.ppo.generation_backend == "vllm":
        raise NotImplementedError("[ppo] generation_backend = 'vllm' is not supported yet by our PPO loop (it needs "
                                  "the adapter in vLLM at every step): use 'transformers', or algorithm 'grpo'")
    dist.shard(range(cfg.ppo.rollout_batch))


def train_ppo(cfg: RunConfig, paths: RunPaths, pool: Sequence[dict] | None = None, scorer: RewardScorer | None = None,
            policy: Policy | None = None, gate: list[Verdict] | None = None,
            progress: bool = True) -> tuple[Policy, PPOResult]:
    """``total_steps`` PPO steps, resuming from the last checkpoint. ``gate``: the verdicts of the reward-health
    gate the caller ran before the first update (``stage.train``), kept in the result; a resumed run has none."""
    import torch  # heavy: loaded on first use

    check_can_start(cfg)
    ppo = cfg.ppo
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
    log = _read_log(log_path, start)
    result = PPOResult(start, log, gate or [], resumed_from=start)
    t0 = time.perf_counter()
    book = StepBook(cfg, paths, log, start, progress)
    for step in range(start, ppo.total_steps):
        timer = book.begin()
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
        row, result.stopped = book.close(step, batch, roll, scores, update, kl_ctl.coef, scorer)  # log, guard
        result.log.append(row)
        if result.stopped:
            break
        kl_ctl.update(row["kl"], ppo.rollout_batch)
        result.steps = step + 1
        if result.steps % ppo.save_every == 0 or result.steps == ppo.total_steps:  # after the step's row is
            with book.checkpoint():  # written: a crash never leaves a checkpoint ahead of its log
                if dist.is_main():
                    save_checkpoint(policy, optimizer, checkpoints / f"step-{result.steps:06d}",
                                    {"step": result.steps, "kl_coef": kl_ctl.coef})
                dist.barrier()
    book.finish()
    dist.debug_dump("ppo", policy.named_trainable().items())
    result.runtime_s = time.perf_counter() - t0
    if result.stopped:
        good = last_checkpoint(checkpoints)
        print(f"KL guard stopped PPO: {result.stopped}. Last good checkpoint: {good or 'none (the SFT model)'}",
              file=sys.stderr)
        if good is not None:
            load_checkpoint(policy, optimizer, good)
    return policy, result
