"""Answer extraction and checking for GSM8k and MATH, without a model.

Why strict by default: a headline accuracy should count only answers the model stated in the
format it was trained to use (WizardMath's "The answer is: X"). Looser readings are kept, but as
separate numbers a report shows next to the strict one:
- GSM8k ``flexible``: falls back to the last number in the response;
- ``compat``: the published WizardMath scorer reproduced (GSM8k rounds the prediction to an
  integer; MATH uses its string normalisation and accepts a number at x100 or /100), so a user can
  see how much of a published figure comes from the scorer.

Numbers are compared exactly, as fractions: "1,000" = "1000", "$5.00" = "5", "3/4" = "0.75";
"50%" is 50 (GSM8k golds state percentages as the number), never 0.5; "18" never equals "1800".
"""

from __future__ import annotations

import re
from fractions import Fraction
from typing import Any

from rleif_kit.worlds.math import answer_styles, compat as math_compat, equiv as math_equiv
from rleif_kit.worlds.numbers import format_number, normalize_number, number_value, numbers

ANSWER_MARK = "The answer is:"
GSM8K_GOLD_MARK = "####"
__all__ = ["format_number", "normalize_number"]  # re-exported: the number readers live in ``numbers``


def gsm8k_gold(answer: str) -> Fraction | None:
    """GSM8k's gold value: the number after the last ``####`` (or the whole text when there is none)."""
    tail = answer.rsplit(GSM8K_GOLD_MARK, 1)[-1]
    return normalize_number(tail.strip().splitlines()[0] if tail.strip() else tail)


def extract_gsm8k(response: str, flexible: bool = False) -> Fraction | None:
    """The model's GSM8k answer.

    Strict: the value the answer line states — the line after the last "The answer is:", or after the
    last ``####`` when the response has no such line — read by ``answer_styles.line_value`` ("3 * 6 = 18"
    is 18, "2 1/2" is 5/2, "1.5e3" and "1.5 thousand" are 1500; a range or alternatives, "18-20",
    "18 or 20", state no single value and read as None). Flexible: the strict answer; where there is no
    answer line (or it holds no number), the last number in the response (a model that ends "... so she
    has 18 apples." without the line). A hedged answer line is None in both.
    """
    for mark in (ANSWER_MARK, GSM8K_GOLD_MARK):
        if mark in response:
            value = answer_styles.line_value(response.rsplit(mark, 1)[1])
            if value == answer_styles.AMBIGUOUS:
                return None
            if value is not None or not flexible:
                return value
            break
    if flexible:
        found = numbers(response)
        return number_value(found[-1]) if found else None
    return None


def wizardmath_gsm8k_answer(response: str) -> int | None:
    """WizardMath's published GSM8k extraction (gsm8k_inference.py), reproduced for ``compat``.

    It takes the first match of ``[-+]?\\d*[.,/]?\\d+`` after the last "The answer is: " and ROUNDS
    it to an integer (so 7.6 scores as 8, and "1,000,000" reads as 1000).
    """
    parts = response.split("The answer is: ")
    if len(parts) < 2:
        return None
    m = re.search(r"[\-+]?\d*[\.,/]?\d+", parts[-1].strip())
    if not m:
        return None
    text = m.group().replace(",", "")
    try:
        if "/" in text:
            num, den = text.split("/")
            if float(den) == 0:
                return round(float(num))
            return round(float(Fraction(text)))
        value = float(text)
    except (ValueError, ZeroDivisionError):
        return None
    return None if value == float("inf") else round(value)


def check_gsm8k(response: str, gold: str, compat: str = "round-96dae6b") -> dict[str, Any]:
    """Strict, flexible and compat correctness of one GSM8k response against its gold.

    ``gold`` is GSM8k's full answer field (with ``#### X``) or the bare number. A gold that does not
    normalise makes every mode wrong: an item that cannot be checked is never counted right.
    """
    gold_value = gsm8k_gold(gold)
    strict = extract_gsm8k(response)
    flexible = extract_gsm8k(response, flexible=True)
    compat_answer = wizardmath_gsm8k_answer(response)
    ok = gold_value is not None
    return {
        "gold": format_number(gold_value),
        "answer": format_number(strict),
        "correct": ok and strict is not None and strict == gold_value,
        "flexible_answer": format_number(flexible),
        "flexible_correct": ok and flexible is not None and flexible == gold_value,
        "compat_correct": ok and math_compat.compat_gsm8k_equal(compat_answer, float(gold_value), compat),
    }


# ---------------------------------------------------------------- MATH


def last_boxed(text: str | None) -> str | None:
    """The content of the last ``\\boxed{...}`` (or ``\\fbox{...}``), braces balanced; None if absent.

    Also reads the brace-less form ``\\boxed 5`` up to the next ``$`` or space.
    """
    if not text:
        return None
    b, f = text.rfind("\\boxed"), text.rfind("\\fbox")
    if b < 0 and f < 0:
        return None
    rest = text[b + len("\\boxed"):] if b >= f else text[f + len("\\fbox"):]
    if rest.startswith(" "):
        words = rest.strip().split("$")[0].split()
        return words[0] if words else None
    if not rest.startswith("{"):
        return None
    depth = 0
    for i, ch in enumerate(rest):
        depth += (ch == "{") - (ch == "}")
        if depth == 0:
            return rest[1:i]
    return None  # unbalanced: no answer rather than a truncated one


def math_gold(solution: str) -> str | None:
    """MATH's gold answer: the content of the solution's last ``\\boxed{}``."""
    return last_boxed(solution)


def _answer_line(text: str) -> str:
    """The answer after "The answer is:": up to the first line break outside braces and ``\\begin..\\end``,
    trailing period dropped."""
    depth = 0
    end = len(text)
    for i, ch in enumerate(text):
        depth += (ch == "{") - (ch == "}")
        if ch == "\n" and depth <= 0 and text[:i].strip() and \
                text.count("\\begin{", 0, i) <= text.count("\\end{", 0, i):
            end = i
            break
    line = text[:end].strip()
    if line.endswith("."):
        line = line[:-1].rstrip()
    return line


def extract_math(response: str) -> str | None:
    """The model's MATH answer: after the last "The answer is:" (its ``\\boxed{}`` if it has one),
    else the content of the last ``\\boxed{}``; None when the response states neither."""
    if ANSWER_MARK in response:
        line = _answer_line(response.rsplit(ANSWER_MARK, 1)[1])
        boxed = last_boxed(line)
        if boxed is not None:
            return boxed
        if line:
            return line
    return last_boxed(response)


def wizardmath_math_answer(response: str) -> str | None:
    """WizardMath's published MATH extraction (MATH_inference.py), reproduced for ``compat``:
    the text after the last "The answer is: " up to the first ".\\n", one trailing period dropped."""
    parts = response.split("The answer is: ")
    if len(parts) < 2:
        return None
    ans = parts[-1].split(".\n")[0].strip()
    if ans.endswith("."):
        ans = ans[:-1]
    return ans.strip()


def check_math(response: str, gold: str | None, timeout: float = 2.0, question: str | None = None,
               compat: str = "math-equal-09b6403") -> dict[str, Any]:
    """Strict and compat correctness of one MATH response; ``gold`` is the answer (see ``math_gold``);
    ``question`` decides whether a list answer must come in order (``math_equiv.asks_for_order``); ``compat``
    names the published scorer's version (``math_compat.MATH_VERSIONS``)."""
    answer = extract_math(response)
    correct = answer is not None and gold is not None and math_equiv.is_equiv(answer, gold, timeout=timeout,
                                                                              question=question)
    compat_answer = wizardmath_math_answer(response)
    compat_ok = compat_answer is not None and gold is not None and math_compat.compat_is_equiv(compat_answer, gold,
                                                                                              compat)
    return {"gold": gold, "answer": answer, "correct": bool(correct), "compat_correct": bool(compat_ok)}
