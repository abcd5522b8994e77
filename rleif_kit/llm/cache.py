"""An on-disk cache of chat results, so a rerun (or a resumed run) never pays for a call twice.

Why sqlite3: it is in the standard library, a lookup by primary key takes microseconds (fast
enough to call straight from the event loop, no threads), and WAL mode keeps the file consistent
across a killed process.  Only complete, accepted replies are stored (:func:`complete_reply`): a failure, an
empty reply or one cut off at ``max_tokens`` (``finish_reason`` "length") or by a content filter is asked again
by the next run, never replayed, and such rows in an older cache are ignored: once the endpoint recovered, a
rerun must send those requests again, not record the same failures.

The key is the sha256 of everything that decides the answer: model, messages, temperature, top_p,
max_tokens, sample_index, stop and the route (chat or completions, ``llm/api_mode.py``).  ``sample_index`` is what lets k samples of one prompt at
temperature > 0 be k different entries.

A full disk: opening the cache stops the stage with one line (``core.disk``, exit 5: nothing was sent yet); a row
that cannot be stored is a one-line note, and the cache stores nothing more this run. The reply is already in hand
and the stage's crash-safe JSONL is its record (the cache only saves a rerun a call), so the run goes on; the
record's own write then stops it with the one line if the disk is still full.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import threading
import time
from pathlib import Path

from rleif_kit.core.disk import free_there, out_of_space, writing
from rleif_kit.llm.base import ChatRequest, ChatResult

__all__ = ["ResponseCache", "cache_key", "complete_reply"]

#: Finish reasons of a reply that did not end on its own: never cached, never served from the cache.
INCOMPLETE = ("length", "content_filter")

_SCHEMA = """CREATE TABLE IF NOT EXISTS responses (
    key TEXT PRIMARY KEY, model TEXT NOT NULL, text TEXT NOT NULL, finish_reason TEXT,
    prompt_tokens INTEGER NOT NULL, completion_tokens INTEGER NOT NULL, latency_s REAL NOT NULL)"""


def complete_reply(text: str | None, finish_reason: str | None) -> bool:
    """A reply worth keeping: some text, and it ended on its own (not at ``max_tokens``, not filtered)."""
    return bool(text and text.strip()) and finish_reason not in INCOMPLETE


def cache_key(request: ChatRequest, model: str, mode: str = "chat") -> str:
    """The sha256 hex digest identifying ``request`` sent to ``model`` on the route ``mode`` (``key`` is not part
    of it). The chat route's key is the one the cache had before routes existed (a rerun pays nothing again);
    another route's adds its name: the same messages wrapped in a chat template or sent as they are are different
    requests with different answers."""
    parts = [model, list(request.messages), request.temperature, request.top_p, request.max_tokens,
             request.sample_index, list(request.stop)] + ([mode] if mode != "chat" else [])
    return hashlib.sha256(json.dumps(parts, sort_keys=True, ensure_ascii=False).encode("utf-8")).hexdigest()


class ResponseCache:
    """``get(request, model)`` / ``put(request, result)`` over a sqlite file at ``path``."""

    def __init__(self, path: str | os.PathLike[str]):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if self.path.is_dir():
            raise ValueError(f"{self.path}: is a directory, not the response cache (a SQLite file)")
        self._lock = threading.Lock()
        self.full = False  # a row failed for want of space: nothing more is stored this run
        try:
            with writing(self.path):
                self._db = self._open()
        except sqlite3.DatabaseError as e:  # not a database (a torn copy, another file): kept aside, not lost
            if getattr(e, "sqlite_errorname", "SQLITE_NOTADB") not in ("SQLITE_NOTADB", "SQLITE_CORRUPT"):
                raise ValueError(f"{self.path}: the response cache cannot be opened ({e}): is another run using "
                                 "it?") from None
            aside = self.path.with_name(self.path.name + f".corrupt-{int(time.time())}")
            self.path.replace(aside)
            for suffix in ("-wal", "-shm"):
                Path(str(self.path) + suffix).unlink(missing_ok=True)
            print(f"note: {self.path} was not a readable cache ({e}); moved to {aside.name}, starting an empty one")
            self._db = self._open()

    def _open(self) -> sqlite3.Connection:
        # check_same_thread=False: a backend may be driven from run_sync's worker thread; the lock
        # serialises access, and each call is one short statement.
        db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        try:
            with self._lock:
                db.execute("PRAGMA journal_mode=WAL")
                db.execute("PRAGMA synchronous=NORMAL")  # WAL + NORMAL: consistent after a crash
                db.execute(_SCHEMA)
                db.execute("SELECT count(*) FROM responses").fetchone()
        except sqlite3.DatabaseError:
            db.close()
            raise
        return db

    def get(self, request: ChatRequest, model: str, mode: str = "chat") -> ChatResult | None:
        """The stored result for this request and model on the route ``mode`` (``cached=True``, ``key`` of
        ``request``); None also for a row that is not a complete reply (an older cache kept cut-off ones)."""
        with self._lock:
            row = self._db.execute(
                "SELECT model, text, finish_reason, prompt_tokens, completion_tokens FROM responses WHERE key = ?",
                (cache_key(request, model, mode),)).fetchone()
        if row is None:
            return None
        stored_model, text, finish_reason, prompt_tokens, completion_tokens = row
        if not complete_reply(text, finish_reason):
            return None
        return ChatResult(key=request.key, text=text, error=None, finish_reason=finish_reason,
                          prompt_tokens=prompt_tokens, completion_tokens=completion_tokens,
                          model=stored_model, latency_s=0.0, cached=True, mode=mode)

    def put(self, request: ChatRequest, result: ChatResult) -> None:
        """Store a complete, ok result under ``result.model`` (the name it was requested as) and ``result.mode``
        (the route that answered); failures and cut-off or empty replies are not stored."""
        if not result.ok or not complete_reply(result.text, result.finish_reason):
            return
        if self.full:
            return
        key = cache_key(request, result.model, result.mode)
        try:
            with self._lock:
                self._db.execute("INSERT OR REPLACE INTO responses VALUES (?, ?, ?, ?, ?, ?, ?)",
                                 (key, result.model, result.text, result.finish_reason, result.prompt_tokens,
                                  result.completion_tokens, result.latency_s))
        except (sqlite3.DatabaseError, OSError) as e:
            if not out_of_space(e, self.path):
                raise
            self.full = True
            print(f"note: no space left on device for the response cache {self.path} ({free_there(self.path)}): it "
                  "stores no more replies this run; the run goes on, its records are in its JSONL files")

    def __len__(self) -> int:
        with self._lock:
            return self._db.execute("SELECT COUNT(*) FROM responses").fetchone()[0]

    def close(self) -> None:
        with self._lock:
            self._db.close()

