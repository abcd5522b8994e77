"""MATH answer equivalence: normalised strings first, then an exact sympy comparison under a time limit.

Why this shape: MATH golds are LaTeX written by people (``\\dfrac12``, ``10^\\circ``,
``5\\text{ cm}``, ``\\left(1,2\\right)``, ``6\\frac15``), and models write answers in their own styles
("3 \\cdot 6 = 18", "1.5e3", "x = 2 or x = -3"), so two right answers rarely match as raw strings; but a
scorer that is loose in the wrong way inflates accuracy. The rules here:
- a prediction (or gold) whose normalisation fails is wrong, never right;
- numbers compare exactly (decimals become fractions): 0.05 is not 5 and 18 is not 1800, so a
  number is never accepted at x100 or /100; 0.333 is not 1/3 (the numeric policy: ``math_sympy``);
- expressions compare with ``sympy.simplify(a - b) == 0`` under a time limit, and model text is
  converted to sympy by a small whitelisting converter (``latex_to_sympy``), never ``eval``-ed raw;
- answer styles (mixed numbers, scientific notation, scale words, "expression = value" and a named function's
  left-hand side, repeating decimals, ranges): ``answer_styles``; a range ("18-20", "18 to 20") is never a value;
  a subscript is read with its braces or without (``123_6`` = ``123_{6}``; all of ``100_10``'s digits are its base);
- collections: tuples, points, intervals and matrices compare item by item in order (``pmatrix``, ``bmatrix``,
  ``Bmatrix`` and ``matrix`` are one matrix; a ``vmatrix`` is a determinant and a ``Vmatrix`` a norm, never the
  matrix with the same entries, nor the value they stand for); sets ``\\{...\\}``,
  unions of intervals, "a \\pm b" and bare lists ("6, -2", "2 or 3") compare in any order — a bare list in
  order only when the question asks for an order ("in increasing order", "respectively", ...).

``math_compat.compat_is_equiv`` reproduces WizardMath's published scorer beside this one.
"""

from __future__ import annotations

import re

from rleif_kit.worlds.math.answer_styles import (is_range, rewrite_mixed, rewrite_repeating, rewrite_scales,
                                                rewrite_scientific, value_of_equation)
from rleif_kit.worlds.math.symbolic import MAX_EXPONENT, MAX_SYMPY_CHARS, _limited, latex_to_sympy, sympy_equal, to_sympy
from rleif_kit.worlds.math.latex import braces_balanced, rewrite_command, split_top

__all__ = ["MAX_EXPONENT", "MAX_SYMPY_CHARS", "_limited", "asks_for_order", "is_equiv", "latex_to_sympy",
           "normalize", "to_sympy"]

_REPLACE = [("\\dfrac", "\\frac"), ("\\tfrac", "\\frac"), ("\\dbinom", "\\binom"), ("\\tbinom", "\\binom"),
            ("\\left", ""), ("\\right", ""), ("\\displaystyle", ""), ("^{\\circ}", ""), ("^\\circ", ""),
            ("\\circ", ""), ("\u00b0", ""), ("\\degree", ""), ("\\%", ""), ("%", ""),
            ("\\!", ""), ("\\,", ""), ("\\;", ""), ("\\:", ""), ("\\ ", " "), ("\\qquad", " "), ("\\quad", " "),
            ("~", " "), ("{,}", ""), ("\u2212", "-"), ("\u00bd", "\\frac{1}{2}"), ("\u2153", "\\frac{1}{3}"),
            ("\u2154", "\\frac{2}{3}"), ("\u00bc", "\\frac{1}{4}"), ("\u00be", "\\frac{3}{4}"),
            ("\u215b", "\\frac{1}{8}")]
_TEXT_CMD = r"\\(?:text|textbf|textit|textnormal|mbox|mathrm|mathbf|operatorname)"
_SUBSCRIPT = re.compile(r"_(\d+|[a-zA-Z])")
_TRAILING_UNIT = re.compile(_TEXT_CMD + r"\{[^{}]*\}(?:\^\{?\d\}?)?\s*$")
_WORD_UNITS = re.compile(r"(?<=[\d})\]])\s+[a-zA-Z]{2,}(?:\s+[a-zA-Z]+){0,2}(?:\^\{?\d\}?)?$")
# trailing words that are not units: constants, scale words and short letter runs that read as variables ("3 ab")
_NOT_UNITS = {"pi", "dozen", "score", "half", "third", "quarter", "squared", "cubed"}
_SHORT_UNITS = {"cm", "mm", "km", "m", "ft", "in", "yd", "mi", "kg", "g", "mg", "lb", "lbs", "oz", "ml", "l", "hr",
                "hrs", "min", "s", "sec", "mph", "kph", "cc", "sq", "cu", "deg", "rad", "am", "pm", "usd"}


def _strip_wrappers(s: str) -> str:
    """Drop ``$...$``, ``\\(...\\)``, ``\\[...\\]`` and a ``\\boxed{...}`` around the whole answer."""
    s = s.strip()
    for left, right in (("\\(", "\\)"), ("\\[", "\\]")):
        if s.startswith(left) and s.endswith(right):
            s = s[len(left):-len(right)].strip()
    m = re.fullmatch(r"\\boxed\{(.*)\}", s, flags=re.S)
    if m and braces_balanced(m.group(1)):
        s = m.group(1).strip()
    return s


MAX_ANSWER_CHARS = 2000
_HEDGE_TEXT = re.compile(r"\b(?:or more|or less|or fewer|at most|at least|more than|less than|fewer than)\b", re.I)
_ALTERNATIVES = re.compile(r",?\s+(?:or|and)\s+")


def _unit_or_not(m: re.Match) -> str:
    """"12 inches" -> "12"; "3 ab", "4 pi", "5 dozen" keep their words (a product or a scale, not a unit)."""
    words = re.findall(r"[a-zA-Z]+", m.group())
    if any(w.lower() in _NOT_UNITS for w in words) or len(words) == 1 and len(words[0]) <= 3 and \
            words[0].lower() not in _SHORT_UNITS:
        return m.group()
    return ""


def normalize(answer: str | None) -> str | None:
    """A canonical string for a MATH answer, or None when it cannot be normalised (empty, unbalanced).

    Drops delimiters, ``\\left``/``\\right``, spacing, ``$``, ``%``, degrees, ``\\text{}`` units and
    trailing unit words, a trailing period, a short left-hand side (``x = 5`` -> ``5``) or a computation
    (``3\\cdot6=18`` -> ``18``), an ``\\approx`` tail, thousands commas; writes ``\\dfrac``/``\\tfrac`` as
    ``\\frac``, ``\\frac12`` as ``\\frac{1}{2}``, mixed numbers as fractions, scientific notation and scale
    words as digits, "or"/"and" between answers as commas; a range reads as ``range:...`` (never a value).
    """
    if answer is None or not answer.strip():
        return None
    if len(answer) > MAX_ANSWER_CHARS:  # no answer is that long; bounds every rule below on hostile input
        return None
    if _HEDGE_TEXT.search(answer):  # "5 \\text{ or more}" must not lose its hedge to the unit rule
        return "range:" + re.sub(r"\s+", "", answer)
    s = answer.replace("\\\\", "\x01")  # a row break "\\\\" must survive the "\\ " (space) rule below
    s = s.replace("\n", " ").replace("\\$", "").replace("$", "")
    s = _strip_wrappers(s)
    for old, new in _REPLACE:
        s = s.replace(old, new)
    s = rewrite_repeating(s)
    s = rewrite_scales(re.sub(_TEXT_CMD + r"\{\s*((?:thousand|million|billion|trillion)\b)\s*\}", r" \1", s))
    whole = re.fullmatch(_TEXT_CMD + r"\{([^{}]*)\}", s.strip())
    if whole:
        s = whole.group(1)
    while _TRAILING_UNIT.search(s) and _TRAILING_UNIT.sub("", s).strip():
        s = _TRAILING_UNIT.sub("", s)
    s = re.sub(_TEXT_CMD + r"\{([^{}]*)\}", r"\1", s)
    s = rewrite_scientific(rewrite_scales(s.strip().rstrip(".").strip()))  # before unit words: "million" is none
    if is_range(s, alternatives=False, whole=True):
        return "range:" + re.sub(r"\s+", "", s)
    s = _ALTERNATIVES.sub(",", s)
    s = _WORD_UNITS.sub(_unit_or_not, s)
    for approx in ("\\approx", "\u2248"):
        if approx in s and s.split(approx)[0].strip():
            s = s.split(approx)[0]
    s = value_of_equation(s)
    s = re.sub(r"^\s*[a-zA-Z]\s*\\in\s*", "", s)  # "x \in [2,5)" -> "[2,5)"
    s = rewrite_mixed(s, latex=False)
    spaced_list = re.search(r",\s", s) is not None  # "10, 200" is two answers, "10,200" one number
    s = re.sub(r"(\\[a-zA-Z]+)\s+(?=[a-zA-Z])", "\\1\x00", s)  # keep "\pi r" apart while spaces go
    s = re.sub(r"\s+", "", s).replace("\x00", " ").replace("\x01", "\\\\")
    if not s or not braces_balanced(s):
        return None
    s = _SUBSCRIPT.sub(r"_{\1}", s)  # "123_6" is "123_{6}": a base's digits, all of them ("100_10" is base 10)
    for name, nargs, fmt in (("\\frac", 2, lambda a, b, option: f"\\frac{{{a}}}{{{b}}}"),
                             ("\\binom", 2, lambda a, b, option: f"\\binom{{{a}}}{{{b}}}"),
                             ("\\sqrt", 1, lambda a, option: f"\\sqrt[{option}]{{{a}}}" if option
                              else f"\\sqrt{{{a}}}")):
        s = rewrite_command(s, name, nargs, fmt)
        if s is None:
            return None
    s = rewrite_mixed(s)
    if not spaced_list and re.fullmatch(r"-?\d{1,3}(,\d{3})+(\.\d+)?", s):
        s = s.replace(",", "")
    s = re.sub(r"(?<![\d.])\.(\d)", r"0.\1", s)
    if re.fullmatch(r"-?\d+\.\d+", s):
        s = s.rstrip("0").rstrip(".")
    return s or None

# ---------------------------------------------------------------- structures and the public check

_ORDER_WORDS = re.compile(r"\b(?:(?:increasing|decreasing|ascending|descending)(?: order)?|from (?:least|smallest|"
                          r"lowest|greatest|largest|highest) to|in (?:that|this|the same|the given)? ?order|"
                          r"respectively)\b", re.I)


def asks_for_order(question: str | None) -> bool:
    """Does the question ask for a list in a given order ("in increasing order", "respectively", ...)? An
    "ordered pair" asks for order too, unless the question asks for all of something (then the pairs, each in
    order, may come in any order). Without a question, a bare list is unordered: MATH's lists are solution
    sets ("Enter all the solutions, separated by commas")."""
    if not question:
        return False
    return bool(_ORDER_WORDS.search(question)) or (re.search(r"\bordered\b", question, re.I) is not None
                                                   and re.search(r"\ball\b", question, re.I) is None)


# a matrix in round, square or curly brackets is one matrix; vertical bars make it a determinant (a number), double
# bars a norm: neither equals the matrix with the same entries
_MATRIX_KINDS = {"vmatrix": "determinant", "Vmatrix": "norm"}


def _structure(s: str) -> tuple[str, list[str]] | None:
    """(kind, items) for tuples, intervals, ordered lists and matrices; None for a single value."""
    m = re.fullmatch(r"\\begin\{([pbvVB]?matrix)\}(.*)\\end\{\1\}", s)
    if m:
        rows = [r.split("&") for r in m.group(2).split("\\\\") if r]
        return f"{_MATRIX_KINDS.get(m.group(1), 'matrix')}{len(rows)}x{len(rows[0]) if rows else 0}", \
            [e for r in rows for e in r]
    opener = s[:1]
    if opener in ("(", "[") and s[-1:] in ")]":
        inner = s[1:-1]
        items = split_top(inner)
        if braces_balanced(inner) and all(_parens_ok(i) for i in items) and len(items) > 1:
            return opener + s[-1], items
    items = split_top(s)
    return ("list", items) if len(items) > 1 else None


def _collection(s: str, ordered_lists: bool) -> list[str] | None:
    """The items of an answer whose order does not matter: a union of intervals, a set ``\\{...\\}``, ``a \\pm b``
    and (unless the question asks for an order) a bare list; None otherwise."""
    if len(union := split_top(s, "\\cup")) > 1:
        return union
    if s.startswith("\\{") and s.endswith("\\}") and braces_balanced(s[2:-2]):
        return [i for i in split_top(s[2:-2]) if i] or [""]
    if len(items := split_top(s)) > 1:
        return None if ordered_lists else items
    if len(pm := split_top(s, "\\pm")) == 2:
        return [f"{pm[0]}+{pm[1]}", f"{pm[0]}-{pm[1]}"] if pm[0] else [pm[1], f"-{pm[1]}"]
    if s.count("\\pm") == 1:  # inside a fraction: \\frac{1\\pm\\sqrt5}{2} is two roots
        return [s.replace("\\pm", "+"), s.replace("\\pm", "-")]
    return None


def _parens_ok(s: str) -> bool:
    depth = 0
    for ch in s:
        depth += (ch in "([") - (ch in ")]")
        if depth < 0:
            return False
    return depth == 0


def _scalar_equiv(a: str, b: str, timeout: float) -> bool:
    if a == b:
        return True
    if a.startswith("range:") or b.startswith("range:"):
        return False
    if "=" in a or "=" in b:
        if a.count("=") == b.count("=") == 1:
            return all(_scalar_equiv(x, y, timeout) for x, y in zip(a.split("="), b.split("=")))
        return False
    return _limited(lambda: sympy_equal(a, b), timeout)


def _matched(ps: list[str], gs: list[str], equal) -> bool:
    """Can every predicted item be paired with its own equal gold item (a perfect matching)?"""
    if len(ps) != len(gs):
        return False
    cache: dict[tuple[int, int], bool] = {}
    match: dict[int, int] = {}  # gold index -> predicted index

    def same(i: int, j: int) -> bool:
        if (i, j) not in cache:
            cache[i, j] = equal(ps[i], gs[j])
        return cache[i, j]

    def augment(i: int, seen: set[int]) -> bool:
        for j in range(len(gs)):
            if j not in seen and same(i, j):
                seen.add(j)
                if j not in match or augment(match[j], seen):
                    match[j] = i
                    return True
        return False

    return all(augment(i, set()) for i in range(len(ps)))


def is_equiv(prediction: str | None, gold: str | None, timeout: float = 2.0, question: str | None = None) -> bool:
    """Strict MATH equivalence of a predicted answer and the gold answer (both as extracted, LaTeX).

    Equal normalised strings are equal; otherwise sets, unions, ``\\pm`` and bare lists match item for item in
    any order (bare lists in order when ``question`` asks for one, see :func:`asks_for_order`), tuples,
    intervals and matrices item by item in order (their bracket kinds must match), and single values by
    ``sympy_equal`` within ``timeout`` seconds. A None or unnormalisable prediction is wrong.
    """
    try:
        p, g = normalize(prediction), normalize(gold)
        if p is None or g is None:
            return False
        return _equiv(p, g, timeout, asks_for_order(question))
    except RecursionError:  # a thousand nested \\frac: no answer, never an exception out of the scorer
        return False


def _equiv(p: str, g: str, timeout: float, ordered_lists: bool) -> bool:
    if p == g:
        return True
    cp, cg = _collection(p, ordered_lists), _collection(g, ordered_lists)
    if cp is not None or cg is not None:
        if cp is None or cg is None:
            return False
        return _matched(cp, cg, lambda x, y: _item_equiv(x, y, timeout, ordered_lists))
    sp, sg = _structure(p), _structure(g)
    if sp is None and sg is None:
        return _scalar_equiv(p, g, timeout)
    if sp is None or sg is None or sp[0] != sg[0] or len(sp[1]) != len(sg[1]):
        return False
    return all(_item_equiv(x, y, timeout, ordered_lists) for x, y in zip(sp[1], sg[1]))


def _item_equiv(x: str, y: str, timeout: float, ordered_lists: bool) -> bool:
    nx, ny = normalize(x), normalize(y)
    return nx is not None and ny is not None and _equiv(nx, ny, timeout, ordered_lists)
