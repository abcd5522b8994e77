"""The passes over a rollout without gradient — the policy's log-probs and values, the reference's log-probs, the
KL after the update — and the view of a group of its rows that the update's passes share (``trainer.py``).

With ``[ppo] trim_padding`` a pass computes only the columns its rows use, and the passes without gradient take
the rows grouped by length (shortest first), so a group of short rows is a short pass; results come back in the
rollout's row order. Values are unchanged: positions come from the attention mask, and a real token never
attends to a padding one.
"""

from __future__ import annotations

from rleif_kit.ppo import ppo_math as pm
from rleif_kit.ppo.phases import PhaseTimer
from rleif_kit.ppo.policy import Policy, forward
from rleif_kit.ppo.rollout import Rollout


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
