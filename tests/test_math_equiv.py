"""MATH answer equivalence, worked by hand: what must match, what must not, and the compat scorer."""

from __future__ import annotations

import threading
import time

import pytest

from rleif_kit.worlds.math import equiv as math_equiv
from rleif_kit.worlds.math.compat import compat_is_equiv
from rleif_kit.worlds.math.equiv import is_equiv, latex_to_sympy, normalize

EQUAL = [
    ("\\frac{1}{2}", "0.5"),
    ("\\dfrac12", "\\frac{1}{2}"),
    ("1/2", "\\frac{1}{2}"),
    ("0.5", "\\dfrac12"),
    ("\\frac{6}{8}", "\\tfrac34"),
    ("-\\frac{3}{4}", "-0.75"),
    ("10.0", "10"),
    ("\\left(1,2\\right)", "(1,2)"),
    ("( 1 , 2 )", "(1,2)"),
    ("10^\\circ", "10"),
    ("10^{\\circ}", "10"),
    ("5\\text{ cm}", "5"),
    ("5 \\text{cm}^2", "5"),
    ("12 inches", "12"),
    ("\\$1,000.00", "1000"),
    ("1{,}000", "1000"),
    ("25\\%", "25"),
    ("x = 5", "5"),
    ("5.", "5"),
    ("$\\boxed{7}$", "7"),
    ("\\text{(A)}", "(A)"),
    ("\\sqrt{8}", "2\\sqrt2"),
    ("\\frac{\\sqrt{3}}{2}", "\\frac{1}{2}\\sqrt3"),
    ("\\frac{\\sqrt2}{2}", "\\frac{1}{\\sqrt{2}}"),
    ("2x+3", "3+2x"),
    ("(x+1)^2", "x^2+2x+1"),
    ("y = 2x+3", "y=3+2x"),
    ("\\pi r^2", "r^2\\pi"),
    ("3+4i", "4i+3"),
    ("(-\\infty, 3]", "(-\\infty,3]"),
    ("\\{1,2\\}", "\\{1, 2\\}"),
    ("\\begin{pmatrix}1\\\\2\\end{pmatrix}", "\\begin{pmatrix} 1 \\\\ 2 \\end{pmatrix}"),
    ("x \\in [2,5)", "[2,5)"),
    ("\\binom{5}{2}", "10"),
    ("5!", "120"),
]

NOT_EQUAL = [
    ("x/2", "7"),                     # a symbol is not a number
    ("18", "1800"),                   # never x100 ...
    ("1800", "18"),                   # ... or /100
    ("0.05", "5"),
    ("5", "0.05"),
    ("50\\%", "0.5"),                 # a stripped % leaves 50
    ("0.25", "25\\%"),
    ("0.333", "\\frac13"),            # a rounded decimal is not the fraction
    ("3.14", "\\pi"),
    ("\\sqrt{2}", "1.41421356"),
    ("(1,2)", "(2,1)"),               # tuples are ordered
    ("(1,2)", "[1,2]"),               # interval kinds differ
    ("(-\\infty,3)", "(-\\infty,3]"),
    ("1,2", "(1,2)"),
    ("\\begin{pmatrix}1\\\\2\\end{pmatrix}", "\\begin{pmatrix}1\\\\3\\end{pmatrix}"),
    ("x+1", "x+2"),
    ("7", "7+x"),
    ("\\text{Monday}", "Tuesday"),
    ("yadnoM", "Monday"),             # long words are never split into a product of letters
    ("2x", "2y"),
]

FAILED_NORMALISATION = [
    ("\\frac{1}{2", "\\frac12"),      # unbalanced braces
    ("{", "1"),
    ("", "0"),
    ("   ", "0"),
    (None, "0"),
    ("5", None),                      # a gold that cannot be read is never matched either
]


@pytest.mark.parametrize("pred,gold", EQUAL)
def test_equal(pred, gold):
    assert is_equiv(pred, gold)
    assert is_equiv(gold, pred)


@pytest.mark.parametrize("pred,gold", NOT_EQUAL)
def test_not_equal(pred, gold):
    assert not is_equiv(pred, gold)
    assert not is_equiv(gold, pred)


@pytest.mark.parametrize("pred,gold", FAILED_NORMALISATION)
def test_failed_normalisation_is_wrong(pred, gold):
    assert not is_equiv(pred, gold)


def test_there_are_at_least_30_hand_written_math_cases():
    assert len(EQUAL) + len(NOT_EQUAL) + len(FAILED_NORMALISATION) >= 30


@pytest.mark.parametrize("raw,norm", [
    ("\\dfrac12", "\\frac{1}{2}"), ("\\left( 1, 2 \\right)", "(1,2)"), ("10^\\circ", "10"),
    ("5\\text{ cm}", "5"), ("x = 0.50", "0.5"), ("$.5$", "0.5"), ("1,000", "1000"), ("\\sqrt3", "\\sqrt{3}"),
    ("\\pi r", "\\pi r"), ("7.", "7"), ("\\frac{1}{2", None), ("", None),
])
def test_normalize(raw, norm):
    assert normalize(raw) == norm


@pytest.mark.parametrize("text", ["__import__('os').system('true')", "x.__class__", "open('f')", "a_1", "|x|",
                                  "\\{1\\}", "lambda"])
def test_converter_lets_no_code_through(text):
    assert latex_to_sympy(text) is None


def test_huge_powers_and_factorials_are_refused_fast():
    start = time.monotonic()
    assert not is_equiv("2^{10^{10}}", "1")
    assert not is_equiv("1000000!", "1")
    assert not is_equiv("10^{99999999}", "1")
    assert time.monotonic() - start < 5


def test_time_limit_in_main_thread_and_off_it():
    start = time.monotonic()
    assert math_equiv._limited(lambda: time.sleep(5) or True, 0.2) is False
    assert time.monotonic() - start < 2
    out = []
    worker = threading.Thread(target=lambda: out.append((is_equiv("\\frac{1}{2}", "0.5"), is_equiv("18", "1800"))))
    worker.start()
    worker.join(30)
    assert out == [(True, False)]


@pytest.mark.parametrize("pred,gold", [
    ("x/2", "7"),        # a normalisation error (int("x")) counts as right in the published scorer
    ("18", "1800"),      # x100 accepted
    ("0.05", "5"),       # /100 accepted
    ("0.3333", "\\frac{1}{3}"),  # 1e-3 closeness in its sympy step
])
def test_compat_is_looser_where_the_published_scorer_is(pred, gold):
    assert compat_is_equiv(pred, gold)
    assert not is_equiv(pred, gold)


def test_compat_agrees_on_plain_cases():
    assert compat_is_equiv("\\dfrac{1}{2}", "\\frac12")
    assert compat_is_equiv("10^\\circ", "10")
    assert not compat_is_equiv("3", "4")
    assert not compat_is_equiv(None, "4")
