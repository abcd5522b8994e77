"""Numbers as people write them in answers, read exactly (as fractions) — no model, no float rounding.

"1,000" = "1000", "$5.00" = "5", "3/4" = "0.75"; "50%" is 50 (GSM8k golds state percentages as the
number), never 0.5; "18" never equals "1800". Used by the GSM8k checker, the answer styles and the
arithmetic world's records.
"""

from __future__ import annotations

import re
from fractions import Fraction

# One number: optional sign, optional "$", thousands groups or plain digits, decimals, "/ denominator", "%".
# The sign must not follow a word, digit or closing bracket, so "10-4" is 10 then 4, not 10 and -4.
_NUMBER = re.compile(
    r"(?:(?<![\w)\].])(?P<sign>[-\u2212]))?\s?\$?\s?"
    r"(?P<int>\d{1,3}(?:,\d{3})+(?!\d)|\d+)?(?P<dec>\.\d+)?"
    r"(?:\s?/\s?(?P<den>\d+(?:\.\d+)?))?(?P<pct>\s?%)?"
)


def numbers(text: str) -> list[re.Match]:
    """Every number in ``text``, in order (matches that hold no digit are dropped)."""
    return [m for m in _NUMBER.finditer(text) if m.group("int") or m.group("dec")]


def number_value(m: re.Match) -> Fraction | None:
    """The exact value of one number match; None for a zero denominator or more digits than Python reads."""
    digits = (m.group("int") or "0").replace(",", "") + (m.group("dec") or "")
    if len(digits) > 1000:  # no answer is that long; int() refuses past 4,300 digits anyway
        return None
    value = Fraction(digits)
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
    found = numbers(s)
    if len(found) != 1 or found[0].group(0).strip() != s:
        return None
    return number_value(found[0])


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
