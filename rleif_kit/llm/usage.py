"""The usage ledger: every request accounted on disk as it happens, so a killed run's spend is not lost.

Why: ``usage.json`` is written when an invocation ends; a process killed by SIGKILL (or OOM) writes nothing, so
after 8 kills during evolution the server had seen 992 requests and ``usage.json`` counted 196. The ledger,
``usage.jsonl`` next to ``usage.json`` (:func:`ledger_path`), is append-only (one ``os.write`` per line, see
``core/jsonl.py``), one line per event:

    {"t": "start", "inv": "<invocation>", "model": "gpt-4o", "at": "2025-01-01T00:00:00+00:00"}
    {"t": "sent", "inv": "<invocation>"}                      # written just before the request goes out
    {"t": "done", "inv": "<invocation>", "ok": true, "prompt_tokens": 12, "completion_tokens": 30,
     "cost_usd": 0.0001}                                      # cost null when the model has no price
    {"t": "cached", "inv": "<invocation>", "ok": true}        # served from the response cache: free

A request is counted when it is *sent*, and only one that can be (its text encoded: ``openai_backend._unsendable``
refuses one that cannot before it is counted), so the count after SIGKILLs equals what the server received; what the
requests in flight at the kill cost cannot be known (they are ``unfinished``, their tokens 0). A request the
client retried (429, 5xx, timeouts: ``max_retries``) is one request here, as in ``usage.json``; the server saw it
1 + its retries times. ``usage.json``'s ``total`` and its ``invocations`` are rebuilt from the ledger
(:func:`ledger_runs`, ``base.merge_usage``).
"""

from __future__ import annotations

import json
import math
import os
import uuid
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable

from rleif_kit.core.jsonl import JsonlWriter, kit_file_error
from rleif_kit.core.settings import Price

if TYPE_CHECKING:  # pragma: no cover - typing only
    from rleif_kit.llm.base import ChatRequest, ChatResult

__all__ = ["UsageLedger", "ledger_path", "ledger_runs", "estimate"]

FIGURES = ("requests", "ok", "failed", "cached", "prompt_tokens", "completion_tokens", "unfinished")


def ledger_path(usage_json: str | os.PathLike[str]) -> Path:
    """``usage.jsonl`` next to ``usage.json`` (``<out>.usage.jsonl`` next to ``<out>.usage.json``)."""
    return Path(usage_json).with_suffix(".jsonl")


class UsageLedger:
    """Appends this invocation's events to ``path``; each backend that writes to it is one invocation."""

    def __init__(self, path: str | os.PathLike[str], model: str, fsync_every: int = 64):
        self.path = Path(path)
        self.model = model
        self.inv = f"{datetime.now(timezone.utc):%Y%m%dT%H%M%S}-{os.getpid()}-{uuid.uuid4().hex[:6]}"
        self.fsync_every = fsync_every
        self._writer: JsonlWriter | None = None
        self._started = False

    def sent(self) -> None:
        self._write({"t": "sent", "inv": self.inv})

    def done(self, result: "ChatResult", cost_usd: float | None) -> None:
        if result.cached:
            self._write({"t": "cached", "inv": self.inv, "ok": result.ok})
            return
        self._write({"t": "done", "inv": self.inv, "ok": result.ok, "prompt_tokens": result.prompt_tokens,
                     "completion_tokens": result.completion_tokens, "cost_usd": cost_usd})

    def _write(self, line: dict[str, Any]) -> None:
        if self._writer is None:  # opened on first use, and again after close (a backend reconnects)
            self._writer = JsonlWriter(self.path, fsync_every=self.fsync_every)
        if not self._started:
            self._started = True
            self._writer.write({"t": "start", "inv": self.inv, "model": self.model,
                                "at": datetime.now(timezone.utc).isoformat(timespec="seconds")})
        self._writer.write(line)

    def close(self) -> None:
        writer, self._writer = self._writer, None
        if writer is not None:
            writer.close()


def ledger_runs(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """Each invocation in the ledger, in order: ``inv``, ``model``, ``started`` and its figures (``requests`` sent,
    ``ok``, ``failed``, ``cached``, tokens, ``cost_usd`` (None when any of its requests had no price),
    ``unfinished``: sent, never answered (the process was killed with them in flight)). A missing ledger is [].
    Lines that do not parse (a torn last line) are skipped: the ledger is a tally, never a reason to stop."""
    runs: dict[str, dict[str, Any]] = {}
    try:
        f = open(path, "rb")
    except FileNotFoundError:
        return []
    except (IsADirectoryError, NotADirectoryError):
        raise kit_file_error(path) from None
    with f:
        for raw in f:
            try:
                line = json.loads(raw)
                kind, inv = line["t"], str(line["inv"])
            except (ValueError, TypeError, KeyError):
                continue
            run = runs.setdefault(inv, {"inv": inv, "model": None, "started": None, **dict.fromkeys(FIGURES, 0),
                                        "cost_usd": 0.0})
            if kind == "start":
                run.update(model=line.get("model"), started=line.get("at"))
            elif kind == "sent":
                run["requests"] += 1
            elif kind == "cached":
                run["cached"] += 1
                run["ok" if line.get("ok", True) else "failed"] += 1
            elif kind == "done":
                run["ok" if line.get("ok") else "failed"] += 1
                run["prompt_tokens"] += int(line.get("prompt_tokens") or 0)
                run["completion_tokens"] += int(line.get("completion_tokens") or 0)
                cost = line.get("cost_usd")
                run["cost_usd"] = None if cost is None or run["cost_usd"] is None else run["cost_usd"] + cost
    for run in runs.values():
        answered = run["ok"] + run["failed"] - run["cached"]
        run["unfinished"] = max(0, run["requests"] - answered)
    return list(runs.values())


def estimate(requests: Iterable["ChatRequest"], price: Price | None, expected_output_tokens: int) -> dict[str, Any]:
    """A dry run: how many requests and tokens, and what they would cost (None when unpriced).

    Prompt tokens are approximated as characters / 4 (rounded up per request): good enough to
    decide whether a run fits a budget, without loading a tokenizer.
    """
    count = prompt_tokens = 0
    for request in requests:
        chars = sum(len(str(m.get("content") or "")) for m in request.messages)
        prompt_tokens += math.ceil(chars / 4)
        count += 1
    output_tokens = count * expected_output_tokens
    cost = price.cost(prompt_tokens, output_tokens) if price is not None else None
    return {"requests": count, "prompt_tokens": prompt_tokens, "output_tokens": output_tokens, "cost_usd": cost}
