"""The trap set: answer styles of the MATH test set and of real model output, each with its verdict and why.

Every case is worked by hand. MATH cases are (prediction, gold, question or None, equal?, reason); GSM8k
cases are (response, gold, strict correct?, reason). The classes and their counts are asserted at the
bottom, so a case removed from a class is noticed.
"""

from __future__ import annotations

import pytest

from rleif_kit.worlds.math.answer_styles import AMBIGUOUS, is_range, line_value
from rleif_kit.worlds.math.answers import check_gsm8k, check_math
from rleif_kit.worlds.math.equiv import asks_for_order, is_equiv

ALL = "Enter all the solutions, separated by commas."
INCREASING = "Enter the solutions in increasing order, separated by commas."

MATH_TRAPS = {
    "unordered": [
        ("-2, 6", "6, -2", ALL, True, "all solutions: any order"),
        ("6, -2", "-2, 6", None, True, "a bare list without a question is a solution set"),
        ("3, 1, 2", "1, 2, 3", ALL, True, "three items, any order"),
        ("\\{-2, 6\\}", "\\{6, -2\\}", None, True, "a set is unordered"),
        ("\\{-2, 6\\}", "6, -2", ALL, True, "a set answers a list of all solutions"),
        ("x = 2 or x = 3", "3, 2", ALL, True, "'or' between answers is a list; 'x =' goes"),
        ("2 \\text{ and } 3", "3,2", ALL, True, "'and' between answers is a list"),
        ("\\pm 2", "2, -2", ALL, True, "\\pm is two answers"),
        ("\\frac{1 \\pm \\sqrt{5}}{2}", "\\frac{1+\\sqrt5}{2}, \\frac{1-\\sqrt5}{2}", ALL, True,
         "\\pm inside a fraction is two answers too"),
        ("1+\\sqrt{2}, 1-\\sqrt2", "1 \\pm \\sqrt{2}", ALL, True, "\\pm in the gold, both listed"),
        ("(3,4] \\cup (-\\infty, 1)", "(-\\infty,1)\\cup(3,4]", None, True, "a union is unordered"),
        ("-2, 6", "-2, 6, 7", ALL, False, "one solution missing"),
        ("-2, 6, 6", "-2, 6", ALL, False, "a repeated item is an extra answer"),
        ("-2, 5", "6, -2", ALL, False, "one item wrong"),
        ("6, -2", "-2, 6", INCREASING, False, "the question asks for increasing order"),
        ("-2, 6", "-2, 6", INCREASING, True, "in the order asked"),
        ("2, 1", "1, 2", "Find a and b, respectively.", False, "'respectively' fixes the order"),
        ("(3,4), (1,2)", "(1,2), (3,4)", "Enter all ordered pairs (x,y), separated by commas.", True,
         "all ordered pairs: the pairs in any order ..."),
        ("(4,3), (1,2)", "(1,2), (3,4)", "Enter all ordered pairs (x,y), separated by commas.", False,
         "... each pair still in order"),
        ("6, 3, 2, 1, -1, -2, -3, -6", "-6, -3, -2, -1, 1, 2, 3, 6",
         "Enter all the possible integer roots of this polynomial, separated by commas.", True,
         "a MATH test answer of eight roots, negative ones beside positive ones (no range read in '1, -1')"),
        ("1, 0, -1", "-1,0,1", "Find all values of $k$ for which the system has a solution.", True,
         "a MATH test answer: 'all values' without 'separated by commas'"),
        ("2 \\pi, 0, \\frac{4\\pi}{3}, \\frac{2\\pi}{3}", "0, \\frac{2 \\pi}{3}, \\frac{4 \\pi}{3}, 2 \\pi",
         "Solve $\\cos 3x = 1$ for $0 \\le x \\le 2 \\pi.$  Enter all the solutions, separated by commas.", True,
         "a MATH test answer of four angles"),
        ("C, A, F", "\\text{A,C,F}", "Enter the letters of the correct options, separated by commas.", True,
         "a MATH test answer of option letters in \\text{}"),
        ("13, 12, 9, 7", "7,9,12,13", "What are the four integers in increasing order?", False,
         "a MATH test question that asks for increasing order"),
    ],
    "ordered": [
        ("(2,1)", "(1,2)", None, False, "a point is ordered"),
        ("(1,2,3)", "(1, 2, 3)", None, True, "an ordered triple, same order"),
        ("(3,2,1)", "(1,2,3)", ALL, False, "a tuple stays ordered even when all solutions are asked"),
        ("[2,5)", "(2,5]", None, False, "interval ends differ"),
        ("(5,2)", "(2,5)", None, False, "an interval is ordered"),
        ("\\begin{pmatrix}2\\\\1\\end{pmatrix}", "\\begin{pmatrix}1\\\\2\\end{pmatrix}", None, False,
         "a vector is ordered"),
        ("(1,2)", "1, 2", None, False, "a point is not a list of solutions"),
        ("(-\\infty, 0) \\cup (0, \\infty)", "(0, \\infty) \\cup (-\\infty, 1)", None, False,
         "a union with one wrong interval"),
    ],
    "mixed numbers": [
        ("\\frac{31}{5}", "6\\frac15", None, True, "6 1/5 = 31/5"),
        ("\\frac65", "6\\frac15", None, False, "6\\frac15 is not the product 6/5"),
        ("100/3", "33 \\frac{1}{3}", None, True, "a space before the fraction"),
        ("11", "33 \\frac{1}{3}", None, False, "not the product 33 * 1/3"),
        ("6.2", "6\\frac{1}{5}", None, True, "the decimal of a terminating mixed number"),
        ("2 1/2", "\\frac52", None, True, "plain-text mixed number"),
        ("2", "\\frac52", None, False, "'2 1/2' must not read as 2 (the gold is 5/2)"),
        ("-2\\frac12", "-\\frac52", None, True, "a sign applies to the whole mixed number"),
        ("\u22122 \\frac{1}{2}", "-2.5", None, True, "a unicode minus"),
        ("\\frac{25}{13}", "1\\frac{12}{13}", None, True, "a MATH test answer"),
        ("\\frac{35}{3}", "11 \\frac{2}{3}", None, True, "a MATH test answer with a space"),
        ("12.6", "12\\frac{3}{5}", None, True, "a MATH test answer, as a decimal"),
        ("2\u00bd", "2.5", None, True, "a unicode half"),
        ("3", "2\\frac{3}{2}", None, True, "an improper fraction after a digit is a product: 2 * 3/2"),
        ("2\\frac{\\sqrt3}{2}", "\\sqrt{3}", None, True, "a fraction that is not of integers is a product"),
    ],
    "scientific notation": [
        ("1.5e3", "1500", None, True, "e-notation"),
        ("1.5E+3", "1500", None, True, "capital E with a sign"),
        ("2.5e-2", "\\frac{1}{40}", None, True, "negative exponent, exact"),
        ("1.5 \\times 10^3", "1500", None, True, "\\times 10^3"),
        ("1.5\\cdot10^{3}", "1500", None, True, "\\cdot 10^{3}"),
        ("1.5e3", "1.5", None, False, "1.5e3 is not 1.5"),
        ("1.5e3", "15000", None, False, "nor 15000"),
        ("2e", "2e", None, True, "2e (two times e) is left as it is"),
    ],
    "scale and number words": [
        ("1.5 million", "1500000", None, True, "a scale word after digits"),
        ("1.5 million", "1.5", None, False, "'million' is not a unit to drop"),
        ("3 thousand", "3000", None, True, "thousand"),
        ("2.5 billion", "2500000000", None, True, "billion"),
        ("\\$1.5 \\text{ million}", "1500000", None, True, "dollars and \\text{ million}"),
        ("twelve", "12", None, False, "numbers spelled out are not read (the trained format states the number)"),
    ],
    "expression = value": [
        ("3 \\cdot 6 = 18", "18", None, True, "the value after the computation counts"),
        ("3 \\cdot 6 = 18", "3", None, False, "... not the first number"),
        ("2+3=6", "5", None, False, "a wrong value after a right computation is wrong"),
        ("\\frac{6}{8} = \\frac{3}{4}", "0.75", None, True, "fraction = fraction"),
        ("x = 5", "5", None, True, "a short left-hand side goes"),
        ("y = 2x+3", "y=3+2x", None, True, "an equation answer stays an equation"),
        ("x+y=5", "5", None, False, "an equation with unknowns is not the number"),
        ("\\frac{1}{3} \\approx 0.33", "\\frac13", None, True, "the exact value before \\approx counts"),
        ("0.33", "\\frac13", None, False, "the rounded value alone does not"),
        ("18 = 3 \\cdot 6", "18", None, True, "the value stated first, then its computation"),
    ],
    "ranges and alternatives": [
        ("18-20", "18", None, False, "a range is not one value"),
        ("18-20", "-2", None, False, "... nor the difference it looks like"),
        ("18-20", "20", None, False, "... nor its other end"),
        ("18 to 20", "18", None, False, "'to' range"),
        ("18\u201320", "18", None, False, "an en dash range"),
        ("between 18 and 20", "18", None, False, "'between ... and ...'"),
        ("18 \\text{ or } 20", "18", None, False, "alternatives against one gold value"),
        ("18, 20", "18", None, False, "a list against one gold value"),
        ("20-18", "2", None, True, "a bigger first number: a difference, not a range"),
        ("5-2\\sqrt{3}", "5-2\\sqrt3", None, True, "an expression with a radical is no range"),
        ("1-2\\sqrt{3}", "1-\\sqrt{12}", None, True, "... even with the smaller number first"),
        ("x^2-3", "x^2-3", None, True, "an exponent before the minus is no range"),
        ("2 - 3 \\sqrt{2}", "2-3\\sqrt{2}", None, True, "spaced, with a radical after the space: a difference"),
        ("1 - 2 i", "1-2i", None, True, "a complex number"),
        ("(1-2)^2", "1", None, True, "a difference in brackets"),
        ("-1-2", "-3", None, True, "a sign in front: a difference"),
        ("5 \\text{ or more}", "5", None, False, "a hedge in \\text{} is not a unit to drop"),
        ("at least 5", "5", None, False, "'at least'"),
    ],
    "units and text": [
        ("5\\text{ cm}", "5", None, True, "\\text{} unit"),
        ("5 \\text{cm}^2", "5", None, True, "squared unit"),
        ("12 square units", "12", None, True, "unit words"),
        ("45^\\circ", "45", None, True, "degrees"),
        ("\\$18.90", "18.9", None, True, "dollars and a trailing zero"),
        ("\\frac{3}{4} of the cake", "\\frac34", None, True, "words after a fraction"),
        ("\\text{(A)}", "(A)", None, True, "a multiple-choice letter"),
        ("\\text{Monday}", "\\text{Tuesday}", None, False, "different words"),
        ("5\\text{ cm}", "50", None, False, "a unit never scales the number (no unit conversion)"),
        ("25\\%", "25", None, True, "a percent sign is dropped, the number kept"),
        ("0.25", "25\\%", None, False, "... so 0.25 is not 25%"),
        ("10,\\!080", "10080", None, True, "MATH's thousands separator"),
        ("10, 200", "10200", None, False, "a comma and a space separate two answers"),
        ("3 ab", "3", None, False, "a product of variables is not a unit"),
        ("4 pi", "4", None, False, "pi is a constant, not a unit"),
        ("5 dozen", "5", None, False, "a dozen scales the number"),
        ("12 in", "12", None, True, "a short unit abbreviation"),
    ],
    "numeric policy": [
        ("0.5", "\\frac{1}{2}", None, True, "a terminating decimal is exactly its fraction"),
        ("0.50", "\\frac{1}{2}", None, True, "trailing zeros"),
        ("0.333", "\\frac{1}{3}", None, False, "a non-terminating fraction is never a rounded decimal"),
        ("3.14", "\\pi", None, False, "an irrational gold is never a decimal"),
        ("1.41421356", "\\sqrt{2}", None, False, "... however many digits"),
        ("\\frac{\\sqrt{2}}{2}", "\\frac{1}{\\sqrt{2}}", None, True, "exact irrationals compare exactly"),
        ("\\sin(\\pi/6)", "\\frac12", None, True, "an exact expression of a rational"),
        ("18", "1800", None, False, "never x100"),
        ("0.05", "5", None, False, "never /100"),
        ("7", "7.000001", None, False, "no tolerance between rationals"),
        ("2^{10}", "1024", None, True, "powers evaluate exactly"),
        ("\\frac{1}{0}", "0", None, False, "a division by zero is no value"),
        ("2^{1/3}", "\\sqrt[3]{2}", None, True, "a fractional exponent is a root"),
        ("8^{2/3}", "4", None, True, "... and evaluates exactly"),
    ],
    "base subscripts": [
        ("1011_{2}", "1011_2", None, True, "a one-digit base with braces or without"),
        ("123_6", "123_{6}", None, True, "... either side"),
        ("2112_{3}", "2112_3", "Express your answer in base 3.", True, "a MATH test answer"),
        ("100_{10}", "100_10", None, True, "all of a subscript's digits are its base"),
        ("123_6", "124_{6}", None, False, "another numeral in the same base"),
        ("123_{6}", "123_{7}", None, False, "the same digits in another base"),
        ("123_6", "51", "Express your answer in base 6.", False,
         "the decimal value (1*36 + 2*6 + 3 = 51) is not the base-6 numeral asked for"),
        ("1011_2", "1011_{3}", None, False, "a base-2 numeral is not the base-3 one"),
    ],
    "irrational golds": [
        ("1.414213562373", "\\sqrt{2}", None, False, "a 13-digit decimal is not sqrt(2)"),
        ("3.14159265358979", "\\pi", None, False, "a 15-digit decimal is not pi"),
        ("1.41421356237310\\pi", "\\sqrt{2}\\pi", None, False, "a decimal factor does not stand for sqrt(2)"),
        ("\\frac{1414213562373}{10^{12}}", "\\sqrt2", None, False, "nor a fraction of its digits"),
        ("\\sqrt{8}", "2\\sqrt{2}", None, True, "exact irrationals compare exactly"),
        ("\\frac{\\sqrt6}{\\sqrt3}", "\\sqrt2", None, True, "... after simplifying"),
        ("0.5\\sqrt{2}", "\\frac{\\sqrt2}{2}", None, True, "a decimal coefficient is its exact fraction"),
        ("\\sqrt{3+2\\sqrt{2}}", "1+\\sqrt2", None, True, "a nested radical that denests"),
    ],
    "repeating decimals": [
        ("0.\\overline{3}", "\\frac{1}{3}", None, True, "a repeating decimal is its exact value, as 0.5 is 1/2"),
        ("0.1\\overline{6}", "\\frac16", None, True, "a fixed digit before the period"),
        ("1.\\overline{27}", "\\frac{14}{11}", None, True, "a whole part and a two-digit period"),
        ("-0.\\overline{142857}", "-\\frac17", None, True, "a sign in front"),
        ("0.\\overline{3}", "0.3", None, False, "the period is not dropped"),
        ("0.\\overline{3}", "0.333", None, False, "nor rounded"),
        ("0.1\\overline{6}", "\\frac{1}{3}", None, False, "0.1666... is not 1/3"),
        ("0.\\overline{16}", "\\frac16", None, False, "0.1616... (16/99) is not 0.1666..."),
    ],
    "named functions": [
        ("f(x) = x^2+1", "x^2+1", None, True, "a named function's left-hand side goes"),
        ("f^{-1}(x) = \\frac{x-1}{2}", "\\frac{x-1}{2}", None, True, "an inverse function's too"),
        ("g(t)=3t", "3t", None, True, "another name and variable"),
        ("f'(x) = 2x", "2x", None, True, "a derivative's"),
        ("f(x) = x^2+1", "x^2-1", None, False, "the right-hand side still has to be right"),
        ("f^{-1}(x) = 2x+1", "\\frac{x-1}{2}", None, False, "the function, not its inverse"),
        ("g(t) = 3t", "3", None, False, "the coefficient alone is not the function"),
        ("f(x)+g(x)=5", "5", None, False, "a sum of functions is no left-hand side to drop"),
    ],
    "products of constants and radicals": [
        ("3\\pi\\sqrt{2}", "3\\sqrt{2}\\pi", None, True, "the order of the factors does not matter"),
        ("\\sqrt{2}\\pi", "\\pi\\sqrt2", None, True, "... nor with no coefficient"),
        ("2\\pi\\sqrt[3]{5}", "2\\sqrt[3]{5}\\pi", None, True, "a cube root beside pi"),
        ("\\pi\\binom{4}{2}", "6\\pi", None, True, "a binomial coefficient beside pi"),
        ("3\\pi\\sqrt{2}", "3\\sqrt{3}\\pi", None, False, "another radical"),
        ("3\\pi\\sqrt{2}", "3\\sqrt{2}", None, False, "pi dropped"),
        ("2\\pi\\sqrt{2}", "3\\sqrt{2}\\pi", None, False, "another coefficient"),
    ],
    "matrix brackets": [
        ("\\begin{bmatrix}1&2\\\\3&4\\end{bmatrix}", "\\begin{pmatrix}1&2\\\\3&4\\end{pmatrix}", None, True,
         "square and round brackets hold the same matrix"),
        ("\\begin{matrix}1&2\\\\3&4\\end{matrix}", "\\begin{pmatrix}1&2\\\\3&4\\end{pmatrix}", None, True,
         "... as do no brackets"),
        ("\\begin{vmatrix}1&2\\\\3&4\\end{vmatrix}", "\\begin{vmatrix}1 & 2 \\\\ 3 & 4\\end{vmatrix}", None, True,
         "a determinant equals the determinant with the same entries"),
        ("\\begin{vmatrix}1&2\\\\3&4\\end{vmatrix}", "\\begin{pmatrix}1&2\\\\3&4\\end{pmatrix}", None, False,
         "a determinant is not the matrix"),
        ("\\begin{pmatrix}1&2\\\\3&4\\end{pmatrix}", "\\begin{vmatrix}1&2\\\\3&4\\end{vmatrix}", None, False,
         "... either way"),
        ("\\begin{vmatrix}1&2\\\\3&4\\end{vmatrix}", "-2", None, False,
         "an unevaluated determinant does not state its value"),
        ("\\begin{Vmatrix}1&2\\\\3&4\\end{Vmatrix}", "\\begin{vmatrix}1&2\\\\3&4\\end{vmatrix}", None, False,
         "a norm is not a determinant"),
    ],
    "euler's e": [
        ("2e - 1", "2e-1", None, True, "Euler's e beside digits, spaced or not"),
        ("2e-1", "-1+2e", None, True, "2e-1 is 2e - 1"),
        ("\\frac{e}{2}", "0.5e", None, True, "e over 2"),
        ("e^{2} - 1", "e^2-1", None, True, "a power of e"),
        ("2e - 1", "0.2", None, False, "never scientific notation"),
        ("2e-1", "\\frac15", None, False, "... written without spaces either"),
        ("3e - 2", "0.03", None, False, "another coefficient"),
        ("2e", "5.43656365691809", None, False, "a decimal never stands for 2e"),
    ],
    "malformed": [
        ("\\frac{1}{2", "\\frac12", None, False, "unbalanced braces"),
        ("", "0", None, False, "empty"),
        ("__import__('os')", "0", None, False, "code is never evaluated"),
        ("5", None, None, False, "an unreadable gold is never matched"),
    ],
}

GSM8K_TRAPS = {
    "expression = value": [
        ("The answer is: 3 * 6 = 18", "18", True, "the value after the computation"),
        ("The answer is: 3 * 6 = 18", "3", False, "... not the first number"),
        ("The answer is: 10 - 4 = 6 dollars.", "6", True, "a unit after the value"),
        ("The answer is: $3 \\times 6 = 18$", "18", True, "LaTeX multiplication"),
        ("The answer is: 18 (3 * 6)", "18", True, "the computation after the value"),
        ("The answer is: 18 apples; 18 - 6 = 12 remain", "18", True,
         "words before the '=': not a computation, the first number counts"),
        ("The answer is: \\frac{1}{3} \\approx 0.33", "1/3", True, "the exact value before \\approx"),
        ("The answer is: 18 = 3 * 6", "18", True, "the value first, its computation after"),
    ],
    "mixed numbers and fractions": [
        ("The answer is: 2 1/2", "2.5", True, "plain mixed number"),
        ("The answer is: 2 1/2 cups", "2", False, "... not 2"),
        ("The answer is: $2\\frac{1}{2}$", "2.5", True, "LaTeX mixed number"),
        ("The answer is: $\\frac{1}{2}$", "0.5", True, "LaTeX fraction"),
        ("The answer is: \\dfrac{3}{4}", "0.75", True, "\\dfrac"),
        ("The answer is: \\frac{12}{5}", "2.4", True, "a two-digit numerator"),
        ("The answer is: \\frac{12}{5}", "0.5", False, "... is not \\frac{1}{2}"),
        ("The answer is: 10 and a half", "10.5", True, "'and a half'"),
        ("The answer is: 10 and 1/2", "10.5", True, "'and' before a fraction"),
    ],
    "scientific notation and scale words": [
        ("The answer is: 1.5e3", "1500", True, "e-notation"),
        ("The answer is: 1.5e3", "1.5", False, "... not 1.5"),
        ("The answer is: 1.5 x 10^3", "1500", True, "x 10^3"),
        ("The answer is: 1.5 million", "1500000", True, "a scale word"),
        ("The answer is: $1.5 million", "1.5", False, "... not 1.5"),
        ("The answer is: 5 thousand dollars", "5000", True, "thousand"),
        ("The answer is: twelve", "12", False, "number words are not read"),
        ("The answer is: 10^3", "1000", True, "a power of ten"),
        ("The answer is: 1e-3", "0.001", True, "a GSM8k line has no Euler's e: a negative exponent is scientific"),
    ],
    "ranges and alternatives": [
        ("The answer is: 18-20", "18", False, "a range"),
        ("The answer is: 18-20", "20", False, "... neither end"),
        ("The answer is: 18 to 20", "18", False, "'to'"),
        ("The answer is: 18 or 20", "18", False, "alternatives"),
        ("The answer is: between 18 and 20", "18", False, "'between'"),
        ("The answer is: 18\u201320 minutes", "18", False, "an en dash"),
        ("The answer is: 20-18 = 2", "2", True, "a difference with its value"),
        ("The answer is: -3", "-3", True, "a negative number is no range"),
        ("The answer is: 12 (or 13)", "12", False, "an alternative in brackets"),
        ("The answer is: 5 or more", "5", False, "a hedge"),
        ("The answer is: about 18", "18", False, "'about' the stated number"),
        ("The answer is: 18 apples, which is about 3 dozen", "18", True, "a hedge on another number is no hedge"),
    ],
    "read whole or refused": [
        ("The answer is: 1 000 000", "1000000", True, "digits grouped by spaces are one number"),
        ("The answer is: 12 345 apples", "12345", True, "... with a unit after them"),
        ("The answer is: 7.5 hours", "7.5", True, "one quantity, one unit"),
        ("The answer is: 1\u202f000", "1000", True, "a narrow no-break space between the groups"),
        ("The answer is: 1 000 000", "1", False, "... not its first group"),
        ("The answer is: 7 hours and 30 minutes", "7", False, "a compound quantity is not its first number"),
        ("The answer is: 7 hours and 30 minutes", "7.5", False, "... nor converted: the gold's unit is unknown"),
        ("The answer is: 2 feet 6 inches", "2", False, "without 'and'"),
        ("The answer is: 3,5", "3", False, "a decimal comma is not a thousands separator"),
        ("The answer is: 3,5", "3.5", False, "... nor read as a decimal (it may be a list)"),
        ("The answer is: 12 34", "12", False, "two numbers side by side"),
    ],
    "format": [
        ("The answer is: \\boxed{18}", "18", True, "\\boxed"),
        ("The answer is: $18.", "18", True, "a dollar sign and a sentence period"),
        ("The answer is: 18.00", "18", True, "trailing zeros"),
        ("The answer is: \\$1,000", "1000", True, "an escaped dollar and thousands"),
        ("The answer is:\n\n18", "18", True, "the value on the next line"),
        ("The answer is: 50%", "50", True, "a percentage is its number"),
    ],
}


SYMMETRIC = ("unordered", "mixed numbers", "numeric policy", "base subscripts", "irrational golds", "repeating decimals",
             "named functions", "products of constants and radicals", "matrix brackets", "euler's e")


def _flat(traps):
    return [(cls, *case) for cls, cases in traps.items() for case in cases]


@pytest.mark.parametrize("cls,pred,gold,question,equal,reason", _flat(MATH_TRAPS))
def test_math_trap(cls, pred, gold, question, equal, reason):
    assert is_equiv(pred, gold, question=question) is equal, f"{cls}: {reason}"


@pytest.mark.parametrize("cls,pred,gold,question,equal,reason",
                         [c for c in _flat(MATH_TRAPS) if c[0] in SYMMETRIC])
def test_math_trap_is_symmetric(cls, pred, gold, question, equal, reason):
    """Which side is the gold does not matter for these classes."""
    if gold is not None:
        assert is_equiv(gold, pred, question=question) is equal, f"{cls}: {reason}"


@pytest.mark.parametrize("cls,response,gold,correct,reason", _flat(GSM8K_TRAPS))
def test_gsm8k_trap(cls, response, gold, correct, reason):
    assert check_gsm8k(response, gold)["correct"] is correct, f"{cls}: {reason}"


def test_the_trap_set_has_its_classes_and_at_least_100_cases():
    counts = {cls: len(cases) for cls, cases in MATH_TRAPS.items()}
    counts.update({f"gsm8k {cls}": len(cases) for cls, cases in GSM8K_TRAPS.items()})
    assert sum(counts.values()) >= 100
    assert all(n >= 4 for n in counts.values()), counts
    verdicts = [c[4] for c in _flat(MATH_TRAPS)] + [c[3] for c in _flat(GSM8K_TRAPS)]
    assert 0.3 < sum(verdicts) / len(verdicts) < 0.7  # both verdicts are well represented
    second_pass = [MATH_TRAPS[c] for c in SYMMETRIC[3:]] + [GSM8K_TRAPS["read whole or refused"]]
    for cases in second_pass:  # issue 31's classes: at least three cases of each verdict
        verdicts = [c[-2] for c in cases]
        assert sum(verdicts) >= 3 and len(verdicts) - sum(verdicts) >= 3, cases[0]


def test_a_hedged_answer_line_is_ambiguous_in_strict_and_flexible():
    result = check_gsm8k("She needs 18 or 20 minutes.\nThe answer is: 18-20", "18")
    assert result["answer"] is None and result["flexible_answer"] is None
    assert line_value("18 or 20") == AMBIGUOUS and line_value("18") == 18


def test_check_math_passes_the_question_through():
    response = "So the solutions are 6 and -2.\nThe answer is: 6, -2"
    assert check_math(response, "-2, 6", question=ALL)["correct"] is True
    assert check_math(response, "-2, 6", question=INCREASING)["correct"] is False


@pytest.mark.parametrize("question,ordered", [
    (ALL, False), (INCREASING, True), (None, False), ("List them from least to greatest.", True),
    ("Find the ordered pair (a,b).", True), ("Enter all ordered pairs, separated by commas.", False),
    ("Enter the values, in that order.", True), ("Find x and y respectively.", True),
])
def test_asks_for_order(question, ordered):
    assert asks_for_order(question) is ordered


@pytest.mark.parametrize("text,hedged", [("18-20", True), ("20-18", False), ("-18", False), ("18 to 20", True),
                                         ("1-2\\sqrt3", False), ("x^2-3", False), ("18 or 20", True)])
def test_is_range(text, hedged):
    assert is_range(text) is hedged


# ---------------------------------------------------------------- the published scorers, by version

def test_gsm8k_compat_versions_follow_their_commits():
    # 96dae6b / 01f17bf: the rounded prediction must equal the gold; f45fc86 adds grader.math_equal
    assert check_gsm8k("The answer is: 1800", "#### 18")["compat_correct"] is False
    assert check_gsm8k("The answer is: 1800", "#### 18", compat="math-equal-f45fc86")["compat_correct"] is True
    assert check_gsm8k("The answer is: 0.18", "#### 18", compat="math-equal-f45fc86")["compat_correct"] is False
    assert check_gsm8k("The answer is: 70007", "#### 70000", compat="math-equal-f45fc86")["compat_correct"] is True
    assert check_gsm8k("The answer is: 70008", "#### 70000", compat="math-equal-f45fc86")["compat_correct"] is False
    assert check_gsm8k("The answer is: 7.6", "#### 8")["compat_correct"] is True  # both round 7.6 to 8
    with pytest.raises(ValueError, match="unknown GSM8k compat scorer"):
        check_gsm8k("The answer is: 1", "1", compat="latest")


def test_math_compat_versions_follow_their_commits():
    def compat(pred, gold, version):
        return check_math(f"The answer is: {pred}", gold, compat=version)["compat_correct"]

    assert compat("x/2", "7", "math-equal-09b6403") is True      # a normalisation error counts as right
    assert compat("x/2", "7", "math-equal-cd6a0e6") is False     # ... fixed
    assert compat("x/2", "7", "strings-96dae6b") is False
    assert compat("1800", "18", "math-equal-cd6a0e6") is True    # math_equal's x100
    assert compat("1800", "18", "strings-96dae6b") is False      # the first release compared strings only
    assert compat("\\dfrac{1}{2}", "\\frac12", "strings-96dae6b") is True
    assert compat("0.5", "\\frac12", "strings-96dae6b") is True  # its strip_string maps 0.5 to \frac{1}{2}
    assert compat("2/4", "\\frac12", "strings-96dae6b") is False


def test_hostile_answers_are_fast_and_never_raise():
    import time

    start = time.monotonic()
    assert check_gsm8k("The answer is: 5" + " " * 16000 + "apples", "5")["correct"] is True
    assert check_gsm8k("$" * 8000, "5")["correct"] is False
    assert check_gsm8k("The answer is: " + "9" * 5000, "5")["correct"] is False  # past int()'s digit limit
    assert is_equiv("5" + " " * 16000 + "apples", "5") is False  # too long to be an answer
    assert is_equiv("\\frac{" * 1000 + "1" + "}{2}" * 1000, "1") is False  # nesting deeper than recursion
    assert time.monotonic() - start < 5
