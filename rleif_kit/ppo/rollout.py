"""Rollouts: one sampled response per prompt, ``gen_batch`` prompts at a time, laid out as one left-padded batch
(prompt, then response, then padding) with the response mask the PPO math reads."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from rleif_kit.core.config import RunConfig
from rleif_kit.models.generation import plain_sampling
from rleif_kit.ppo.policy import Policy


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
    trim: bool = False  # passes compute only the columns their rows use ([ppo] trim_padding; passes.view)


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
