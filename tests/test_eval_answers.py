"""GSM8k and MATH answer extraction, worked by hand (pure: no model, no sandbox)."""

from __future__ import annotations

from fractions import Fraction

import pytest

from rleif_kit.worlds.math.answers import (check_gsm8k, check_math, extract_gsm8k, extract_math, format_number,
                                          gsm8k_gold, last_boxed, math_gold, normalize_number,
                                          wizardmath_gsm8k_answer, wizardmath_math_answer)

# (response, gold, strict correct, flexible correct)
GSM8K_CASES = [
    ("3 + 15 = 18.\nThe answer is: 18", "#### 18", True, True),
    ("The answer is: 1,000", "#### 1000", True, True),                 # thousands comma
    ("The answer is: $1,000.00", "1000", True, True),                   # $, comma, trailing .00
    ("The answer is: $5.00.", "5", True, True),                         # sentence period is not a decimal
    ("The answer is: 7.0", "7", True, True),                            # trailing .0
    ("The answer is: 2.50", "2.5", True, True),
    ("The answer is: .5", "0.5", True, True),
    ("The answer is: 3/4", "0.75", True, True),                         # 3/4 = 0.75 exactly
    ("The answer is: 6/8", "3/4", True, True),
    ("The answer is: 50%", "50", True, True),                           # GSM8k golds state the percentage
    ("The answer is: 50%", "0.5", False, False),                        # ... so 50% is 50, never 0.5
    ("The answer is: 100%", "#### 100", True, True),
    ("The answer is: 18", "#### 1800", False, False),                   # no x100
    ("The answer is: 1800", "#### 18", False, False),                   # no /100
    ("The answer is: 0.05", "5", False, False),
    ("The answer is: -3", "#### -3", True, True),
    ("The answer is: \u22124", "-4", True, True),                       # unicode minus
    ("The answer is: -3", "3", False, False),
    ("The answer is: 1,234,567", "1234567", True, True),
    ("The answer is: 12 apples and 3 pears", "12", False, False),       # two quantities: refused, not cut at 12
    ("The answer is: 12 apples", "12", True, True),                     # one quantity: its number
    ("The answer is: 41. Wait. The answer is: 42", "42", True, True),   # the LAST mark counts
    ("The answer is: 42\n#### 41", "42", True, True),                   # the mark wins over ####
    ("Work...\n#### 42", "42", True, True),                             # GSM8k's own format
    ("The answer is: 18\n\n### Instruction:\nAdd 2 and 2.\n\n### Response: 4", "18", True, True),
    ("She pays 10-4 = 6 dollars.", "6", False, True),                   # no mark: flexible only
    ("So the total is 35.", "#### 35", False, True),
    ("He has 5 apples. The answer is:", "5", False, True),              # empty answer line
    ("The answer is: twelve", "12", False, False),                      # words are not numbers
    ("The answer is: 1/0", "0", False, False),                          # zero denominator: fails, never right
    ("", "5", False, False),
    ("The answer is: 7.6", "#### 8", False, False),                     # no rounding (compat rounds, see below)
    ("The answer is: 5", "#### 1,000", False, False),
    ("The answer is: 1000", "Janet... #### 1,000", True, True),         # gold with a comma
]


@pytest.mark.parametrize("response,gold,strict,flexible", GSM8K_CASES)
def test_gsm8k_strict_and_flexible(response, gold, strict, flexible):
    result = check_gsm8k(response, gold)
    assert result["correct"] is strict
    assert result["flexible_correct"] is flexible


def test_there_are_at_least_30_hand_written_gsm8k_cases():
    assert len(GSM8K_CASES) >= 30


@pytest.mark.parametrize("text,value", [
    ("$1,000.00", Fraction(1000)), ("1000", Fraction(1000)), (" 7. ", Fraction(7)), ("-3/4", Fraction(-3, 4)),
    ("50%", Fraction(50)), ("$5$", Fraction(5)), ("0.125", Fraction(1, 8)),
    ("5 dollars", None), ("1/0", None), ("abc", None), ("1 2", None), ("", None), (None, None),
])
def test_normalize_number(text, value):
    assert normalize_number(text) == value


def test_gold_and_extraction_details():
    assert gsm8k_gold("Natalia sold 48/2 = 24 clips.\n#### 72") == 72
    assert extract_gsm8k("I think 5. The answer is: 6") == 6
    assert extract_gsm8k("No answer line, 5 then 6") is None
    assert extract_gsm8k("No answer line, 5 then 6", flexible=True) == 6
    assert [format_number(Fraction(x)) for x in ("1000", "0.75", "1/3", "-2.5")] == ["1000", "0.75", "1/3", "-2.5"]


def test_compat_reproduces_wizardmath_rounding():
    # WizardMath rounds the prediction: 7.6 -> 8 counts as right for a gold of 8 (ours: wrong)
    assert wizardmath_gsm8k_answer("The answer is: 7.6") == 8
    assert check_gsm8k("The answer is: 7.6", "#### 8")["compat_correct"] is True
    # its regex reads one comma group only: "1,000,000" -> 1000
    assert wizardmath_gsm8k_answer("The answer is: 1,000,000") == 1000
    assert wizardmath_gsm8k_answer("no answer line 5") is None


def test_check_gsm8k_reports_answers():
    result = check_gsm8k("x = 3. The answer is: $1,000.00", "#### 1,000")
    assert result == {"gold": "1000", "answer": "1000", "correct": True, "flexible_answer": "1000",
                      "flexible_correct": True, "compat_correct": True}


# ---------------------------------------------------------------- MATH extraction


@pytest.mark.parametrize("text,content", [
    ("so $\\boxed{\\frac{1}{2}}$.", "\\frac{1}{2}"),
    ("first \\boxed{1} then \\boxed{x^{2}+1}", "x^{2}+1"),                  # the last one, nested braces
    ("\\fbox{7}", "7"),
    ("\\boxed 5$ done", "5"),                                              # brace-less form
    ("\\boxed{\\frac{1}{2}", None),                                        # unbalanced: no answer
    ("no box here", None),
    ("", None),
])
def test_last_boxed(text, content):
    assert last_boxed(text) == content


def test_math_gold_is_the_last_boxed():
    solution = "We get $x=\\boxed{3}$ first, so the total is $\\boxed{\\dfrac{5}{2}}$."
    assert math_gold(solution) == "\\dfrac{5}{2}"


@pytest.mark.parametrize("response,answer", [
    ("Step 1...\nThe answer is: $\\frac{1}{2}$.", "$\\frac{1}{2}$"),
    ("The answer is: 5.\n\n### Instruction: more text", "5"),              # cut at the line break
    ("The answer is: \\boxed{7}", "7"),                                    # its \boxed{} if it has one
    ("Thus \\boxed{3} is it.", "3"),                                       # no mark: the last \boxed{}
    ("The answer is: \\begin{pmatrix}1\\\\\n2\\end{pmatrix}", "\\begin{pmatrix}1\\\\\n2\\end{pmatrix}"),
    ("It is probably four.", None),
])
def test_extract_math(response, answer):
    assert extract_math(response) == answer


def test_check_math_strict_and_compat():
    assert check_math("The answer is: \\dfrac12", "\\frac{1}{2}") == {
        "gold": "\\frac{1}{2}", "answer": "\\dfrac12", "correct": True, "compat_correct": True}
    trap = check_math("The answer is: x/2", "7")
    assert trap["correct"] is False and trap["compat_correct"] is True     # the published scorer's hole
    assert check_math("I don't know", "7")["correct"] is False
    assert wizardmath_math_answer("The answer is: 12.\nmore") == "12"
