"""Issue 32: the PPO log's per-phase timing and the update diagnostics RL practitioners expect (approx_kl,
clip fraction, explained variance), with hand-worked values."""

from __future__ import annotations

import math
import time

import pytest
import torch

from rleif_kit.ppo import ppo_math as pm
from rleif_kit.ppo.trainer import PhaseTimer, rollout_fields


def test_approx_kl_is_ratio_minus_one_minus_log_ratio_over_the_response_tokens():
    logp = torch.tensor([[math.log(0.5), math.log(0.9)]])
    old = torch.tensor([[math.log(0.25), math.log(0.1)]])
    mask = torch.tensor([[1.0, 0.0]])  # the second token is padding: it must not count
    assert pm.approx_kl(logp, old, mask).item() == pytest.approx(2 - 1 - math.log(2))  # 0.3069
    assert pm.approx_kl(old, old, mask).item() == 0.0  # the policy did not move


def test_explained_variance_is_one_for_a_perfect_value_head_zero_for_the_mean_negative_when_worse():
    returns, mask = torch.tensor([[1.0, 2.0, 3.0, 99.0]]), torch.tensor([[1.0, 1.0, 1.0, 0.0]])
    assert pm.explained_variance(torch.tensor([[1.0, 2.0, 3.0, 0.0]]), returns, mask) == pytest.approx(1.0)
    assert pm.explained_variance(torch.tensor([[2.0, 2.0, 2.0, 0.0]]), returns, mask) == pytest.approx(0.0)
    # residuals -2, 0, 2: variance 8/3 against the returns' 2/3 -> 1 - 4 = -3
    assert pm.explained_variance(torch.tensor([[3.0, 2.0, 1.0, 0.0]]), returns, mask) == pytest.approx(-3.0)
    assert math.isnan(pm.explained_variance(torch.zeros(1, 3), torch.ones(1, 3), torch.ones(1, 3)))


def test_the_phase_timer_adds_a_phase_entered_twice_and_refuses_an_unknown_one():
    timer = PhaseTimer()
    for _ in range(2):
        with timer("generate"):
            time.sleep(0.02)
    with timer("update"):
        pass
    fields = timer.fields()
    assert set(fields) == {"generate_s", "update_s"} and fields["generate_s"] >= 0.04
    with pytest.raises(ValueError, match="unknown PPO phase 'sampling'"):
        with timer("sampling"):
            pass


def test_rollout_fields_are_tokens_per_second_and_computed_per_real_token():
    # 3 sequences of width 10 (30 computed), 24 real tokens; 12 response tokens in 4 s
    assert rollout_fields(12, 4.0, 30, 24) == {"gen_tokens_per_s": 3.0, "pad_ratio": 1.25}
    assert rollout_fields(0, 0.0, 0, 0) == {"gen_tokens_per_s": None, "pad_ratio": None}


def test_the_phase_and_update_figures_draw_a_log_with_and_without_timings():
    from rleif_kit.core.plots import plot_ppo_phases, plot_update_diagnostics

    log = [{"step": s, "step_s": 3.0, "generate_s": 0.5, "policy_pass_s": 0.2, "ref_pass_s": 0.2, "reward_s": 0.3,
            "update_s": 1.6, "checkpoint_s": 0.0, "gen_tokens_per_s": 4000.0, "pad_ratio": 1.3, "approx_kl": 1e-3,
            "clip_frac": 0.05, "explained_variance": 0.2} for s in range(3)]
    fig = plot_ppo_phases(log)
    title = fig.axes[0].get_title()
    assert "median step 3.00 s" in title and "4,000 generated tokens/s" in title and "1.30 tokens" in title
    bars = [p for p in fig.axes[0].patches]
    assert len(bars) == 3 * 7  # six phases and "other" per step
    assert plot_ppo_phases([{"step": 0, "reward_mean": 0.1}]).axes[0].texts[0].get_text() == \
        "this log has no per-phase timings"
    assert len(plot_update_diagnostics(log).axes) == 3


def test_stage_05_records_the_value_heads_verdict_between_the_gate_and_the_ab(tiny_cfg, monkeypatch):
    """run_ppo builds 05's verdicts (what the notebook records and the report shows): the value head's explained
    variance from the loop's log is one of them; GRPO's log, without the figure, adds none."""
    import rleif_kit.ppo.stage as stage
    from rleif_kit.core.verdict import Verdict
    from rleif_kit.ppo.trainer import PPOResult

    cfg, paths = tiny_cfg(stage="05_ppo")
    log = [{"step": i, "explained_variance": -0.5} for i in range(5)]  # the last fifth: -0.5, below -0.1
    gate = [Verdict("low_ra_share", "ok")]
    for name in ("check_can_start", "load_policy", "RewardScorer", "instruction_pool"):
        monkeypatch.setattr(stage, name, lambda *a, **k: [])
    monkeypatch.setattr(stage, "train", lambda *a, **k: (None, PPOResult(steps=5, log=log, gate=gate)))
    ran = stage.run_ppo(cfg, paths, gate=gate, evaluate=False, export_model=False, progress=False)
    assert [v.check for v in ran.verdicts] == ["low_ra_share", "value_head"]
    assert ran.value.status == "warn" and ran.value.source == "05_ppo/log.jsonl"
    monkeypatch.setattr(stage, "train", lambda *a, **k: (None, PPOResult(steps=5, log=[{"step": 0}], gate=gate)))
    assert stage.run_ppo(cfg, paths, gate=gate, evaluate=False, export_model=False, progress=False).value is None
