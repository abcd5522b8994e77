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

from rleif_kit.worlds import math_compat, math_equiv

ANSWER_MARK = "The answer is:"
GSM8K_GOLD_MARK = "####"

# One number: optional sign, optional "$", thousands groups or plain digits, decimals, "/ denominator", "%".
# The sign must not follow a word, digit or closing bracket, so "10-4" is 10 then 4, not 10 and -4.
_NUMBER = re.compile(
    r"(?:(?<![\w)\].])(?P<sign>[-\u2212]))?\s?\$?\s?"
    r"(?P<int>\d{1,3}(?:,\d{3})+(?!\d)|\d+)?(?P<dec>\.\d+)?"
    r"(?:\s?/\s?(?P<den>\d+(?:\.\d+)?))?(?P<pct>\s?%)?"
)


def _numbers(text: str) -> list[re.Match]:
    """Every number in ``text``, in order (matches that hold no digit are dropped)."""
    return [m for m in _NUMBER.finditer(text) if m.group("int") or m.group("dec")]


def _value(m: re.Match) -> Fraction | None:
    """The exact value of one number match; None for a zero denominator."""
    value = Fraction((m.group("int") or "0").replace(",", "") + (m.group("dec") or ""))
    if m.group("den"):
        den = Fraction(m.group("den"))
        if den == 0:
            return None
        value /= den
    return -value if m.group("sign") else value


def normalize_number(text: str | None) -> Fraction | None:
    """The value of a text that is one number ("$1,000.00", "-3/4", "50%", "7."), else None.

    Surrounding spaces, a trailing period and a surrounding ``$...$`` are ignored; anything else
    around the number (words, a second number) makes it None: a gold answer must be unambiguous.
    """
    if text is None:
        return None
    s = text.strip().rstrip(".").strip()
    if len(s) >= 2 and s[0] == s[-1] == "$" and s.count("$") == 2:
        s = s[1:-1].strip()
    found = _numbers(s)
    if len(found) != 1 or found[0].group(0).strip() != s:
        return None
    return _value(found[0])


def format_number(value: Fraction | None) -> str | None:
    """A canonical string for a number: "1000", "0.75", "1/3" (what per-item results record)."""
    if value is None:
        return None
    if value.denominator == 1:
        return str(value.numerator)
    den = value.denominator
    while den % 2 == 0:
        den //= 2
    while den % 5 == 0:
        den //= 5
    if den == 1:  # terminating decimal
        text = f"{float(value):.12f}".rstrip("0")
        if Fraction(text) == value:
            return text
    return f"{value.numerator}/{value.denominator}"


def _first_number(text: str) -> Fraction | None:
    found = _numbers(text)
    return _value(found[0]) if found else None


def gsm8k_gold(answer: str) -> Fraction | None:
    """GSM8k's gold value: the number after the last ``####`` (or the whole text when there is none)."""
    tail = answer.rsplit(GSM8K_GOLD_MARK, 1)[-1]
    return normalize_number(tail.strip().splitlines()[0] if tail.strip() else tail)


def extract_gsm8k(response: str, flexible: bool = False) -> Fraction | None:
    """The model's GSM8k answer.

    Strict: the first number after the last "The answer is:"; when the response has no such line,
    the first number after the last ``####``. Flexible: the strict answer, else the last number in
    the response (a model that ends "... so she has 18 apples." without the answer line).
    """
    for mark in (ANSWER_MARK, GSM8K_GOLD_MARK):
        if mark in response:
            value = _first_number(response.rsplit(mark, 1)[1])
            if value is not None or not flexible:
                return value
            break
    if flexible:
        found = _numbers(response)
        return _value(found[-1]) if found else None
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


def check_gsm8k(response: str, gold: str) -> dict[str, Any]:
    """Strict, flexible and compat correctness of one GSM8k response against its gold.

    ``gold`` is GSM8k's full answer field (with ``#### X``) or the bare number. A gold that does not
    normalise makes every mode wrong: an item that cannot be checked is never counted right.
    """
    gold_value = gsm8k_gold(gold)
    strict = extract_gsm8k(response)
    flexible = extract_gsm8k(response, flexible=True)
    compat = wizardmath_gsm8k_answer(response)
    ok = gold_value is not None
    return {
        "gold": format_number(gold_value),
        "answer": format_number(strict),
        "correct": ok and strict is not None and strict == gold_value,
        "flexible_answer": format_number(flexible),
        "flexible_correct": ok and flexible is not None and flexible == gold_value,
        "compat_correct": ok and compat is not None and float(compat) == float(gold_value),
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


def check_math(response: str, gold: str | None, timeout: float = 2.0) -> dict[str, Any]:
    """Strict and compat correctness of one MATH response; ``gold`` is the answer (see ``math_gold``)."""
    answer = extract_math(response)
    correct = answer is not None and gold is not None and math_equiv.is_equiv(answer, gold, timeout=timeout)
    compat_answer = wizardmath_math_answer(response)
    compat = compat_answer is not None and gold is not None and math_compat.compat_is_equiv(compat_answer, gold)
    return {"gold": gold, "answer": answer, "correct": bool(correct), "compat_correct": bool(compat)}
