"""The reward formula parser (rleif_kit.core.reward_formula): what it computes and what it refuses."""

from __future__ import annotations

import re

import pytest

from rleif_kit.core.reward_formula import FormulaError, parse_reward_formula


@pytest.mark.parametrize("formula, rI, rA, expected", [
    ("rI * rA", 0.5, 0.8, 0.4),                # 0.5 * 0.8
    ("min(rI, rA)", 0.5, 0.8, 0.5),
    ("max(rI, rA, 0.1)", 0.05, 0.02, 0.1),     # both scores below the 0.1 floor
    ("0.5*rI + 0.5*rA", 0.2, 0.6, 0.4),        # 0.1 + 0.3
    ("-rA", 0.5, 0.8, -0.8),
    ("+rI", 0.5, 0.8, 0.5),
    ("(rI + rA) / 2", 0.5, 0.8, 0.65),         # 1.3 / 2
    ("rI - rA * 2", 1.0, 0.25, 0.5),           # precedence: 1 - (0.25 * 2)
    ("max(min(rI, rA), 0)", -0.3, 0.9, 0.0),   # min = -0.3, clipped at 0
])
def test_formula_value(formula, rI, rA, expected):
    assert parse_reward_formula(formula)(rI, rA) == pytest.approx(expected)


def test_default_formula_only_uses_rA():
    assert parse_reward_formula("rA")(0.7, 0.25) == 0.25


def test_result_is_float():
    value = parse_reward_formula("rI * rA")(2, 3)
    assert value == 6.0 and type(value) is float


@pytest.mark.parametrize("formula, rI, rA", [
    ("rI / rA", 0.5, 0.0),
    ("rA / (rI - rI)", 0.5, 0.8),       # 0.5 - 0.5 = 0
    ("min(rI / rA, 1)", 0.5, 0.0),      # the whole reward, not just the min argument
])
def test_division_by_zero_gives_zero(formula, rI, rA):
    assert parse_reward_formula(formula)(rI, rA) == 0.0


@pytest.mark.parametrize("formula, message", [
    ("rI.real", "is not allowed"),                  # attribute access
    ("rI[0]", "is not allowed"),                    # subscript
    ("rI > rA", "is not allowed"),                  # comparison
    ("rI ** 2", "is not allowed"),                  # power
    ("'rI'", "is not allowed"),                     # a string
    ("abs(rI)", "is not allowed"),                  # a call to another name
    ("__import__('os')", "is not allowed"),
    ("rI.__class__", "is not allowed"),
    ("rX * rA", "unknown name 'rX'"),
    ("rI * max", "unknown name 'max'"),             # min/max only as calls
    ("1 + 2", "none of rI, rA, rV, rF"),
    ("max(1, 2)", "none of rI, rA, rV, rF"),
    ("min(rI, rA, key=abs)", "two or more plain arguments"),
    ("min(rI)", "two or more plain arguments"),
    ("max(*[rI, rA], 0)", "is not allowed"),        # starred argument
    ("rI if rA else 0", "is not allowed"),
    ("rI and rA", "is not allowed"),
    ("True * rI", "is not allowed"),                # bool is not a number here
    ("lambda: 1", "is not allowed"),
    ("rI +", "not an expression"),
    ("", "empty formula"),
    ("   ", "empty formula"),
])
def test_formula_rejected(formula, message):
    with pytest.raises(FormulaError, match=re.escape(message)):
        parse_reward_formula(formula)


@pytest.mark.parametrize("formula, message", [
    ("+".join(["rI"] * 5000), "too deeply nested"),                       # was a RecursionError
    ("(" * 300 + "rI" + ")" * 300, "not an expression"),                   # the parser's own limit
    ("+".join(["rI"] * 101), "201 parts; a reward formula has at most 200"),  # 101 names + 100 sums
])
def test_huge_formulas_are_formula_errors(formula, message):
    with pytest.raises(FormulaError, match=re.escape(message)):
        parse_reward_formula(formula)


def test_a_long_but_sane_formula_still_works():
    assert parse_reward_formula("+".join(["rI"] * 100))(0.5, 0.0) == pytest.approx(50.0)  # 100 names + 99 sums


def test_non_string_rejected():
    with pytest.raises(FormulaError, match="empty formula"):
        parse_reward_formula(None)
