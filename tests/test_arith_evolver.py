"""The programmatic arithmetic evolver (rleif_kit.worlds.arith.evolver): directions, validity, defects.

In-memory, seeded, no network. Elimination (rleif_kit.evolve.elimination) is used as the engine uses
it, to check that the defects it should catch are caught and the others slip through.
"""
from __future__ import annotations

import math
import random
from collections import Counter
from dataclasses import fields

import pytest

from rleif_kit.worlds.arith import problems as arith
from rleif_kit.worlds.arith.problems import Op, Problem
from rleif_kit.worlds.arith.evolver import (
    DOWN_OPERATORS, UP_OPERATORS, DefectRates, Evolved, evolve_arith,
)
from rleif_kit.evolve.elimination import elimination_reason

OPERATORS = UP_OPERATORS + DOWN_OPERATORS
DEFECTS = tuple(f.name for f in fields(DefectRates))
CLEAN = DefectRates.none()
# Tom has 5 apples; +3 -> 8; -2 -> 6.
TOM = Problem("fruit", "Tom", "apples", 5, (Op("add", 3, 0), Op("sub", 2, 0)), 0, 0)


def problems(n: int, seed: int, max_steps: int = 5) -> list[Problem]:
    rng = random.Random(seed)
    return [arith.random_problem(rng, 1, max_steps) for _ in range(n)]


def child_of(ev: Evolved) -> Problem:
    return Problem.from_record(ev.problem)


def total(p: Problem) -> int:
    """Sum of the numbers a problem states: the "smaller numbers" measure of simplify."""
    return p.start + sum(op.value for op in p.ops)


def hard_ops(p: Problem) -> int:
    return sum(op.kind in ("mul", "div") for op in p.ops)


# ------------------------------------------------------------------------------ directions

@pytest.mark.parametrize("operator", ["more_steps", "add_constraint", "deepen"])
def test_upward_operators_never_lose_steps(operator):
    rng = random.Random(1)
    for p in problems(300, seed=2):
        child = child_of(evolve_arith(p, operator, rng, rates=CLEAN))
        assert len(child.ops) >= len(p.ops) and child.question() != p.question()
        if operator != "deepen" and len(p.ops) < 5:  # room left: exactly one more step
            assert len(child.ops) == len(p.ops) + 1


def test_deepen_mostly_adds_a_multiplication_or_division():
    rng = random.Random(3)
    parents = problems(300, seed=4)
    deeper = sum(hard_ops(child_of(evolve_arith(p, "deepen", rng, rates=CLEAN))) > hard_ops(p)
                 for p in parents)
    assert deeper >= 0.9 * len(parents)  # the rest: a later step had to be resampled


def test_at_max_steps_more_steps_makes_a_step_harder():
    # Tom: 5 + 3 = 8, 8 - 2 = 6; at max_steps=2 one of the two steps becomes * or /.
    child = child_of(evolve_arith(TOM, "more_steps", random.Random(0), rates=CLEAN, max_steps=2))
    assert len(child.ops) == 2 and hard_ops(child) >= 1


def test_concretize_keeps_the_steps_and_changes_the_text():
    rng = random.Random(5)
    for p in problems(300, seed=6):
        child = child_of(evolve_arith(p, "concretize", rng, rates=CLEAN))
        assert len(child.ops) == len(p.ops) and child.question() != p.question()
        assert child.topic == p.topic


def test_simplify_drops_a_step_or_shrinks_the_numbers():
    rng = random.Random(7)
    parents = problems(300, seed=8)
    for p in parents:
        child = child_of(evolve_arith(p, "simplify", rng, rates=CLEAN))
        assert len(child.ops) < len(p.ops) or (len(child.ops) == len(p.ops) == 1
                                               and total(child) < total(p)), (p, child)
    # at min_steps only numbers can shrink: 5 + 3 = 8 becomes e.g. 4 + 2
    child = child_of(evolve_arith(TOM, "simplify", rng, rates=CLEAN, min_steps=2))
    assert len(child.ops) == 2 and total(child) < total(TOM)


def test_simplify_of_a_minimal_problem_still_returns_a_valid_problem():
    minimal = Problem("fruit", "Tom", "apples", 2, (Op("sub", 1, 0),), 0, 0)  # 2 - 1 = 1
    ev = evolve_arith(minimal, "simplify", random.Random(0), rates=CLEAN)
    child = child_of(ev)
    assert len(child.ops) == 1 and total(child) == total(minimal) and ev.text != minimal.question()


def test_new_topic_is_another_topic_with_at_most_the_parents_steps():
    rng = random.Random(9)
    for p in problems(300, seed=10):
        child = child_of(evolve_arith(p, "new_topic", rng, rates=CLEAN))
        assert child.topic != p.topic and 1 <= len(child.ops) <= len(p.ops)


# ------------------------------------------------------------------------- clean evolutions

def test_clean_evolutions_are_valid_solvable_and_pass_elimination():
    rng = random.Random(11)
    accepted = 0
    for _ in range(500):
        p = arith.random_problem(rng, 1, 5)
        ev = evolve_arith(p, rng.choice(OPERATORS), rng, rates=CLEAN)
        child = child_of(ev)
        assert ev.defect is None and ev.finish_reason == "stop"
        assert ev.text == child.question() and ev.answer == child.solution()
        assert arith.verify_solution(ev.text, ev.answer, child.answer()).all_ok, ev
        assert 1 <= len(child.ops) <= 5
        assert all(0 <= c <= arith.MAX_VALUE for *_, c in child.step_values())
        accepted += elimination_reason(p.question(), ev.text) is None
    assert accepted >= 0.95 * 500, accepted


# ---------------------------------------------------------------------------------- defects

CAUGHT_AS = {"leaked_template": "leaked_template", "malformed": "unparseable",
             "refusal": "refusal", "no_change": "no_new_information",
             "unsolvable": None, "ambiguous": None}  # these two look fine: the IRM's job


@pytest.mark.parametrize("defect", DEFECTS)
def test_each_defect_is_produced_and_elimination_sees_what_it_should(defect):
    rng, rates = random.Random(12), DefectRates.only(defect)
    seen = Counter()
    for _ in range(200):
        p = arith.random_problem(rng, 1, 5)
        ev = evolve_arith(p, rng.choice(OPERATORS), rng, rates=rates)
        assert ev.defect == defect
        reason = elimination_reason(p.question(), ev.text, finish_reason=ev.finish_reason)
        assert reason == CAUGHT_AS[defect], (p.question(), ev)
        seen[ev.finish_reason] += 1
        check_defect_fields(p, ev)
    if defect == "malformed":  # both kinds occur: truncated and garbled
        assert seen["length"] > 0 and seen["stop"] > 0


def check_defect_fields(parent: Problem, ev: Evolved) -> None:
    """problem/answer follow the Evolved contract for each defect."""
    if ev.defect in ("malformed", "refusal"):
        assert ev.problem is None and ev.answer is None
        return
    child = child_of(ev)
    if ev.defect in ("leaked_template", "no_change"):  # the problem itself is fine
        assert arith.verify_solution(ev.text, ev.answer, child.answer()).all_ok
    if ev.defect == "no_change":
        assert child == parent
    if ev.defect in ("unsolvable", "ambiguous"):  # no correct answer for the text as written
        assert ev.answer is None and ev.text != child.question()
    if ev.defect == "unsolvable":
        assert any(w in ev.text.lower() for w in ("some", "a few", "several"))
        assert len(arith.question_numbers(ev.text)) == len(arith.question_numbers(
            child.question())) - 1


def test_unsolvable_and_ambiguous_examples():
    # 5 + 3 = 8, 8 - 2 = 6 rendered, then one defect on the same structure
    un = evolve_arith(TOM, "concretize", random.Random(0), rates=DefectRates.only("unsolvable"))
    assert un.answer is None and len(arith.question_numbers(un.text)) < len(
        arith.question_numbers(child_of(un).question()))
    texts = {evolve_arith(TOM, "concretize", random.Random(s),
                          rates=DefectRates.only("ambiguous")).text for s in range(30)}
    names = set(arith.HE_NAMES + arith.SHE_NAMES)
    # some ask about someone else, some state two different starting amounts
    assert any(len({w.strip("?.'s") for w in t.split()} & names) > 1 for t in texts)


def test_defect_frequencies_match_the_rates():
    rates, n = DefectRates(), 2000
    rng = random.Random(13)
    counts = Counter()
    for _ in range(n):
        counts[evolve_arith(arith.random_problem(rng, 1, 5), rng.choice(OPERATORS), rng,
                            rates=rates).defect] += 1
    for name in DEFECTS:
        p = getattr(rates, name)
        # Binomial(n, p): sd = sqrt(p(1-p)/n), e.g. p=0.05 -> 0.0049; 4 sd (two-sided
        # p ~ 6e-5 per defect, ~4e-4 for all six) keeps a correct sampler from failing.
        tol = 4 * math.sqrt(p * (1 - p) / n)
        assert abs(counts[name] / n - p) <= tol, (name, counts[name], p)
    assert counts[None] / n == pytest.approx(1 - sum(getattr(rates, d) for d in DEFECTS),
                                             abs=4 * math.sqrt(0.19 * 0.81 / n))


def test_deterministic_for_a_seeded_rng():
    def run(seed: int) -> list[Evolved]:
        rng = random.Random(seed)
        return [evolve_arith(p, OPERATORS[i % 6], rng, rates=DefectRates(unsolvable=0.3))
                for i, p in enumerate(problems(100, seed=14))]
    assert run(0) == run(0)
    assert run(0) != run(1)


def test_bad_arguments_are_rejected():
    with pytest.raises(ValueError, match="unknown operator"):
        evolve_arith(TOM, "harder", random.Random(0))
    with pytest.raises(ValueError, match="sum to"):
        DefectRates(malformed=1.0)  # the other defaults make the total 1.16
    with pytest.raises(ValueError, match="refusal"):
        DefectRates(refusal=-0.1)
