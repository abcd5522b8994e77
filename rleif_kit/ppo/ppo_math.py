"""The math of PPO as pure tensor functions, each tested on hand-worked values (tests/test_ppo_math.py).

Shapes: ``[batch, T]`` over response tokens, with ``mask`` 1 on real response tokens and 0 on padding
after the end of a response. Nothing here knows about models; ``ppo/trainer.py`` calls these in order:

    kl = logp - ref_logp                                  (per token, the k1 estimator)
    rewards = token_rewards(score, kl, kl_coef, mask)     (-kl_coef * kl per token, + score on the last)
    adv, ret = gae(rewards, values, mask, gamma, lam)
    loss = policy_loss(...) + vf_coef * value_loss(...)
"""

from __future__ import annotations

import torch


def masked_mean(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    return (x * mask).sum() / mask.sum().clamp(min=1)


def masked_whiten(x: torch.Tensor, mask: torch.Tensor, eps: float = 1e-8) -> torch.Tensor:
    """Zero mean, unit variance over the masked entries (advantage normalisation); padding stays 0."""
    mean = masked_mean(x, mask)
    var = masked_mean((x - mean) ** 2, mask)
    return (x - mean) * torch.rsqrt(var + eps) * mask


def last_token_index(mask: torch.Tensor) -> torch.Tensor:
    """Index of each row's last real token (the mask is 1s then 0s); 0 for an empty row."""
    return (mask.sum(dim=1).long() - 1).clamp(min=0)


def token_rewards(score: torch.Tensor, kl: torch.Tensor, kl_coef: float, mask: torch.Tensor) -> torch.Tensor:
    """Per-token reward: ``-kl_coef * kl`` on every response token, plus the scalar ``score`` on the last
    real token (never on padding, whatever the padding length)."""
    rewards = -kl_coef * kl * mask
    rows = torch.arange(score.shape[0])
    rewards[rows, last_token_index(mask)] += score
    return rewards


def gae_loop(rewards: list[float], values: list[float], gamma: float, lam: float) -> tuple[list[float], list[float]]:
    """Generalised advantage estimation for one sequence, written as the textbook loop (the reference).

    delta_t = r_t + gamma * V_{t+1} - V_t (V after the last token is 0: the episode ends there);
    A_t = delta_t + gamma * lam * A_{t+1}; returns R_t = A_t + V_t.
    """
    adv, last = [0.0] * len(rewards), 0.0
    for t in reversed(range(len(rewards))):
        next_value = values[t + 1] if t + 1 < len(values) else 0.0
        delta = rewards[t] + gamma * next_value - values[t]
        last = delta + gamma * lam * last
        adv[t] = last
    return adv, [a + v for a, v in zip(adv, values)]


def gae(rewards: torch.Tensor, values: torch.Tensor, mask: torch.Tensor, gamma: float,
        lam: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Batched GAE over ``[batch, T]``; padding gets advantage and return 0 and does not leak into
    real tokens (the value after a row's last real token counts as 0)."""
    values = values * mask
    rewards = rewards * mask
    adv = torch.zeros_like(rewards)
    last = torch.zeros(rewards.shape[0], dtype=rewards.dtype, device=rewards.device)
    T = rewards.shape[1]
    for t in reversed(range(T)):
        next_value = values[:, t + 1] if t + 1 < T else torch.zeros_like(last)
        delta = rewards[:, t] + gamma * next_value - values[:, t]
        last = (delta + gamma * lam * last) * mask[:, t]
        adv[:, t] = last
    return adv, (adv + values) * mask


def policy_loss(logp: torch.Tensor, old_logp: torch.Tensor, advantages: torch.Tensor, mask: torch.Tensor,
                clip_range: float) -> tuple[torch.Tensor, torch.Tensor]:
    """PPO's clipped surrogate, to minimise: mean of max(-A * ratio, -A * clip(ratio, 1 - eps, 1 + eps)).

    Returns (loss, clip fraction = share of tokens where the clipped term was the larger one).
    """
    ratio = torch.exp(logp - old_logp)
    unclipped = -advantages * ratio
    clipped = -advantages * torch.clamp(ratio, 1 - clip_range, 1 + clip_range)
    loss = masked_mean(torch.maximum(unclipped, clipped), mask)
    clip_frac = masked_mean((clipped > unclipped).float(), mask)
    return loss, clip_frac


def approx_kl(logp: torch.Tensor, old_logp: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """KL(old || new) of an update, as cleanrl and TRL log it: mean of (ratio - 1) - log ratio over the response
    tokens (the k3 estimator; never negative, 0 when the policy did not move)."""
    log_ratio = logp - old_logp
    return masked_mean(torch.exp(log_ratio) - 1 - log_ratio, mask)


def explained_variance(values: torch.Tensor, returns: torch.Tensor, mask: torch.Tensor) -> float:
    """1 - Var(returns - values) / Var(returns) over the response tokens: 1 when the value head predicts the
    returns, 0 when it does no better than their mean, negative when worse; NaN when the returns do not vary."""
    n = mask.sum().clamp(min=1)
    def var(x):  # noqa: E306 - population variance over the masked tokens
        mean = (x * mask).sum() / n
        return (((x - mean) ** 2) * mask).sum() / n
    total = var(returns)
    return float("nan") if total.item() == 0 else (1 - var(returns - values) / total).item()


def value_loss(values: torch.Tensor, old_values: torch.Tensor, returns: torch.Tensor, mask: torch.Tensor,
               clip_range: float) -> torch.Tensor:
    """Clipped value loss: 0.5 * mean(max((V - R)^2, (V_clipped - R)^2)), V_clipped within ±clip of the old V."""
    clipped = old_values + torch.clamp(values - old_values, -clip_range, clip_range)
    return 0.5 * masked_mean(torch.maximum((values - returns) ** 2, (clipped - returns) ** 2), mask)


def sequence_kl(logp: torch.Tensor, ref_logp: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """KL per sequence: the sum over response tokens of ``logp - ref_logp`` (the k1 estimate of
    KL(policy || reference) on the sampled tokens). Logged averaged over the batch."""
    return ((logp - ref_logp) * mask).sum(dim=1)


def kl_k3(logp: torch.Tensor, old_logp: torch.Tensor, ref_logp: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """KL(policy || reference) per sequence from tokens sampled by an OLDER policy: per token the k3 estimate
    ``rho - 1 - log rho`` with ``rho = ref / policy`` (never negative; unbiased under the policy's own samples),
    weighted by ``policy / old`` to correct for who sampled the tokens; summed over response tokens."""
    log_rho = ref_logp - logp
    k3 = torch.expm1(log_rho) - log_rho
    return (torch.exp(logp - old_logp) * k3 * mask).sum(dim=1)


def entropy_from_logits(logits: torch.Tensor) -> torch.Tensor:
    """Per-token entropy of the next-token distribution, ``[batch, T]``."""
    logp = torch.log_softmax(logits.float(), dim=-1)
    return -(logp.exp() * logp).sum(dim=-1)


def token_logprobs(logits: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
    """log p(token) under ``logits`` (aligned: logits[:, t] predicts tokens[:, t])."""
    return torch.log_softmax(logits.float(), dim=-1).gather(-1, tokens.unsqueeze(-1)).squeeze(-1)


class AdaptiveKL:
    """Ziegler et al.'s adaptive KL coefficient: move ``coef`` so the measured KL tracks ``target``.

    coef *= 1 + clip((kl / target - 1), -0.2, 0.2) * n_steps / horizon. With ``target`` None the
    coefficient stays fixed.
    """

    def __init__(self, coef: float, target: float | None = None, horizon: int = 10000):
        self.coef, self.target, self.horizon = coef, target, horizon

    def update(self, kl: float, n_steps: int) -> float:
        if self.target:
            error = max(-0.2, min(0.2, kl / self.target - 1))
            self.coef *= 1 + error * n_steps / self.horizon
        return self.coef
