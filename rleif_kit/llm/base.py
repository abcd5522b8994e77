"""What every chat backend speaks: requests in, results out, running usage totals.

Why one tiny interface: the evolution engine and the judges only need "answer these chats, tell
me what it cost"; whether an OpenAI-compatible server or a local transformers model answers is
a plain ``if`` on a config value.  Results carry the request's ``key`` (the record id) back, so
callers can consume them in completion order and still know what each one belongs to.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from dataclasses import asdict, dataclass
from typing import Any, AsyncIterable, AsyncIterator, Coroutine, Iterable, TypeVar

from rleif_kit.core.settings import Price

__all__ = ["ChatRequest", "ChatResult", "Usage", "run_sync", "aiter_requests"]

T = TypeVar("T")


@dataclass(frozen=True)
class ChatRequest:
    """One chat completion to make; ``key`` is the id of the record it serves."""

    key: str
    messages: tuple  # of {"role": ..., "content": ...} dicts
    temperature: float = 0.0
    top_p: float = 1.0
    max_tokens: int = 512
    sample_index: int = 0  # tells repeated samples of one prompt apart (part of the cache key)
    stop: tuple[str, ...] = ()


@dataclass(frozen=True)
class ChatResult:
    """The outcome of one request; ``text`` is None and ``error`` says why when it failed.

    ``error`` is short ("timeout after 3 retries", "http 500: ...") and never contains a secret.
    """

    key: str
    text: str | None
    error: str | None
    finish_reason: str | None
    prompt_tokens: int
    completion_tokens: int
    model: str
    latency_s: float
    cached: bool = False
    mode: str = "chat"  # the route that answered (or was tried): "chat" or "completions" (llm/api_mode.py)

    @property
    def ok(self) -> bool:
        return self.error is None and self.text is not None


@dataclass
class Usage:
    """Running totals of one backend, written to ``usage.json``.

    ``requests`` counts calls actually sent; ``cached`` counts results served from the cache
    (free, so their tokens are not added); ``ok + failed == requests + cached``.  ``cost_usd`` is
    None when the price is unknown: an unknown cost must never read as $0.
    """

    requests: int = 0
    ok: int = 0
    failed: int = 0
    cached: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float | None = 0.0

    def add(self, result: ChatResult, price: Price | None) -> None:
        self.ok += result.ok
        self.failed += not result.ok
        if result.cached:
            self.cached += 1
            return
        self.requests += 1
        self.prompt_tokens += result.prompt_tokens
        self.completion_tokens += result.completion_tokens
        if price is None:
            self.cost_usd = None
        elif self.cost_usd is not None:
            self.cost_usd += price.cost(result.prompt_tokens, result.completion_tokens)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def cut_off(result: ChatResult) -> bool:
    """The reply stopped at ``max_tokens`` (finish_reason "length"): for a request whose reply must be complete (an
    answer, a solution, a verdict) that is a failure, never a reply to keep."""
    return result.finish_reason == "length"


def cut_off_reason(max_tokens: int, key: str) -> str:
    return f"cut off at max_tokens = {max_tokens} (finish_reason length): raise {key}"


USAGE_COUNTS = ("requests", "ok", "failed", "cached", "prompt_tokens", "completion_tokens")


def merge_usage(previous: dict[str, Any] | None, now: dict[str, Any],
                ledger: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """``usage.json`` across invocations of a resumed stage: this invocation's figures at the top level (what the
    notebook and the resume logic read), every invocation in order under ``invocations``, and their sums under
    ``total`` (``cost_usd`` None as soon as one invocation's cost is unknown: an unknown cost never reads as $0).
    A file from before invocations were kept counts as one invocation.

    ``ledger`` (``usage.ledger_runs`` of ``usage.jsonl``) adds the invocations that never wrote ``usage.json``
    (killed) with what the ledger saw them send; ``now`` names its own by ``inv``. ``total.unfinished``: requests
    sent and never answered (in flight at a kill; their tokens and cost cannot be known)."""
    previous = previous or {}
    runs = list(previous.get("invocations", []))
    if previous and not runs:
        runs = [{k: v for k, v in previous.items() if k != "total"}]
    known = {r.get("inv") for r in runs} | {now.get("inv")}
    runs += [{**r, "ended": "without writing usage.json (killed)"}
             for r in ledger or [] if r["inv"] not in known]
    runs.append({k: v for k, v in now.items() if k not in ("invocations", "total")})
    counts = USAGE_COUNTS + (("unfinished",) if ledger is not None else ())
    total: dict[str, Any] = {k: sum(int(r.get(k) or 0) for r in runs) for k in counts}
    costs = [r.get("cost_usd") for r in runs]
    total["cost_usd"] = None if any(c is None for c in costs) else sum(costs)
    total["invocations"] = len(runs)
    return {**now, "invocations": runs, "total": total}


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` to completion from synchronous code and return its result.

    Inside a running event loop (a Jupyter cell) ``asyncio.run`` is refused, so the coroutine then
    runs in a fresh thread with its own loop while this thread waits.
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="rleif-run-sync") as pool:
        return pool.submit(asyncio.run, coro).result()


async def aiter_requests(requests: Iterable[T] | AsyncIterable[T]) -> AsyncIterator[T]:
    """Either kind of iterable as an async iterator, pulled one item at a time (never materialised)."""
    if hasattr(requests, "__aiter__"):
        async for item in requests:  # type: ignore[union-attr]
            yield item
    else:
        for item in requests:  # type: ignore[union-attr]
            yield item
