"""Verdicts as a table a person reads: check, status in its colour, what was measured, the thresholds it was
held to, the advice and the artifact it came from — one ``name = value`` per line, never a JSON dump."""

from __future__ import annotations

from typing import Any, Sequence

from rleif_kit.core.tables import Note, text_table
from rleif_kit.core.verdict import STATUS_COLORS, Verdict, fmt_number


def _value(v: Any) -> str:
    if isinstance(v, dict):  # e.g. failures by cause: {} when there were none
        return ", ".join(f"{k} {_value(x)}" for k, x in v.items()) or "none"
    return fmt_number(v)


def named_values(values: dict[str, Any]) -> str:
    """``{"mean": 0.51234, "band": [0.4, 0.7]}`` → ``"mean = 0.512\\nband = [0.4, 0.7]"``; '—' for none."""
    return "\n".join(f"{k} = {_value(v)}" for k, v in values.items()) or "—"


def verdict_rows(verdicts: Sequence[Verdict]) -> list[dict]:
    return [{"check": v.check, "status": v.status, "measured": named_values(v.numbers),
             "threshold": named_values(v.thresholds), "advice": v.advice or "—", "source": v.source or "—"}
            for v in verdicts]


def _status_css(status: Any) -> str:
    colour = STATUS_COLORS.get(status)
    return f"background-color: {colour}; color: white; font-weight: bold; text-align: center" if colour else ""


def verdict_table(verdicts: Sequence[Verdict]) -> Any:
    """The verdicts, in their order, as a table (a Styler; a note when no check ran)."""
    if not verdicts:
        return Note("No check ran: none of the artifacts the checks read exists yet.")
    return text_table(verdict_rows(verdicts), wrap=("measured", "threshold", "advice"), cell_colour=_status_css,
                      colour_columns=("status",))
