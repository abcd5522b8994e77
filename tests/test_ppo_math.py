"""PPO math on hand-worked values: GAE, the clipped objective, value loss, KL, reward placement."""

from __future__ import annotations

import random

import pytest
import torch

from rleif_kit.ppo.ppo_math import (AdaptiveKL, gae, gae_loop, kl_k3, masked_whiten, policy_loss, sequence_kl,
                                token_rewards, value_loss)


def test_gae_three_steps_by_hand():
    # gamma 1, lam 0.5, rewards [0, 0, 1], values [0.5, 0.6, 0.7], V after the end = 0:
    #   t=2: delta = 1 + 0   - 0.7 = 0.3                 A2 = 0.3
    #   t=1: delta = 0 + 0.7 - 0.6 = 0.1   A1 = 0.1 + 0.5 * 0.3  = 0.25
    #   t=0: delta = 0 + 0.6 - 0.5 = 0.1   A0 = 0.1 + 0.5 * 0.25 = 0.225
    #   returns = A + V = [0.725, 0.85, 1.0]
    adv, ret = gae_loop([0.0, 0.0, 1.0], [0.5, 0.6, 0.7], gamma=1.0, lam=0.5)
    assert adv == pytest.approx([0.225, 0.25, 0.3]) and ret == pytest.approx([0.725, 0.85, 1.0])
    adv_t, ret_t = gae(torch.tensor([[0.0, 0.0, 1.0]]), torch.tensor([[0.5, 0.6, 0.7]]), torch.ones(1, 3), 1.0, 0.5)
    assert adv_t[0].tolist() == pytest.approx([0.225, 0.25, 0.3]) and ret_t[0].tolist() == pytest.approx([0.725, 0.85, 1.0])


def test_gae_vectorised_matches_the_loop_with_padding():
    rng = random.Random(0)
    lengths, T = [5, 3, 1, 4], 5
    rewards = torch.tensor([[rng.uniform(-1, 1) for _ in range(T)] for _ in lengths])
    values = torch.tensor([[rng.uniform(-1, 1) for _ in range(T)] for _ in lengths])
    mask = torch.tensor([[1.0] * n + [0.0] * (T - n) for n in lengths])
    adv, ret = gae(rewards, values, mask, gamma=0.9, lam=0.95)
    for i, n in enumerate(lengths):
        want_adv, want_ret = gae_loop(rewards[i, :n].tolist(), values[i, :n].tolist(), 0.9, 0.95)
        assert adv[i, :n].tolist() == pytest.approx(want_adv, abs=1e-6)
        assert ret[i, :n].tolist() == pytest.approx(want_ret, abs=1e-6)
        assert adv[i, n:].abs().sum() == 0  # padding never carries advantage


@pytest.mark.parametrize("advantage, ratio, want_loss, clipped", [
    (1.0, 1.5, -1.2, True),    # good action pushed too far: gain capped at 1 + eps
    (1.0, 1.1, -1.1, False),   # inside the range: the plain ratio
    (-1.0, 0.5, 0.8, True),    # bad action pushed down too far: capped at 1 - eps
    (-1.0, 1.5, 1.5, False),   # bad action made MORE likely: the pessimistic (unclipped) term wins
])
def test_clipped_objective_inside_and_outside_the_range(advantage, ratio, want_loss, clipped):
    old = torch.tensor([[-1.0]])
    new = old + torch.log(torch.tensor([[ratio]]))
    loss, frac = policy_loss(new, old, torch.tensor([[advantage]]), torch.ones(1, 1), clip_range=0.2)
    assert loss.item() == pytest.approx(want_loss, abs=1e-6) and frac.item() == float(clipped)


def test_value_loss_is_clipped_around_the_old_value():
    # V = 1.0, old V = 0.5, R = 2, clip 0.2: (1 - 2)^2 = 1; V clipped to 0.7: (0.7 - 2)^2 = 1.69 -> 0.5 * 1.69
    loss = value_loss(torch.tensor([[1.0]]), torch.tensor([[0.5]]), torch.tensor([[2.0]]), torch.ones(1, 1), 0.2)
    assert loss.item() == pytest.approx(0.845)


def test_kl_is_the_sum_over_real_response_tokens():
    logp = torch.tensor([[-1.0, -2.0, -9.0]])
    ref = torch.tensor([[-1.5, -1.0, -0.1]])
    assert sequence_kl(logp, ref, torch.tensor([[1.0, 1.0, 0.0]])).item() == pytest.approx(0.5 - 1.0)


def test_kl_after_an_update_is_never_negative_where_k1_is():
    """kl_after (issue 16): k1 on the old samples, sum(logp - ref), goes negative when the updated policy puts
    less mass than the reference on the sampled tokens; the importance-weighted k3 cannot."""
    import math

    half, quarter = math.log(0.5), math.log(0.25)
    mask = torch.tensor([[1.0, 1.0, 0.0]])
    new = torch.tensor([[quarter, half, 0.0]])  # the update lowered token 1 from 0.5 (old) to 0.25
    old = torch.tensor([[half, half, 0.0]])
    ref = torch.tensor([[half, quarter, 0.0]])
    assert sequence_kl(new, ref, mask).item() == pytest.approx(quarter - half + half - quarter)  # k1: 0 here ...
    assert sequence_kl(new, torch.tensor([[half, half, 0.0]]), mask).item() < 0  # ... and below 0 here
    # token 1: rho = 0.5 / 0.25 = 2, k3 = 2 - 1 - ln 2 = 0.3069, weight 0.25 / 0.5; token 2: rho = 0.5, weight 1,
    # k3 = 0.5 - 1 + ln 2 = 0.1931; the padded token counts nothing
    want = 0.5 * (1 - math.log(2)) + (math.log(2) - 0.5)
    assert kl_k3(new, old, ref, mask).item() == pytest.approx(want, abs=1e-6)
    assert kl_k3(new, old, new, mask).item() == 0.0  # the policy is the reference: exactly 0
    assert kl_k3(new, old, torch.tensor([[half, half, 0.0]]), mask).item() >= 0


def test_reward_goes_on_the_last_real_token_whatever_the_padding():
    mask = torch.tensor([[1.0, 1.0, 0.0], [1.0, 1.0, 1.0]])
    r = token_rewards(torch.tensor([2.0, 3.0]), torch.full((2, 3), 0.1), 0.5, mask)
    assert r[0].tolist() == pytest.approx([-0.05, 1.95, 0.0]) and r[1].tolist() == pytest.approx([-0.05, -0.05, 2.95])


def test_whiten_and_adaptive_kl():
    x = torch.tensor([[1.0, 3.0, 100.0]])
    w = masked_whiten(x, torch.tensor([[1.0, 1.0, 0.0]]))
    assert w[0].tolist() == pytest.approx([-1.0, 1.0, 0.0], abs=1e-4)
    ctl = AdaptiveKL(0.1, target=6.0, horizon=100)
    assert ctl.update(12.0, 10) == pytest.approx(0.1 * (1 + 0.2 * 10 / 100))  # error capped at +20%
    assert AdaptiveKL(0.1).update(50.0, 10) == 0.1  # no target: fixed
