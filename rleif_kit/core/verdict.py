"""``Verdict``: the outcome of one health check (ok / warn / fail, its numbers, thresholds and advice).

It lives in ``core`` because every layer carries verdicts: the checks make them (``checks/``), the stages
record them, ``launch.load_result`` reads them back from a launched stage's result file.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

STATUSES = ("ok", "warn", "fail")
STATUS_COLORS = {"ok": "#2e7d32", "warn": "#f9a825", "fail": "#c62828"}  # the report, the plots, the 07 table


@dataclass(frozen=True)
class Verdict:
    """The outcome of one check, with everything a person needs to act on it."""

    check: str
    status: str
    numbers: dict[str, Any] = field(default_factory=dict)
    thresholds: dict[str, Any] = field(default_factory=dict)
    advice: str = ""
    source: str = ""  # the artifact the numbers came from

    def __post_init__(self):
        if self.status not in STATUSES:
            raise ValueError(f"status must be one of {STATUSES}, got {self.status!r}")

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def line(self) -> str:
        nums = ", ".join(f"{k}={fmt_number(v)}" for k, v in self.numbers.items())
        return f"[{self.status.upper():4}] {self.check}: {nums}" + (f" — {self.advice}" if self.advice else "")


def fmt_number(v: Any) -> str:
    """3 significant digits for floats, also inside a list (an interval); anything else as str()."""
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(map(fmt_number, v)) + "]"
    return f"{v:.3g}" if isinstance(v, float) else str(v)
