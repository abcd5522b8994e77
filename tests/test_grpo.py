"""``[ppo] algorithm = "grpo"`` without training: what the kit hands TRL's GRPOTrainer beside r (each term's mean
through its ``log_metric``, each response's terms through its ``log_extra``), and the step-level credit GRPO cannot
take, refused when the config loads. Pure: no model, no network. GRPO on the tiny model: tests/test_ppo.py."""

from __future__ import annotations

import pytest

from conftest import ROOT, TINY_PARAMS, tiny_overrides
from rleif_kit.core.config import ConfigError, load_config


class _Scorer:
    """Two responses' terms, as RewardScorer returns them for formula rI * rA * rV * rF."""

    def __call__(self, records, responses):
        return {"rI": [0.5, 1.0], "rA": [0.25, 0.75], "rV": [1.0, 0.0], "rV_missing": [False, True],
                "rF": [1.0, 1.0], "reward": [0.125, 0.0], "correct": [True, None]}


def test_each_terms_mean_reaches_trls_log_and_each_responses_terms_its_completions_table():
    from rleif_kit.ppo.grpo import RLEIFReward

    metrics, extra = [], {}
    reward = RLEIFReward(_Scorer(), {"p1": {"id": "a"}, "p2": {"id": "b"}})
    out = reward(["p1", "p2"], ["x", "y"], log_metric=lambda name, value: metrics.append((name, value)),
                 log_extra=lambda column, values: extra.setdefault(column, []).extend(values))
    assert out == [0.125, 0.0]
    # by hand: rI (0.5 + 1) / 2, rA (0.25 + 0.75) / 2, one rA of two below 0.5, one judged response and it is
    # right, rV (1 + 0) / 2 with one of two unjudged, rF 1
    assert dict(metrics) == {"rI_mean": 0.75, "rA_mean": 0.5, "low_rA_share": 0.5, "right_share": 1.0,
                             "rV_mean": 0.5, "rV_missing_share": 0.5, "rF_mean": 1.0}
    assert extra == {"rI": [0.5, 1.0], "rA": [0.25, 0.75], "rV": [1.0, 0.0], "rF": [1.0, 1.0]}
    assert reward.drain() == dict(metrics)  # the kit's own log row: the same figures over the calls since the last
    assert reward(["p1", "p2"], ["x", "y"]) == [0.125, 0.0]  # called without TRL's loggers (an older TRL): r alone


def _tiny(tmp_path, *extra):
    return load_config(TINY_PARAMS, tiny_overrides(tmp_path / "run", *extra), workdir=ROOT)


def test_step_level_credit_with_grpo_is_one_line_naming_why_and_what_instead(tmp_path):
    assert _errors_of(tmp_path, 'ppo.algorithm="grpo"', 'ppo.reward_granularity="step"') == [
        f"{TINY_PARAMS}: [ppo] reward_granularity = 'step': TRL's GRPO gives each completion one advantage, and the "
        "step credits sum to the solution's r; use algorithm = 'ppo' for step-level credit, or reward_granularity = "
        "'solution' with GRPO"]
    assert _tiny(tmp_path, 'ppo.algorithm="grpo"', 'ppo.reward_granularity="solution"').ppo.algorithm == "grpo"
    assert _tiny(tmp_path, 'ppo.reward_granularity="step"').ppo.reward_granularity == "step"  # our PPO loop takes it
    # a formula without rA has nothing to split: that one line alone, not both
    errors = _errors_of(tmp_path, 'ppo.algorithm="grpo"', 'ppo.reward_granularity="step"', 'ppo.reward_formula="rI"')
    assert len(errors) == 1 and "has no rA to split" in errors[0]


def _errors_of(tmp_path, *extra) -> list[str]:
    with pytest.raises(ConfigError) as info:
        _tiny(tmp_path, *extra)
    return info.value.errors
