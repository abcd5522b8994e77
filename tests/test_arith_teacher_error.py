"""The tiny preset's systematic teacher error ([arith] teacher_early_stop): hand-worked solutions, the share
it touches, and that the step verifier (PPO's healthy rA) punishes it."""

from __future__ import annotations

import pytest

from conftest import TINY_PARAMS
from rleif_kit.worlds.arith import problems as arith
from rleif_kit.core.config import ConfigError, load_config
from rleif_kit.worlds.arith.judge import verifier_labels
from rleif_kit.worlds.arith.world import WORLD as ARITH

teacher_solutions = ARITH.teacher_solutions

PROBLEM = arith.Problem("fruit", "Tom", "apples", 5,
                        (arith.Op("add", 3, 0), arith.Op("sub", 2, 0), arith.Op("mul", 2, 2)), 0, 0)


def test_early_stop_solution_answers_the_intermediate_result():
    assert PROBLEM.solution() == "Step 1: 5 + 3 = 8. Step 2: 8 - 2 = 6. Step 3: 6 * 2 = 12. The answer is: 12"
    assert PROBLEM.early_stop_solution() == "Step 1: 5 + 3 = 8. Step 2: 8 - 2 = 6. The answer is: 6"
    one_step = arith.Problem("fruit", "Tom", "apples", 5, (arith.Op("add", 3, 0),), 0, 0)
    assert one_step.early_stop_solution() == "The answer is: 5"


def test_the_verifier_scores_an_early_stop_zero():
    """Every step it writes is right, so only the final-answer check can catch it: the last step is marked wrong."""
    assert verifier_labels(PROBLEM.question(), PROBLEM.solution(), 12) == [True, True, True]
    assert verifier_labels(PROBLEM.question(), PROBLEM.early_stop_solution(), 12) == [True, False]


def _cfg(*overrides: str):
    return load_config(TINY_PARAMS, list(overrides))


def test_teacher_errors_touch_only_the_seeded_share_of_longest_problems():
    train = arith.generate_problems(3000, seed=7, min_steps=1, max_steps=3, max_operand=9)
    cfg = _cfg("arith.teacher_early_stop=0.6")
    got = teacher_solutions(cfg, train)
    assert got == teacher_solutions(cfg, train)  # seeded: the same rows every run
    longest = [(r, s) for r, s in zip(train, got) if r["n_steps"] == 3]
    wrong = [(r, s) for r, s in longest if s != r["solution"]]
    assert all(s == r["solution"] for r, s in zip(train, got) if r["n_steps"] < 3)
    assert 0.55 <= len(wrong) / len(longest) <= 0.65, (len(wrong), len(longest))
    for r, s in wrong:
        assert s == arith.Problem.from_record(r).early_stop_solution() and len(arith.parse_steps(s)) == 2
    assert teacher_solutions(_cfg("arith.teacher_early_stop=0.0"), train) == [r["solution"] for r in train]
    assert teacher_solutions(_cfg("arith.teacher_early_stop=1.0"), train) == [
        arith.Problem.from_record(r).early_stop_solution() if r["n_steps"] == 3 else r["solution"] for r in train]


def test_a_one_step_world_has_no_step_to_drop():
    train = arith.generate_problems(50, seed=1, min_steps=1, max_steps=1)
    cfg = _cfg("arith.teacher_early_stop=1.0", "arith.max_steps=1")
    assert teacher_solutions(cfg, train) == [r["solution"] for r in train]


@pytest.mark.parametrize("value", ["-0.1", "1.5"])
def test_the_rate_must_be_a_share(value):
    with pytest.raises(ConfigError, match="teacher_early_stop"):
        _cfg(f"arith.teacher_early_stop={value}")
