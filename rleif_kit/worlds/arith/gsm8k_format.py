"""The arithmetic world written out in GSM8k's public format, for the kit's own GSM8k-format data.

Why: the real path (GSM8k/MATH files -> stage 00 -> evolution -> ...) must run offline in tests and demos,
on data that is generated, never downloaded. GSM8k writes each step as a sentence with a calculator
annotation (``5 * 5 = <<5*5=25>>25``) and ends with ``#### <answer>``; so does this.
"""

from __future__ import annotations

import re

from rleif_kit.worlds.arith import problems as arith

_STEP = re.compile(r"Step \d+: (.+?) = (-?\d+)\.")


def as_gsm8k(record: dict) -> dict:
    """``{"question", "answer"}`` in GSM8k's format from an arithmetic-world problem record."""
    lines = []
    for expr, value in _STEP.findall(record["solution"]):
        compact = expr.replace(" ", "")
        lines.append(f"{expr} = <<{compact}={value}>>{value}.")
    return {"question": record["question"], "answer": "\n".join(lines) + f"\n#### {record['answer']}"}


def gsm8k_problems(n: int, seed: int = 0, **kwargs) -> list[dict]:
    """``n`` GSM8k-format problems of the arithmetic world (``kwargs``: ``arith.generate_problems``'s)."""
    return [as_gsm8k(r) for r in arith.generate_problems(n, seed=seed, **kwargs)]
