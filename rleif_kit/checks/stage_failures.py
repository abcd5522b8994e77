"""Whether a stage that sent requests (to an endpoint or the sandbox) did its work: ``<stage>/failures.json``.

A stage counts what it asked for and what failed, by cause, with one example each. Past its threshold (a share of
the items, ``[diagnostics]`` ``evolve_failure_fail`` / ``judge_failure_fail``), or when every item failed, the
stage is *stopped*: the runner writes no done marker, ``rleif run`` ends there with exit 4, and a plain rerun
retries exactly the failed items (the stage's records say which). Below it the stage is ok and the failures stay
visible in the report (and 07's ``evolve_failures`` check reads 01's the same way).

Causes, read from the error strings the chat backend writes (``llm/openai_backend.py``): ``connection``,
``timeout``, ``rate limited``, ``http 5xx``, ``http 4xx`` (the server's own text in the example), ``cut off``,
``unparseable``, ``empty response``, ``reply too large`` (a body past ``api.max_reply_bytes``), ``unencodable text``
(never sent), ``other``. The first four are the endpoint's, not the request's: an item that
failed only for them is retried by every rerun; ``retry_failed`` bounds the others (a request the server refuses
on its own account would fail forever).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Sequence

from rleif_kit.core.records import write_json_atomic

FILE = "failures.json"

# error prefix (lower case, after an optional "api: ") -> cause; first match wins
CAUSES = (("connection error", "connection"), ("timeout", "timeout"), ("timed out", "timeout"),
          ("rate limited", "rate limited"), ("http 429", "rate limited"), ("http 5", "http 5xx"),
          ("http 4", "http 4xx"), ("cut off", "cut off"), ("unparseable", "unparseable"),
          ("empty response", "empty response"), ("equality judge: no readable verdict", "unparseable"),
          ("reply too large", "reply too large"), ("unencodable text", "unencodable text"))
ENDPOINT_CAUSES = frozenset({"connection", "timeout", "rate limited", "http 5xx"})
EXAMPLE_CHARS = 300
_LEAD = re.compile(r"^(?:api: |answer |tests |judge )+")  # which request of an item failed, before its cause


def cause_of(error: str | None) -> str:
    """The cause of one failed item from its error string; ``other`` when none matches."""
    text = _LEAD.sub("", (error or "").strip().lower())
    return next((cause for prefix, cause in CAUSES if text.startswith(prefix)), "other")


def counts_against_item(error: str | None) -> bool:
    """Does this failure use up one of the item's ``retry_failed`` attempts? Not when the endpoint was at fault."""
    return cause_of(error) not in ENDPOINT_CAUSES


@dataclass
class Failures:
    """What one kind of request of a stage came to: ``total`` items asked for, ``errors`` (item id -> the last
    error) of those that failed and are not decided."""

    what: str
    total: int
    errors: dict[str, str] = field(default_factory=dict)

    @property
    def failed(self) -> int:
        return len(self.errors)

    def causes(self) -> dict[str, dict[str, Any]]:
        out: dict[str, dict[str, Any]] = {}
        for item, error in sorted(self.errors.items()):
            entry = out.setdefault(cause_of(error), {"count": 0, "example": f"{item}: {(error or '')[:EXAMPLE_CHARS]}"})
            entry["count"] += 1
        return dict(sorted(out.items(), key=lambda kv: -kv[1]["count"]))

    def part(self, fail_above: float) -> dict[str, Any]:
        """This kind's entry in ``failures.json``: counts, share, the stage's threshold for it, causes."""
        return {"what": self.what, "total": self.total, "failed": self.failed,
                "share": round(self.failed / self.total, 4) if self.total else None, "fail_above": fail_above,
                "causes": self.causes()}


def stop_reason(part: dict[str, Any]) -> str | None:
    """Why one part's failures stop the stage (every item failed, or more than its ``fail_above``), else None."""
    failed, total, limit = part["failed"], part["total"], part["fail_above"]
    if not failed:
        return None
    top = next(iter(part["causes"]), "other")
    if failed >= total:
        return f"every one of {total} {part['what']} failed (mostly {top})"
    if failed / total > limit:
        return f"{failed} of {total} {part['what']} failed ({failed / total:.0%} > {limit:.0%}; mostly {top})"
    return None


def decide(parts: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """The stage's record: ``status`` ok or stopped, the ``reason``, totals, causes merged, and each part."""
    parts = list(parts)
    reasons = [r for p in parts if (r := stop_reason(p))]
    merged: dict[str, dict[str, Any]] = {}
    for p in parts:
        for cause, entry in p["causes"].items():
            slot = merged.setdefault(cause, {"count": 0, "example": entry["example"]})
            slot["count"] += entry["count"]
    return {"status": "stopped" if reasons else "ok", "reason": "; ".join(reasons) or None,
            "total": sum(p["total"] for p in parts), "failed": sum(p["failed"] for p in parts),
            "causes": dict(sorted(merged.items(), key=lambda kv: -kv[1]["count"])), "parts": parts}


def failure_lines(record: dict[str, Any], action: str) -> str:
    """What a terminal shows for a stopped stage: the reason, one line per cause with its example, the action."""
    lines = [f"stopped: {record.get('reason')}"]
    for cause, entry in (record.get("causes") or {}).items():
        lines.append(f"  {entry['count']} × {cause}, e.g. {entry['example']}")
    return "\n".join([*lines, f"  {action}"])


def stop_message(record: dict[str, Any], what: str, action: str) -> str | None:
    """What a stop by the failures of kind ``what`` says (``failure_lines`` with ``action``), or None when that kind
    does not stop the stage."""
    part = next(p for p in record["parts"] if p["what"] == what)
    why = stop_reason(part)
    return failure_lines({**part, "reason": why}, action) if why else None


def write(stage_dir: Path, failures: Failures | Sequence[Failures], fail_above: float) -> dict[str, Any]:
    """Put ``failures`` (one kind, or several) into ``<stage_dir>/failures.json``, replacing earlier parts of the
    same kinds and keeping the stage's others; decide the stage's status, write it atomically; return the record."""
    kinds = [failures] if isinstance(failures, Failures) else list(failures)
    names = {f.what for f in kinds}
    earlier = read(stage_dir) or {}
    parts = [p for p in earlier.get("parts", []) if isinstance(p, dict) and p.get("what") not in names]
    record = decide([*parts, *(f.part(fail_above) for f in kinds)])
    Path(stage_dir).mkdir(parents=True, exist_ok=True)
    write_json_atomic(Path(stage_dir) / FILE, record)
    return record


def read(stage_dir: Path) -> dict[str, Any] | None:
    """The stage's failures record, or None when it wrote none (a stage that sends no request)."""
    path = Path(stage_dir) / FILE
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as err:
        return {"status": "stopped", "reason": f"{path} is unreadable ({err}): rerun the stage", "causes": {}}
    return data if isinstance(data, dict) else None


def clear(stage_dir: Path) -> None:
    """Drop an earlier run's record before the stage runs again (a stage that then sends nothing leaves none)."""
    (Path(stage_dir) / FILE).unlink(missing_ok=True)
