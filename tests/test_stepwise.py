"""Step parsing, format checks and normalisation on hand-written solutions. Pure, no model."""
from __future__ import annotations

import pytest

from rleif_kit.worlds.arith import problems as arith
from rleif_kit.checks.verdicts import has_step_markers
from rleif_kit.worlds.math.stepwise import (NormaliseError, ParsedSolution, answers_equal, final_answer, last_boxed,
                                normalise_gsm8k, normalise_solution, parse_solution)

CANON = "Step 1: 3 + 5 = 8. Step 2: 8 - 2 = 6. The answer is: 6"
NATALIA = ("Natalia sold 48/2 = <<48/2=24>>24 clips in May.\n"
           "Natalia sold 48+24 = <<48+24=72>>72 clips altogether in April and May.\n#### 72")
NATALIA_CANON = ("Step 1: Natalia sold 48/2 = 24 clips in May. Step 2: Natalia sold 48+24 = 72 clips "
                 "altogether in April and May. The answer is: 72")
PARAGRAPH = "She had 3 apples and bought 5 more, so 8, then ate 2 and had 6 left. The answer is: 6"

# (solution as written, its canonical form); each line of the table is one style.
CASES = [
    (CANON, CANON),
    ("Step 1: 3 + 5 = 8.\nStep 2: 8 - 2 = 6.\nThe answer is: 6", CANON),
    ("Step 1. 3 + 5 = 8\nStep 2. 8 - 2 = 6\nThe answer is: 6", CANON),
    ("step 1) 3 + 5 = 8\nstep 2) 8 - 2 = 6\nSo the answer is 6", CANON),
    ("STEP 1: 3 + 5 = 8 STEP 2: 8 - 2 = 6 The answer is: 6.", CANON),
    ("**Step 1:** 3 + 5 = 8\n**Step 2:** 8 - 2 = 6\n\nThe final answer is $6$.", CANON),
    ("Let's think step by step.\nStep 1: 3 + 5 = 8.\nStep 2: 8 - 2 = 6, so the answer is 6.", CANON),
    ("1. 3 + 5 = 8\n2. 8 - 2 = 6\n#### 6", CANON),
    ("We solve it in two moves:\n1) 3 + 5 = 8\n2) 8 - 2 = 6\nThe answer is: 6", CANON),
    ("3 + 5 = 8\n8 - 2 = 6\nThe answer is: 6", CANON),
    ("  3 + 5 = 8   \n\n\n8 - 2 = 6\t\n\nThe answer is:   6  \n\n", CANON),
    ("- 3 + 5 = 8\n- 8 - 2 = 6\nThe answer is 6", CANON),
    ("3 + 5 = 8\n8 - 2 = 6\nThe answer is 6", CANON),
    (NATALIA, NATALIA_CANON),
    ("Tom has 3 + 5 = 8 books.\nHe gives 2 away: 8 - 2 = 6.\n#### 6",
     "Step 1: Tom has 3 + 5 = 8 books. Step 2: He gives 2 away: 8 - 2 = 6. The answer is: 6"),
    ("Each box holds 250 pens.\n4 boxes hold 4 * 250 = 1,000 pens.\n#### 1,000",
     "Step 1: Each box holds 250 pens. Step 2: 4 boxes hold 4 * 250 = 1,000 pens. The answer is: 1000"),
    ("There are 2 equally likely outcomes.\nExactly 1 of them is heads.\n"
     "So the probability is $\\boxed{\\frac{1}{2}}$.",
     "Step 1: There are 2 equally likely outcomes. Step 2: Exactly 1 of them is heads. "
     "Step 3: So the probability is $\\frac{1}{2}$. The answer is: \\frac{1}{2}"),
    ("There are 2 equally likely outcomes.\nExactly 1 of them is heads.\nSo we get $\\boxed{\\frac{1}{2}}$.",
     "Step 1: There are 2 equally likely outcomes. Step 2: Exactly 1 of them is heads. "
     "The answer is: \\frac{1}{2}"),
    ("We have $$\nx^2 = 25\n$$\nand $x > 0$.\nSo $x = \\boxed{5}$.",
     "Step 1: We have $$ x^2 = 25 $$. Step 2: and $x > 0$. Step 3: So $x = 5$. The answer is: 5"),
    ("Step 1: 3 + 5 = 8. The answer is: 8", "Step 1: 3 + 5 = 8. The answer is: 8"),
    ("Step 1: Add: 3 + 5 = 8\nStep 2: Take away 2 from 8 to get 6!\nThe answer is: 6",
     "Step 1: Add: 3 + 5 = 8. Step 2: Take away 2 from 8 to get 6! The answer is: 6"),
    ("Step 1: 3 + 5 = 8. Step 2: 8 - 2 = 6. The answer is: 5. Step 3: oops, 8 - 2 = 6. The answer is: 6",
     "Step 1: 3 + 5 = 8. Step 2: 8 - 2 = 6. Step 3: oops, 8 - 2 = 6. The answer is: 6"),
]


@pytest.mark.parametrize("text,expected", CASES)
def test_normalise_solution_gives_canonical_form(text, expected):
    assert normalise_solution(text) == expected


@pytest.mark.parametrize("text,expected", CASES)
def test_canonical_form_is_a_fixed_point_and_arith_can_read_it(text, expected):
    assert normalise_solution(expected) == expected
    assert has_step_markers(expected)
    assert len(arith.parse_steps(expected)) == len(parse_solution(text).steps)


def test_arith_world_solutions_parse_as_their_steps():
    for rec in arith.generate_problems(30, seed=3):
        parsed = parse_solution(rec["solution"])
        assert parsed.style == "step_markers" and parsed.answer == str(rec["answer"])
        assert [f"Step {i}: {s}" for i, s in enumerate(parsed.steps, 1)] == arith.parse_steps(rec["solution"])
        assert normalise_solution(rec["solution"], gold=str(rec["answer"])) == rec["solution"]


@pytest.mark.parametrize("text,style,n", [
    (CANON, "step_markers", 2), ("1. 3 + 5 = 8\n2. 8 - 2 = 6", "numbered", 2),
    ("3 + 5 = 8\n8 - 2 = 6", "lines", 2), (PARAGRAPH, "single", 1), ("", "single", 0),
    ("#### 6", "single", 0),
])
def test_parse_solution_styles(text, style, n):
    parsed = parse_solution(text)
    assert (parsed.style, len(parsed.steps)) == (style, n)


def test_answer_line_is_not_a_step_and_markers_are_removed():
    assert parse_solution(CANON) == ParsedSolution(["3 + 5 = 8.", "8 - 2 = 6."], "6", "step_markers")
    assert parse_solution(NATALIA).steps[-1].endswith("April and May.")


def test_references_to_steps_and_list_numbers_out_of_order_are_text():
    text = "Step 1: 3 + 5 = 8, as in step 1. of the book.\nStep 2: 8 - 2 = 6.\nThe answer is: 6"
    assert parse_solution(text).steps == ["3 + 5 = 8, as in step 1. of the book.", "8 - 2 = 6."]
    listed = "1. Buy 3 apples.\n3. Then 5 more.\n2. Eat 2.\nThe answer is: 6"
    assert parse_solution(listed).steps == ["Buy 3 apples. 3. Then 5 more.", "Eat 2."]


@pytest.mark.parametrize("text,answer", [
    ("The answer is: 6", "6"), ("so the answer is 5.", "5"), ("The answer is: 1. The answer is: 2", "2"),
    ("x\n#### 72", "72"), ("#### 1,000", "1,000"), ("so $x=\\boxed{\\frac{1}{2}}$.", "\\frac{1}{2}"),
    ("\\boxed{1} then \\fbox{{a}+{b}}", "{a}+{b}"), ("The answer is $\\boxed{3.5}$.", "3.5"),
    ("The final answer is: \\(x+1\\)", "x+1"), ("no answer here", None), ("The answer is:", None),
    ("The answer is: 9\n#### 7", "9"), ("#### Step 2: more\nStep 3: x", None),
])
def test_final_answer(text, answer):
    assert final_answer(text) == answer


def test_last_boxed_keeps_nested_braces():
    assert last_boxed("\\boxed{1} and \\boxed{\\frac{\\sqrt{2}}{2}}") == "\\frac{\\sqrt{2}}{2}"
    assert last_boxed("$\\boxed 5$") == "5" and last_boxed("\\boxed{unclosed") is None


@pytest.mark.parametrize("text,gold,reason", [
    (PARAGRAPH, None, "no step structure"), ("One line, no answer.", None, "no final answer"),
    ("3 + 5 = 8\n8 - 2 = 6", None, "no final answer"), (CANON, "7", "answer differs from gold"),
    ("   \n ", "6", "empty text"), ("", None, "empty text"), (PARAGRAPH, "6", "no step structure"),
])
def test_normalise_solution_errors(text, gold, reason):
    with pytest.raises(NormaliseError) as err:
        normalise_solution(text, gold=gold)
    assert err.value.reason == reason and isinstance(err.value, ValueError)


def test_missing_answer_taken_from_gold_and_equal_gold_accepted():
    assert normalise_solution("3 + 5 = 8\n8 - 2 = 6", gold="6") == CANON
    assert normalise_solution("Step 1: 3 + 5 = 8. Step 2: 8 - 2 = 6. The answer is:", gold="6") == CANON
    assert normalise_solution(CANON, gold="6.0") == CANON
    with_units = "3 + 5 = 8\n8 - 2 = 6\nThe answer is 6 apples."
    assert normalise_solution(with_units, gold="6").endswith("The answer is: 6 apples")


def test_normalise_gsm8k():
    assert normalise_gsm8k(NATALIA) == NATALIA_CANON
    assert normalise_gsm8k("She pays 1,000 + 200 = <<1000+200=1200>>1,200 dollars.\n#### 1,200") == \
        "Step 1: She pays 1,000 + 200 = 1,200 dollars. The answer is: 1200"  # commas stay in the step
    with pytest.raises(NormaliseError, match="no final answer"):
        normalise_gsm8k("48/2 = 24")
    with pytest.raises(NormaliseError, match="no step structure"):
        normalise_gsm8k("#### 72")


@pytest.mark.parametrize("a,b,equal", [
    ("$1,000.00", "1000", True), ("3/4", "0.75", True), ("18", "1800", False), ("x/2", "7", False),
    ("72", " 72 ", True), ("50%", "50", True), ("\\frac{3}{4}", "0.75", True),
    ("-\\dfrac{1}{2}", "-0.5", True), ("6.", "6", True), ("2x", "2", False), ("x + 1", "x+1", True),
    ("1/0", "1/0", True), ("5 apples", "5", True), ("5 apples", "6", False),
])
def test_answers_equal(a, b, equal):
    assert answers_equal(a, b) is equal and answers_equal(b, a) is equal
