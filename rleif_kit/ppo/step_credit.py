"""Step-level credit (``[ppo] reward_granularity = "step"``): each step's share of r on the token where the step ends.

The reward splits r over a response's steps (``rewards/reward.step_credits``: step k gets the change it makes to r as
rA's running aggregate, the last token what r is without rA; the parts sum to r). This module puts those parts on
the sampled tokens: the step ends are characters of the response text as the PRM read it, the rollout holds token
ids, so each end is found by decoding growing prefixes of the response's tokens (a binary search: the decoded length
only grows with the prefix) — the text the rollout decoded, not a re-tokenisation, which could split it otherwise.
The last step goes on the last token (EOS), where the solution level puts all of r, so a one-step response gets
the same rewards at both granularities; a step end that cannot be placed goes there too, so the row still sums to r.
Math-Shepherd's step-by-step PPO credits each step with its PRM score at its end in the same way; the kit credits
the step's change to r, so the formula (a product with rI, the verifier's share) holds whole.
"""

from __future__ import annotations

from typing import Any, Sequence


def char_end_tokens(tokenizer: Any, token_ids: Sequence[int], char_ends: Sequence[int]) -> list[int | None]:
    """The index of the token where each character end of the decoded response is reached (its text decoded as the
    rollout decodes it: special tokens skipped, leading whitespace stripped); None for an end past the text."""
    full = tokenizer.decode(list(token_ids), skip_special_tokens=True)
    lead = len(full) - len(full.lstrip())
    out: list[int | None] = []
    for end in char_ends:
        target = lead + end
        if not token_ids or end <= 0 or target > len(full):
            out.append(None)
            continue
        lo, hi = 0, len(token_ids) - 1
        while lo < hi:  # the first prefix whose text reaches the end
            mid = (lo + hi) // 2
            if len(tokenizer.decode(list(token_ids[:mid + 1]), skip_special_tokens=True)) >= target:
                hi = mid
            else:
                lo = mid + 1
        out.append(lo)
    return out


def credit_positions(tokenizer: Any, token_ids: Sequence[int], credits: Sequence[float],
                     ends: Sequence[int]) -> list[int]:
    """Where each step's credit goes: the token its end falls on, the last step's (and any step that cannot be
    placed: an end past the text, or ends and credits that disagree in number) on the last token."""
    last = max(len(token_ids) - 1, 0)
    if not credits:
        return []
    placed = char_end_tokens(tokenizer, token_ids, ends[:len(credits) - 1]) if len(ends) == len(credits) else []
    placed = [last if p is None else min(p, last) for p in placed]
    return placed + [last] * (len(credits) - len(placed))


def credit_tensor(tokenizer: Any, roll: Any, scores: dict) -> tuple[Any, dict[str, float]]:
    """([B, T] rewards before the KL term: each step's credit at its position, the end credit and the last step's on
    the last token; 0 elsewhere) and the placement's figures: ``steps_placed_share``, the share of the steps before
    the last that landed before the last token (1.0 when every step end was found among the tokens)."""
    import torch  # heavy: loaded on first use

    mask = roll.response_mask
    dense = torch.zeros_like(mask)
    ids = roll.input_ids[:, roll.prompt_width:]
    lengths = mask.sum(dim=1).long().tolist()
    early = placed = 0
    for i, n in enumerate(lengths):
        tokens = ids[i, :n].tolist()
        credits = scores["step_credits"][i]
        last = max(n - 1, 0)
        dense[i, last] += scores["end_credit"][i]
        positions = credit_positions(tokenizer, tokens, credits, scores["step_ends"][i])
        for k, (pos, credit) in enumerate(zip(positions, credits)):
            dense[i, pos] += credit
            if k < len(credits) - 1:
                early += 1
                placed += pos < last
    return dense, {"steps_placed_share": placed / early if early else None}
