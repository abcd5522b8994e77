"""Tests for the arithmetic world (rleif_kit.worlds.arith.problems): generation, rendering and verification."""
import json
import random
from collections import Counter

import pytest

from rleif_kit.worlds.arith.problems import (
    Op, Problem, extract_answer, format_solution, generate_problems, generate_splits,
    parse_steps, question_numbers, random_problem, verify_solution,
)

# Tom has 5 apples; +3 -> 8; -2 -> 6; *3 ("triples") -> 18; /2 ("half") -> 9.
TOM = Problem("fruit", "Tom", "apples", 5,
              (Op("add", 3, 0), Op("sub", 2, 1), Op("mul", 3, 3), Op("div", 2, 1)), 0, 0)
TOM_SOLUTION = ("Step 1: 5 + 3 = 8. Step 2: 8 - 2 = 6. Step 3: 6 * 3 = 18. "
                "Step 4: 18 / 2 = 9. The answer is: 9")


def test_hand_worked_problem():
    q = TOM.question()
    assert q.startswith("Tom has 5 apples. ")
    assert "triples" in q and "half" in q and q.endswith("How many apples does Tom have now?")
    assert TOM.step_values() == [(5, "+", 3, 8), (8, "-", 2, 6), (6, "*", 3, 18), (18, "/", 2, 9)]
    assert TOM.answer() == 9
    assert TOM.solution() == TOM_SOLUTION
    # 5, 3, 2 written out; 3 from "triples", 2 from "half"
    assert sorted(question_numbers(q)) == [2, 2, 3, 3, 5]
    assert verify_solution(q, TOM.solution(), 9).all_ok


def test_pronouns_follow_the_name():
    anna = Problem("money", "Anna", "coins", 4, (Op("add", 2, 0),), 0, 0)
    assert "Then she " in anna.question()
    stranger = Problem("money", "Quinn", "coins", 4, (Op("add", 2, 0),), 0, 0)
    assert "Then Quinn " in stranger.question()  # unknown name: repeated, never "he"/"she"


def test_implicit_template_rejects_values_it_cannot_express():
    with pytest.raises(ValueError):  # "doubles"/"triples" cannot say 4
        Problem("fruit", "Tom", "apples", 5, (Op("mul", 4, 3),), 0, 0).question()


def test_generate_problems_deterministic():
    a, b = generate_problems(50, seed=7), generate_problems(50, seed=7)
    assert a == b
    assert a != generate_problems(50, seed=8)
    assert a[0]["id"] == "arith-000000" and a[49]["id"] == "arith-000049"
    assert generate_problems(2, 7, prefix="x")[1]["id"] == "x-000001"


def test_generated_solutions_verify_and_respect_ranges():
    for rec in generate_problems(2000, seed=1, max_steps=4):
        v = verify_solution(rec["question"], rec["solution"], rec["answer"])
        assert v.all_ok, (rec["question"], rec["solution"], v)
        p = Problem.from_record(rec)
        assert 2 <= p.start <= 20 and rec["n_steps"] == len(p.ops)
        for a, sym, b, c in p.step_values():
            assert 0 <= c <= 999
            assert (2 <= b <= 5) if sym in "*/" else (1 <= b <= 20)


def test_splits_disjoint():
    train, held = generate_splits(300, 100, seed=3)
    assert len(train) == 300 and len(held) == 100
    assert train[0]["id"] == "arith-train-000000" and held[0]["id"] == "arith-heldout-000000"
    assert not {r["question"] for r in held} & {r["question"] for r in train}
    assert generate_splits(300, 100, seed=3) == (train, held)


def test_record_round_trip_through_json():
    for rec in generate_problems(100, seed=5):
        rec2 = json.loads(json.dumps(rec))
        p = Problem.from_record(rec2)
        assert p.question() == rec["question"] and p.solution() == rec["solution"]
        assert Problem.from_record(rec2["problem"]) == p
        assert p.to_record(rec["id"]) == rec


def test_verifier_catches_errors():
    q = "Tom has 3 apples. He buys 5 more apples. Then he eats 2 apples. How many now?"
    good = "Step 1: 3 + 5 = 8. Step 2: 8 - 2 = 6. The answer is: 6"
    assert verify_solution(q, good, 6).all_ok
    # wrong arithmetic: 3 + 5 is 8, not 9; step 2 uses the claimed 9 consistently (9 - 2 = 7)
    v = verify_solution(q, "Step 1: 3 + 5 = 9. Step 2: 9 - 2 = 7. The answer is: 7", 6)
    assert v.step_ok == [False, True] and v.step_reasons[0] == "arithmetic: 3 + 5 != 9"
    assert not v.answer_ok and not v.all_ok
    # operand 7 appears nowhere: 8 - 7 = 1 is right arithmetic but unsupported
    v = verify_solution(q, "Step 1: 3 + 5 = 8. Step 2: 8 - 7 = 1. The answer is: 1", 6)
    assert v.step_ok == [True, False]
    assert v.step_reasons[1] == "operand 7 not in problem or earlier steps"
    # right steps, wrong final answer (8 instead of 6)
    v = verify_solution(q, "Step 1: 3 + 5 = 8. Step 2: 8 - 2 = 6. The answer is: 8", 6)
    assert v.step_ok == [True, True] and v.answer == "8" and not v.answer_ok
    # missing answer line
    v = verify_solution(q, "Step 1: 3 + 5 = 8. Step 2: 8 - 2 = 6.", 6)
    assert v.answer is None and not v.answer_ok and not v.all_ok
    # unparseable step; its 8 is never established, so step 2 cannot use it either
    v = verify_solution(q, "Step 1: 3 plus 5 is 8. Step 2: 8 - 2 = 6. The answer is: 6", 6)
    assert v.step_reasons == ["unparseable step", "operand 8 not in problem or earlier steps"]
    assert v.answer_ok and not v.all_ok
    # inexact division: 7 / 2 is not an integer
    v = verify_solution("Sam has 7 pens and 2 bags.", "Step 1: 7 / 2 = 3. The answer is: 3", 3)
    assert v.step_reasons == ["division not exact: 7 / 2"]


def test_verifier_without_step_markers_is_one_failed_step():
    v = verify_solution("Tom has 3 apples and buys 5.", "3 and 5 make 8. The answer is: 8", "8")
    assert v.step_ok == [False] and v.step_reasons == ["unparseable step"]
    assert v.answer_ok and not v.all_ok


def test_gold_given_as_string():
    q = "Tom has 1,000 apples. He buys 5 more apples."
    assert question_numbers(q) == [1000, 5]
    assert verify_solution(q, "Step 1: 1,000 + 5 = 1005. The answer is: 1,005.", "1005").all_ok


def test_extract_answer_tricky_strings():
    assert extract_answer("The answer is: 1,000.") == "1000"
    assert extract_answer("so The answer is: 6.") == "6"
    assert extract_answer("The answer is: 5\nThe answer is: 7 apples") == "7"  # last one wins
    assert extract_answer("The answer is: $12 in total") == "12"
    assert extract_answer("The answer is: 2.50") == "2.5"
    assert extract_answer("The answer is: -3") == "-3"
    assert extract_answer("I think it is 6") is None
    assert extract_answer("The answer is: unknown") is None


def test_parse_steps_and_format_solution():
    text = format_solution([(3, "+", 5, 8), (8, "-", 2, 6)], 6)
    assert text == "Step 1: 3 + 5 = 8. Step 2: 8 - 2 = 6. The answer is: 6"
    assert parse_steps(text) == ["Step 1: 3 + 5 = 8.", "Step 2: 8 - 2 = 6."]
    assert parse_steps("no steps here. The answer is: 6") == []
    assert " ".join(parse_steps(TOM_SOLUTION)) + " The answer is: 9" == TOM_SOLUTION


def test_question_numbers_implicit_words():
    # "doubles" -> 2, "twice" -> 2, "half" -> 2, "triple" -> 3, "dozen" -> 12
    q = "Ann has 4 cats. She doubles them, twice. Half run. A triple. A dozen eggs."
    assert question_numbers(q) == [4, 2, 2, 2, 3, 12]


def test_diversity_and_step_distribution():
    recs = generate_problems(500, seed=11, max_steps=3)
    assert len({r["question"] for r in recs}) >= 450
    assert len({r["topic"] for r in recs}) >= 8
    assert set(Counter(r["n_steps"] for r in recs)) == {1, 2, 3}
    kinds = Counter(op.kind for r in recs for op in Problem.from_record(r).ops)
    assert set(kinds) == {"add", "sub", "mul", "div"}


def test_random_problem_respects_step_bounds():
    rng = random.Random(0)
    counts = {len(random_problem(rng, min_steps=2, max_steps=5).ops) for _ in range(300)}
    assert counts == {2, 3, 4, 5}
