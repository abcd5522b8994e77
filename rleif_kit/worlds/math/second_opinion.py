"""A second opinion on every GSM8k / MATH answer: Hugging Face's math-verify, beside the kit's strict scorer.

Why: math-verify (TRL's accuracy reward uses it) is the checker most peers now quote, so a reader wants to see a
run's accuracy under it too; but its policy is not the kit's (it reads 50% as 0.5, accepts 1.4142 for sqrt(2),
cannot see that a question asks for an order, reads "2 1/2" as 1/2, ...). So its verdict is recorded beside the
kit's strict and compat ones — ``math_verify_correct`` and its reading ``math_verify_answer`` on every row,
``math_verify_accuracy`` in the summary — and never decides the headline, which stays the strict scorer. Where
the two disagree on the kit's trap suite, ``docs/scoring.md`` names the class and the kit's policy for it
(``tests/test_math_verify_differential.py`` fails when that list changes until the policy text is updated).

Timeouts: math-verify's own timeouts are ``signal.alarm`` based: they raise off the main thread (a notebook's
worker, a thread pool) and would replace the kit's own alarm. So its parse and verify run with their timeouts
off (``parsing_timeout=None``, ``timeout_seconds=None``, the documented setting for threads) inside the kit's
own limit (``symbolic._limited``: an interval timer in the main thread, an abandoned daemon thread elsewhere).
"""

from __future__ import annotations

import logging
from functools import lru_cache
from typing import Any

from rleif_kit.worlds.math.symbolic import _limited

TIMEOUT = 5.0  # seconds for one response: parse the gold, parse the response, verify
MAX_READING_CHARS = 200  # what a row keeps of math-verify's reading

class _MuteTimeoutWarning(logging.Filter):
    """math-verify warns once that its timeouts are off: here the kit's own limit bounds every call."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith("Timeout is disabled")


@lru_cache(maxsize=1)
def version() -> str | None:
    """The installed math-verify's version, or None when it is not installed (its column is then None)."""
    try:
        from importlib.metadata import PackageNotFoundError, version as package_version

        import math_verify  # noqa: F401 - only to know it imports; heavy (sympy, antlr): loaded on first use
    except ImportError:
        return None
    for name in ("math_verify.parser", "math_verify.grader"):
        logging.getLogger(name).addFilter(_MuteTimeoutWarning())
    try:
        return package_version("math-verify")
    except PackageNotFoundError:
        return "unknown"


def _reading(parsed: list) -> str | None:
    """What math-verify read: its value (sympy's form, which shows 50% as 1/2), else the text it matched."""
    if not parsed:
        return None
    return str(parsed[0])[:MAX_READING_CHARS]


def math_verify_check(response: str, gold: str | None, timeout: float = TIMEOUT) -> dict[str, Any]:
    """math-verify's verdict on one response: ``math_verify_correct`` (None when math-verify is not installed;
    False for an unreadable gold, a timeout or an error, as the kit never counts an unjudged item right) and
    ``math_verify_answer``, its reading of the response. ``gold`` is the gold answer (GSM8k's number, MATH's
    boxed content), read as LaTeX math; the response is read whole, as math-verify's ``parse`` reads it."""
    if version() is None:
        return {"math_verify_answer": None, "math_verify_correct": None}
    out: dict[str, Any] = {"math_verify_answer": None, "math_verify_correct": False}
    if not response or not gold:
        return out
    found: dict[str, Any] = {}  # the judge's own: a thread abandoned at the deadline may still write here later

    def judge() -> bool:
        from math_verify import parse, verify  # heavy: loaded on first use

        answer = parse(response, parsing_timeout=None)
        found["math_verify_answer"] = _reading(answer)
        golds = parse(f"${gold}$", parsing_timeout=None)
        found["math_verify_correct"] = bool(golds and answer and verify(golds, answer, timeout_seconds=None))
        return True

    if _limited(judge, timeout):  # finished in time: its reading and verdict, copied once
        out.update(found)
    else:  # a timeout or an error midway: unjudged, never right (its reading, if it got that far)
        out["math_verify_answer"] = found.get("math_verify_answer")
    return out


def math_verify_equal(prediction: str | None, gold: str | None, timeout: float = TIMEOUT) -> bool | None:
    """math-verify on two extracted answers (both read as LaTeX math), for the differential test over the trap
    suite; None when math-verify is not installed."""
    if version() is None:
        return None
    if not prediction or not gold:
        return False
    return bool(math_verify_check(f"${prediction}$", gold, timeout)["math_verify_correct"])
