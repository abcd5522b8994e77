"""The ways real answers are written, rewritten to the one reading a checker compares — or refused.

Why: a model that writes "2 1/2", "1.5e3", "1.5 million" or "3 * 6 = 18" has stated a value, and a checker
that reads 2, 1.5 or 3 there scores a right answer wrong; a model that writes "18-20" or "18 or 20" has not
stated one value, and a checker that reads 18 there scores a hedge right. The rules, each tested in
``tests/test_math_traps.py``:

- mixed numbers: ``6\\frac15`` and ``33 \\frac{1}{3}`` (LaTeX) or "2 1/2" (text) are 31/5, 100/3, 5/2 — only
  when the fraction is proper (``2\\frac{3}{2}`` stays a product); a sign in front applies to the whole;
- scientific notation: "1.5e3", "1.5E+3", "1.5 x 10^3", "1.5 \\times 10^{3}", "1.5·10³" are 1500, "2.5e-2" is 1/40;
  in MATH a lowercase e after a whole number with a minus ("2e-1", "2e - 1") is Euler's e: 2e - 1, never 0.2
  (a GSM8k answer line has no constants: there "1e-3" is 0.001);
- scale words after digits: "1.5 million", "3 thousand", "2.5 billion"; numbers spelled out in words
  ("twelve") are not read: the trained format states the number;
- "expression = value" (``3 * 6 = 18``): the value after the last "=" counts, when everything before it is
  arithmetic; "value ≈ decimal" (``\\frac13 \\approx 0.33``): the exact value before it counts; a short or
  named-function left-hand side goes (``x = 5``, ``f(x) = x^2``, ``f^{-1}(x) = \\frac{x-1}{2}``, ``g(t)=3t``);
- repeating decimals (``0.\\overline{3}``, ``0.1\\overline{6}``, ``\\bar{}`` too) are their exact value (1/3, 1/6),
  as ``0.5`` is ``\\frac12``: the notation states the number exactly, so it is read, never refused;
- ranges and alternatives ("18-20" with 18 < 20, "18–20", "18 to 20", "between 18 and 20", "18 or 20"):
  ambiguous, never one value (in MATH, "or" / "and" between answers make a list, which matches a list gold);
- a GSM8k answer line is read whole or refused, never cut at its first number: digits grouped by spaces three
  at a time ("1 000 000") are one number; a decimal comma or a list ("3,5", "3, 5"), two numbers side by side
  ("12 34") and a compound quantity ("7 hours and 30 minutes", "2 ft 6 in": the gold's unit is unknown) are
  ambiguous.
"""

from __future__ import annotations

import re
from fractions import Fraction

from rleif_kit.worlds.math.latex import rewrite_command, split_top
from rleif_kit.worlds.numbers import format_number, number_value, numbers

AMBIGUOUS = "ambiguous"  # what a line that states a range or alternatives reads as (never equal to a value)

SCALES = {"thousand": 10 ** 3, "million": 10 ** 6, "billion": 10 ** 9, "trillion": 10 ** 12}
_SCALE = re.compile(r"(?<![\w.])(\d+(?:\.\d+)?)\s*(thousand|million|billion|trillion)\b", re.I)
_SUPERSCRIPTS = str.maketrans("\u2070\u00b9\u00b2\u00b3\u2074\u2075\u2076\u2077\u2078\u2079\u207b", "0123456789-")
_SCI_E = re.compile(r"(?<![\w.])(\d+(?:\.\d+)?)[eE]([+-]?\d{1,3})(?![\w.])")
_SCI_TIMES = re.compile(r"(?<![\w.])(\d+(?:\.\d+)?)\s*(?:\\times|\\cdot|[x\u00d7*\u00b7])\s*10\s*(?:\^|\*\*)\s*"
                        r"\{?\s*([+-]?\d{1,3})\s*\}?")
_MIXED_LATEX = re.compile(r"(?<![\w.^_\\])(\d+)\s*\\frac\{(\d+)\}\{(\d+)\}")
_MIXED_PLAIN = re.compile(r"(?<![\w.^_/\\])(\d+)\s+(\d+)\s*/\s*(\d+)(?![\w.])")
_PLAIN = r"\$? ?(?:\d{1,3}(?:,\d{3})+(?!\d)|\d+)(?:\.\d+)?"
_RANGE_DASH = re.compile(rf"(?<![\w.)\]}}{{^_\\/*(+&-])({_PLAIN}) ?- ?({_PLAIN})(?! ?[\w.(\\^{{/*!])")
_RANGE_WORD = re.compile(rf"{_PLAIN} ?(?:[\u2013\u2014]|\bto\b) ?-?{_PLAIN}|\bbetween -?{_PLAIN} and -?{_PLAIN}", re.I)
_OR = re.compile(rf"{_PLAIN} ?,? ?\(?\bor\b ?-?{_PLAIN}", re.I)
# a hedge on the stated number itself: "about 18", "at least 5", "5 or more" ("18 apples, about 3 dozen" is not)
_HEDGE = re.compile(rf"(?:^|[^\w])(?:at most|at least|more than|less than|fewer than|up to|approximately|about|"
                    rf"around|roughly|nearly|almost|over|under) ?{_PLAIN}|{_PLAIN}(?: [a-z]+)? or (?:more|less|fewer)\b",
                    re.I)
_ARITHMETIC = re.compile(r"[\d\s.,+\-*/()\[\]{}^x\u00d7\u00b7\u2212%:]*")
_OPERATOR_COMMANDS = re.compile(r"\\(?:times|cdot|div|[dt]?frac)(?![a-zA-Z])")


def _decimal(value: Fraction) -> str:
    return format_number(value) or "0"


def rewrite_scales(text: str) -> str:
    """"1.5 million" -> "1500000" (exact)."""
    return _SCALE.sub(lambda m: _decimal(Fraction(m.group(1)) * SCALES[m.group(2).lower()]), text)


def rewrite_scientific(text: str, euler: bool = True) -> str:
    """"1.5e3", "1.5 x 10^3", "1.5 \\times 10^{3}", "1.5·10³" -> "1500" (exact; exponents up to 3 digits). With
    ``euler`` (MATH, where e is a constant) "2e-1" stays 2e - 1; a GSM8k line has no e, so there it is 0.2."""
    text = text.translate(_SUPERSCRIPTS) if "10" in text else text
    for pattern in (_SCI_E, _SCI_TIMES):
        text = pattern.sub(lambda m: m.group() if euler and _euler(m) else
                           _decimal(Fraction(m.group(1)) * Fraction(10) ** int(m.group(2))), text)
    return text


def _euler(m: re.Match) -> bool:
    """"2e-1" is 2e - 1 (Euler's e beside digits), not 0.2: a lowercase e after a whole number, with a minus. A
    decimal mantissa ("2.5e-2"), a capital E or a positive exponent ("1e3") is scientific notation."""
    return m.re is _SCI_E and "." not in m.group(1) and "e" in m.group() and m.group(2).startswith("-")


def rewrite_mixed(text: str, latex: bool = True) -> str:
    """Mixed numbers to improper fractions: ``6\\frac{1}{5}`` -> ``\\frac{31}{5}``, "2 1/2" -> "5/2"; only for
    a proper fraction (numerator below the denominator), else the text is left as it is."""
    def whole(m: re.Match, fmt: str) -> str:
        n, num, den = int(m.group(1)), int(m.group(2)), int(m.group(3))
        if not 0 < num < den:
            return m.group(0)
        return fmt.format(n * den + num, den)
    text = _MIXED_PLAIN.sub(lambda m: whole(m, "{}/{}"), text)
    return _MIXED_LATEX.sub(lambda m: whole(m, "\\frac{{{}}}{{{}}}"), text) if latex else text


def is_range(text: str, alternatives: bool = True, whole: bool = False) -> bool:
    """Does ``text`` state a range of numbers ("18-20", "18 to 20"), a hedge ("5 or more", "at least 5"), or
    (``alternatives``) "18 or 20"? With ``whole`` (a MATH answer, where "1-2\\sqrt3" is an expression), only
    a text that is nothing but the range, or a number with a hedge, counts.

    A hyphen between two plain numbers reads as a range only when the first is the smaller ("18-20"); "20-18"
    is a difference, as is anything with a sign, a bracket or a letter beside it."""
    text = text[:400]  # an answer line, not a document: bounds the regex work on hostile input
    if whole:
        bare = text.strip().rstrip(".").strip()
        if _hedged(bare):
            return True
        m = re.fullmatch(rf"({_PLAIN}) ?- ?({_PLAIN})", bare)
        return bool(_RANGE_WORD.fullmatch(bare) or alternatives and _OR.fullmatch(bare)
                    or m and _low_high(m.group(1), m.group(2)))
    if _RANGE_WORD.search(text) or alternatives and _OR.search(text) or _hedged(text):
        return True
    for m in _RANGE_DASH.finditer(text):
        if _low_high(*m.groups()):
            return True
    return False


def _hedged(text: str) -> bool:
    """The first number of ``text`` carries a hedge ("about 18", "at least 5", "5 or more")."""
    first = numbers(text)
    m = _HEDGE.search(text)
    return bool(m and first and m.start() <= first[0].start() + 1 and m.end() >= first[0].end())


def _low_high(a: str, b: str) -> bool:
    low, high = (Fraction(g.replace("$", "").replace(",", "").strip()) for g in (a, b))
    return low < high


def _first_line(text: str) -> str:
    for line in text.splitlines():
        if line.strip():
            return line.strip()
    return ""


def _clean(line: str) -> str:
    """LaTeX markup that carries no value: ``\\boxed{}``, ``\\text{}``, ``$``, spacing commands."""
    line = re.sub(r"\\(?:boxed|text|textbf|mathrm|mbox)\{([^{}]*)\}", r"\1", line)
    line = re.sub(r"\\[dt]frac", r"\\frac", line)
    canonical = rewrite_command(line, "\\frac", 2, lambda a, b, option: f"\\frac{{{a.strip()}}}{{{b.strip()}}}")
    line = re.sub(r"\\frac\{(\d+)\}\{(\d+)\}", r" \1/\2", rewrite_mixed(canonical if canonical is not None else line))
    for old, new in (("\\$", "$"), ("\\!", ""), ("\\,", ""), ("{,}", ","), ("\\left", ""), ("\\right", ""),
                     ("\\%", "%"), ("\\(", ""), ("\\)", ""), ("\\[", ""), ("\\]", "")):
        line = line.replace(old, new)
    return line.replace("$", " ")  # "$5" is 5 and "$18$" is 18: a dollar sign or a math delimiter, never a value


def _sentence(line: str) -> str:
    """The line up to its first sentence end (a period not inside a number)."""
    m = re.search(r"\.(?!\d)", line)
    return line[:m.start()] if m else line


def line_value(text: str) -> Fraction | str | None:
    """The one value an answer line states (what follows "The answer is:"), :data:`AMBIGUOUS` for a range
    or alternatives, None when it states no number. See the module docstring for the styles read."""
    line = _clean(_first_line(text)[:400])  # an answer line, not a document
    line = _GROUPED.sub(lambda m: re.sub(r"\D", "", m.group()), line)  # "1 000 000" is one number
    if "=" in line:
        head, _, value = line.rpartition("=")
        if len(numbers(value)) == 1 and all(_ARITHMETIC.fullmatch(_OPERATOR_COMMANDS.sub(" ", part))
                                            for part in head.split("=")):
            line = value
    line = re.sub(r"(\d+) and a half\b", lambda m: f"{m.group(1)}.5", line)
    line = re.sub(r"(\d+) and (\d+/\d+)", r"\1 \2", line)  # "10 and 1/2" is a mixed number

    for approx in ("\\approx", "\u2248"):
        if approx in line and numbers(line.split(approx)[0]):
            line = line.split(approx)[0]
    line = rewrite_scientific(rewrite_scales(line), euler=False)
    line = re.sub(r"(?<![\w.])(\d{1,3}) ?\^ ?\{?(\d)\}?(?![\d.])",
                  lambda m: str(int(m.group(1)) ** int(m.group(2))), line)  # "10^3"
    line = _sentence(rewrite_mixed(line, latex=False))
    if is_range(line):
        return AMBIGUOUS
    found = numbers(line)
    if found and _NOT_WHOLE.match(line, found[0].end()):
        return AMBIGUOUS
    return number_value(found[0]) if found else None


# digits grouped by spaces, three to a group ("1 000 000", "12 345"; thin and no-break spaces too): one number
_GROUPED = re.compile(r"(?<![\w.,])\d{1,3}(?:[ \u00a0\u2009\u202f]\d{3})+(?![\d,]|\.\d)")
# what after the first number says it is not the whole answer: a decimal comma or a list ("3,5", "3, 5"), another
# number after a space ("12 34"), or a compound quantity ("7 hours and 30 minutes", "2 ft 6 in", "7h 30m": which
# unit the gold is in is unknown, so it is refused rather than converted)
_NOT_WHOLE = re.compile(r",\s?\d|\s+\d|\s*[a-zA-Z]+\.?,?\s*(?:and\s+)?\$?\d")


_REPEATING = re.compile(r"(?<![\d.])(\d*)\.(\d*)\\(?:overline|bar)\s*(?:\{(\d+)\}|(\d))")


def rewrite_repeating(text: str) -> str:
    """Repeating decimals to exact fractions: ``0.\\overline{3}`` -> ``\\frac{1}{3}``, ``0.1\\overline{6}`` ->
    ``\\frac{1}{6}``, ``1.\\overline{27}`` -> ``\\frac{14}{11}`` (a sign in front stays in front)."""
    def exact(m: re.Match) -> str:
        whole, fixed, period = m.group(1) or "0", m.group(2), m.group(3) or m.group(4)
        shift = 10 ** len(fixed)
        value = int(whole) + Fraction(int(fixed or "0"), shift) + Fraction(int(period), (10 ** len(period) - 1) * shift)
        return f"\\frac{{{value.numerator}}}{{{value.denominator}}}"
    return _REPEATING.sub(exact, text)


_PLAIN_VALUE = re.compile(r"-?\d+(?:\.\d+)?(?:/\d+)?|-?\\frac\{\d+\}\{\d+\}")
_LATEX_OPERATORS = re.compile(r"\\(?:times|cdot|div|frac|sqrt)(?![a-zA-Z])")
_SHORT_LHS = re.compile(r"\s*(?:[a-zA-Z]|\\[a-zA-Z]+)(?:_\{?\w+\}?)?\s*")
# a named function's left-hand side: f(x), f^{-1}(x), f'(x), g(t), P(A), h(2), f(x,y)
_FUNCTION_LHS = re.compile(r"\s*(?:[a-zA-Z]|\\[a-zA-Z]+)(?:_\{?\w+\}?)?(?:\^\{?-1\}?|'{1,3})?\s*"
                           r"\(\s*(?:[a-zA-Z0-9.\-]+|\\[a-zA-Z]+)(?:\s*,\s*(?:[a-zA-Z0-9.\-]+|\\[a-zA-Z]+))*\s*\)\s*")


def _arithmetic(parts: list[str]) -> bool:
    return all(re.fullmatch(r"[\d\s.+\-*/()^!{}]*", _LATEX_OPERATORS.sub(" ", p)) and re.search(r"\d", p)
               for p in parts)


def value_of_equation(s: str) -> str:
    """``x = 5`` -> ``5``; ``f(x) = x^2`` -> ``x^2``; ``3 \\cdot 6 = 18`` -> ``18`` (the value of an answer line that
    shows its computation: the last side, when it is a number and every side before it is arithmetic; or the
    value stated first, ``18 = 3 \\cdot 6``); anything else unchanged (``x+y=5`` stays an equation)."""
    parts = split_top(s, "=")
    if len(parts) < 2:
        return s
    if _arithmetic(parts[:-1]) and _PLAIN_VALUE.fullmatch(parts[-1].replace(" ", "")):
        return parts[-1].strip()
    if _PLAIN_VALUE.fullmatch(parts[0].replace(" ", "")) and _arithmetic(parts[1:]):
        return parts[0].strip()
    if len(parts) == 2 and (_SHORT_LHS.fullmatch(parts[0]) or _FUNCTION_LHS.fullmatch(parts[0])):
        return parts[1]
    return s
