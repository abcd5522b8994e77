"""PRM aggregation (rleif_kit.rewards.reward) and IRM pair building (rleif_kit.rewards.irm_data): hand-worked values, no model."""

from __future__ import annotations

import pytest

from rleif_kit.rewards.reward import aggregate_steps
from rleif_kit.rewards.irm_data import balance_pairs, ranking_to_pairs


@pytest.mark.parametrize("how, expected", [
    ("min", 0.5),                    # the worst step
    ("prod", 0.36),                  # 0.9 * 0.5 * 0.8 = 0.45 * 0.8 = 0.36
    ("last", 0.8),
    ("mean", 2.2 / 3),               # (0.9 + 0.5 + 0.8) / 3 = 2.2 / 3 = 0.7333
])
def test_aggregations_on_hand_values(how, expected):
    assert aggregate_steps([0.9, 0.5, 0.8], how) == pytest.approx(expected)


def test_min_is_the_default_and_one_step_is_itself():
    assert aggregate_steps([0.9, 0.2, 0.7]) == 0.2
    for how in ("min", "prod", "last", "mean"):
        assert aggregate_steps([0.6], how) == pytest.approx(0.6)


def test_min_cannot_be_averaged_away():
    # one wrong step among nine sure ones: mean = (9 * 1.0 + 0.0) / 10 = 0.9, min = 0.0
    scores = [1.0] * 9 + [0.0]
    assert aggregate_steps(scores, "mean") == pytest.approx(0.9)
    assert aggregate_steps(scores, "min") == 0.0


@pytest.mark.parametrize("how", ["min", "prod", "last", "mean"])
def test_empty_scores_are_an_error(how):
    with pytest.raises(ValueError, match="flagged"):
        aggregate_steps([], how)


def test_unknown_aggregation_is_an_error():
    with pytest.raises(ValueError, match="unknown aggregation 'max'"):
        aggregate_steps([0.5], "max")


def test_ranking_of_four_gives_six_pairs():
    # k = 4: 4 * 3 / 2 = 6 pairs, each (better, worse):
    # (b,a) (b,d) (b,c) (a,d) (a,c) (d,c)
    assert ranking_to_pairs(["b", "a", "d", "c"]) == [
        ("b", "a"), ("b", "d"), ("b", "c"), ("a", "d"), ("a", "c"), ("d", "c")]


@pytest.mark.parametrize("k", [0, 1, 2, 3, 5])
def test_pair_count_is_k_choose_2(k):
    assert len(ranking_to_pairs([str(i) for i in range(k)])) == k * (k - 1) // 2


def test_ranking_with_a_repeated_id_is_an_error():
    with pytest.raises(ValueError, match="repeats"):
        ranking_to_pairs(["a", "b", "a"])


def _pairs(op: str, n: int) -> list[dict]:
    return [{"chosen_id": f"{op}{i}", "rejected_id": f"r{i}", "operator": op} for i in range(n)]


def test_balance_caps_each_operator_at_twice_the_smallest():
    # groups: deepen 10, concretize 3, add_steps 5 -> smallest 3, cap 2 * 3 = 6
    # kept: deepen 6 (down-sampled), concretize 3, add_steps 5 -> 14 of 18
    pairs = _pairs("deepen", 10) + _pairs("concretize", 3) + _pairs("add_steps", 5)
    out = balance_pairs(pairs)
    counts = {op: sum(p["operator"] == op for p in out) for op in ("deepen", "concretize", "add_steps")}
    assert counts == {"deepen": 6, "concretize": 3, "add_steps": 5}
    assert len(out) == 14


def test_balance_dedupes_before_counting():
    # 4 deepen pairs, one listed three times -> 4 unique; concretize 2 unique -> cap 4, nothing cut
    pairs = _pairs("deepen", 4) + _pairs("deepen", 1) * 2 + _pairs("concretize", 2)
    out = balance_pairs(pairs)
    assert len(out) == 6  # 4 + 2
    assert len({(p["chosen_id"], p["rejected_id"]) for p in out}) == 6


def test_balance_is_seeded_and_keeps_input_order():
    pairs = _pairs("deepen", 20) + _pairs("concretize", 2)  # cap 4: deepen 20 -> 4
    a, b = balance_pairs(pairs, seed=3), balance_pairs(pairs, seed=3)
    assert a == b and len(a) == 6  # 4 + 2
    assert a == [p for p in pairs if p in a]  # a subsequence of the input
    others = [balance_pairs(pairs, seed=s) for s in range(10)]
    assert any(o != a for o in others)  # the seed decides the sample


def test_balance_by_another_key_and_empty_input():
    pairs = [{"chosen_id": f"c{i}", "rejected_id": "r", "topic": "money" if i < 5 else "fruit"}
             for i in range(6)]  # money 5, fruit 1 -> cap 2: money 2 + fruit 1 = 3
    assert len(balance_pairs(pairs, key="topic")) == 3
    assert balance_pairs([]) == []
