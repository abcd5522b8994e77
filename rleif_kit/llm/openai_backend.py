"""Chat completions from any OpenAI-compatible server, many in flight, results as they complete.

Each request goes on the route settings.json's ``mode`` names (``llm/api_mode.py``): ``/v1/chat/completions``
("chat", the default), ``/v1/completions`` with the prompt's exact text ("completions": a base model without a chat
template), or chat until the server says the model has no chat template, then completions ("auto"). Everything
below holds for either route; a cached reply is kept under the route that answered it (``cache.cache_key``).

Why it looks like this:

* ONE ``openai.AsyncOpenAI`` client per backend (per event loop, see ``_client_for_loop``): its
  connection pool keeps ``concurrency`` keep-alive connections busy, and its own retry loop
  already retries 429 / 408 / 409 / 5xx / timeouts / connection errors with exponential backoff
  and honours ``Retry-After`` and ``retry-after-ms`` (``openai/_base_client.py``:
  ``_should_retry`` and ``_calculate_retry_timeout``).  So nothing here re-implements retries;
  what is left after ``max_retries`` becomes a failed :class:`ChatResult` with a short reason.
* Inputs are pulled lazily and at most ``concurrency`` requests are in flight, so a 15k-record
  generator is never materialised and memory stays flat.  Results are yielded in completion
  order; each carries its request's ``key``.
* Budgets (``max_requests``, ``max_cost``) stop the run *cleanly*: no new request starts,
  in-flight ones finish and are yielded, ``stopped_reason`` says why.  Unsent requests are simply
  not yielded, so the caller's resume logic (ids already in the output file) picks them up.
  ``max_cost`` is checked against the cost of finished requests, so it can be overshot by at
  most the ``concurrency`` requests that were in flight.
* A wrong key, model or URL (HTTP 401 / 403 / 404, or a 400 / 404 / 422 naming an unknown model:
  ``errors.names_unknown_model``) would fail every request the same way, so the first one stops the run like a
  budget does (an unknown model's reason lists the server's models). The first request to an endpoint goes
  alone, the others wait for its answer: a wrong key costs 1 request, not ``concurrency``.
* Failures carry the server's own words (``errors.failure_reason``); every text from the server, reply or error,
  is redacted (``core/api_keys.redact``) before it is returned or cached. With a ledger (``llm/usage.py``), each
  request is written to ``usage.jsonl`` as it is sent and as it ends: a killed process's spend still counts.
* Every request goes through ``core/bounded_http``'s client (``api_keys.make_async_client``): ``api.timeout`` is
  each attempt's total deadline (connect, headers and body), a reply body is read up to ``api.max_reply_bytes``.
  A request whose text UTF-8 cannot encode (a lone surrogate) fails before the cache, the ledger and the send
  (``_unsendable``): it is never counted as sent.
* Per-request overhead is one task and one queue hand-off; the benchmark
  (``benchmarks/bench_evolve.py``) holds this to >= 85% of a bare client + semaphore loop.
"""

from __future__ import annotations

import asyncio
import os
import time
from dataclasses import replace
from typing import TYPE_CHECKING, Any, AsyncIterable, AsyncIterator, Callable, Iterable

from rleif_kit.core.api_keys import make_async_client, read_api_key, redact
from rleif_kit.core.settings import Endpoint, Price, SettingsError
from rleif_kit.core.exits import BUDGET_PREFIX, REJECTED_PREFIX
from rleif_kit.core.user_files import first_unsendable
from rleif_kit.llm.api_mode import ModeChooser, chat_params, no_chat_template, no_template_advice, reply_choice
from rleif_kit.llm.base import (
    ChatRequest,
    ChatResult,
    Usage,
    aiter_requests,
    run_sync,
)
from rleif_kit.llm.errors import (
    FATAL_STATUSES,
    failure_reason,
    names_unknown_model,
    served_models,
    unknown_model_advice,
)
from rleif_kit.llm.tasks import FirstAnswerGate
from rleif_kit.llm.usage import UsageLedger, estimate  # estimate (the dry run): its callers import it from here

if TYPE_CHECKING:  # pragma: no cover - typing only
    import openai

    from rleif_kit.llm.cache import ResponseCache

__all__ = ["OpenAIBackend", "estimate"]


class OpenAIBackend:
    """Bounded-concurrency chat completions against ``endpoint`` (see the module docstring).

    ``prompt_format``: on the completions route, the format the messages' text is sent in (``llm/api_mode.py``;
    None: exactly as it is)."""

    def __init__(self, endpoint: Endpoint, *, concurrency: int = 16, cache: "ResponseCache | None" = None,
                 price: Price | None = None, max_requests: int | None = None, max_cost: float | None = None,
                 ledger: str | os.PathLike[str] | None = None, prompt_format: Callable[[str], str] | None = None):
        if not isinstance(concurrency, int) or concurrency < 1:
            raise ValueError(f"concurrency must be an integer >= 1, got {concurrency!r}")
        if max_cost is not None and price is None:
            raise ValueError(f"max_cost={max_cost} needs a price for model {endpoint.name!r} (prices.{endpoint.name})")
        self.endpoint = endpoint
        self.model = endpoint.name
        self.concurrency = concurrency
        self.cache = cache
        self.price = price
        self.max_requests = max_requests
        self.max_cost = max_cost
        self.usage = Usage(cost_usd=None if price is None else 0.0)
        self.stopped_reason: str | None = None
        self.sent = 0  # requests started by this backend (what max_requests counts)
        self._client: "openai.AsyncOpenAI | None" = make_async_client(endpoint)  # bad config raises here
        self._client_loop: asyncio.AbstractEventLoop | None = None
        self.ledger: UsageLedger | None = None
        if ledger is not None:
            self.use_ledger(ledger)
        self._gate = FirstAnswerGate()  # one request until the endpoint first answered
        # the route: chat or completions ("auto" decides on the first); prompt_format: how a completions request
        # writes the instruction (None: the text as it is, e.g. evaluation's whole benchmark prompt)
        self.modes = ModeChooser(endpoint.mode, prompt_format)

    def use_ledger(self, path: str | os.PathLike[str] | None) -> None:
        """Account every request of this backend in the usage ledger at ``path`` (None: no ledger)."""
        if self.ledger is not None:
            self.ledger.close()
        self.ledger = UsageLedger(path, self.model) if path is not None else None

    # ------------------------------------------------------------------ public surface

    async def stream(self, requests: Iterable[ChatRequest] | AsyncIterable[ChatRequest]) -> AsyncIterator[ChatResult]:
        """Yield one result per request, as they complete, with at most ``concurrency`` in flight.

        The connections stay open for the next call on this loop; ``await backend.aclose()`` when done.
        """
        client = self._client_for_loop()
        finished: asyncio.Queue[tuple[ChatRequest, ChatResult]] = asyncio.Queue()
        tasks: set[asyncio.Task] = set()
        source, exhausted, in_flight = aiter_requests(requests), False, 0
        try:
            while True:
                while not exhausted and in_flight < self._gate.limit(self.concurrency):
                    if self._stop_check():
                        exhausted = True
                        break
                    try:
                        request = await anext(source)
                    except StopAsyncIteration:
                        exhausted = True
                        break
                    refused = _unsendable(request, self.model)
                    if refused is not None:  # never sent: neither the ledger nor the usage counts it
                        yield refused
                        continue
                    hit = self._cached(request)
                    if hit is not None:
                        yield hit
                        continue
                    self._mark_sent()
                    in_flight += 1
                    task = asyncio.create_task(self._call(client, request, finished))
                    tasks.add(task)
                    task.add_done_callback(tasks.discard)
                if in_flight == 0:
                    return
                request, result = await finished.get()
                in_flight -= 1
                yield self._account(request, result)
        finally:
            await _cancel(tasks)

    async def acomplete(self, request: ChatRequest) -> ChatResult:
        """One request, awaited on its own; at most ``concurrency`` of these are in flight at once.

        Why besides ``stream``: a multi-step job (evolve, then judge, then answer) awaits its next
        request only after the previous one answered; ``stream`` pulls a fixed input. Budgets, the
        cache and usage accounting are the same. A request refused by a budget comes back failed
        with ``error`` = ``stopped_reason`` (which starts with "budget:" or "endpoint rejected").
        """
        refused = _unsendable(request, self.model)
        if refused is not None:
            return refused
        hit = self._cached(request)
        if hit is not None:
            return hit
        client = self._client_for_loop()
        async with self._semaphore_for_loop():
            first = await self._gate.enter()
            try:
                if self._stop_check():
                    return _unsent(request, self.model, self.stopped_reason)
                self._mark_sent()
                return self._account(request, await self._send(client, request))
            finally:
                self._gate.leave(first)

    def _semaphore_for_loop(self) -> asyncio.Semaphore:
        loop = asyncio.get_running_loop()
        if getattr(self, "_sem_loop", None) is not loop:
            self._sem, self._sem_loop = asyncio.Semaphore(self.concurrency), loop
        return self._sem

    def complete(self, requests: Iterable[ChatRequest]) -> list[ChatResult]:
        """Synchronous :meth:`stream`, results in input order (works inside Jupyter too).

        Requests a budget stop left unsent come back as failed results whose ``error`` is the
        ``stopped_reason``.
        """
        requests = list(requests)
        return run_sync(self._complete(requests))

    async def aclose(self) -> None:
        """Close the HTTP connections (the backend reconnects if used again)."""
        client, self._client, self._client_loop = self._client, None, None
        if self.ledger is not None:
            self.ledger.close()  # fsynced; reopened if the backend is used again
        if client is not None:
            await client.close()

    # ------------------------------------------------------------------ internals

    def _client_for_loop(self) -> "openai.AsyncOpenAI":
        """The client, remade when the running loop changed.

        Why: pooled connections belong to the loop that opened them; ``complete`` inside Jupyter
        runs each call on a fresh loop, where the old connections cannot be used.
        """
        loop = asyncio.get_running_loop()
        if self._client is None or (self._client_loop is not None and self._client_loop is not loop):
            self._client = make_async_client(self.endpoint)
        self._client_loop = loop
        return self._client

    def _stop_check(self) -> bool:
        """True when no new request may start; sets ``stopped_reason`` the first time."""
        if self.stopped_reason is None:
            if self.max_requests is not None and self.sent >= self.max_requests:
                self.stopped_reason = f"{BUDGET_PREFIX} max_requests reached ({self.max_requests})"
            elif self.max_cost is not None and (self.usage.cost_usd or 0.0) >= self.max_cost:
                self.stopped_reason = f"{BUDGET_PREFIX} max_cost reached (${self.usage.cost_usd:.4f} >= ${self.max_cost:g})"
        return self.stopped_reason is not None

    def _cached(self, request: ChatRequest) -> ChatResult | None:
        """The cache's answer to ``request`` on the route in use (redacted again: a cache written before replies
        were), accounted. "auto" before it decided: a reply either route gave this model for this request."""
        hit = None
        if self.cache is not None:
            for mode in (self.modes.used,) if self.modes.used else ("chat", "completions"):
                hit = hit or self.cache.get(request, self.model, mode)
        if hit is not None:
            hit = replace(hit, text=redact(hit.text, self._secrets()))
            self.usage.add(hit, self.price)
            if self.ledger is not None:
                self.ledger.done(hit, None)
        return hit

    def _mark_sent(self) -> None:
        self.sent += 1
        if self.ledger is not None:  # before the request goes out: a kill from here on still counts it
            self.ledger.sent()

    def _account(self, request: ChatRequest, result: ChatResult) -> ChatResult:
        self._gate.answered = True
        self.usage.add(result, self.price)
        if self.ledger is not None:
            cost = self.price.cost(result.prompt_tokens, result.completion_tokens) if self.price else None
            self.ledger.done(result, cost)
        if result.ok and self.cache is not None:
            self.cache.put(request, result)  # only complete replies are kept (ResponseCache.put)
        return result

    def _secrets(self) -> list[str]:
        """The key this backend sends, for redaction only (read again when the client is closed)."""
        key = getattr(self._client, "api_key", None) if self._client is not None else None
        if key is None:
            try:
                key = read_api_key(self.endpoint)
            except SettingsError:
                return []
        return [key]

    async def _call(self, client: "openai.AsyncOpenAI", request: ChatRequest,
                    finished: asyncio.Queue[tuple[ChatRequest, ChatResult]]) -> None:
        finished.put_nowait((request, await self._send(client, request)))

    async def _send(self, client: "openai.AsyncOpenAI", request: ChatRequest) -> ChatResult:
        start = time.perf_counter()
        try:
            mode, response = await self.modes.send(client, self._params(request))
            return self._result(request, response, time.perf_counter() - start, mode)
        except Exception as exc:  # a per-request failure is a result, never an exception out of stream
            return await self._failure(client, request, exc, time.perf_counter() - start)

    def _params(self, request: ChatRequest) -> dict[str, Any]:
        return chat_params(self.model, request.messages, temperature=request.temperature, top_p=request.top_p,
                           max_tokens=request.max_tokens, stop=request.stop)

    def _result(self, request: ChatRequest, response: Any, latency_s: float, mode: str = "chat") -> ChatResult:
        text, finish_reason = reply_choice(response)
        usage = response.usage
        error = None if text is not None else "empty response (no message content)"
        bad = first_unsendable(text) if text else None
        if bad is not None:  # JSON lets a server send "\ud800"; no file, cache or later request could hold it
            text, error = None, (f"unencodable text in the reply: {bad[2]} at character {bad[1]}, which UTF-8 "
                                 "cannot encode (a lone surrogate); not kept")
        return ChatResult(
            key=request.key, text=redact(text, self._secrets()) if text else text,  # a reply may quote the key
            error=error,
            finish_reason=finish_reason,
            prompt_tokens=(usage.prompt_tokens or 0) if usage else 0,
            completion_tokens=(usage.completion_tokens or 0) if usage else 0,
            model=self.model, latency_s=latency_s, mode=mode)

    async def _failure(self, client: Any, request: ChatRequest, exc: Exception, latency_s: float) -> ChatResult:
        """The failed result; a rejection (bad key, URL or model) also stops the run, an unknown model's reason
        with the server's model list (one short GET /models). So does a chat request refused because the model has
        no chat template, with what to set (every chat request would be refused the same way)."""
        reason = self._reason(exc)
        unknown = names_unknown_model(exc, self.model)
        templateless = self.modes.configured == "chat" and no_chat_template(exc) == "named"
        if (getattr(exc, "status_code", None) in FATAL_STATUSES or unknown or templateless) \
                and self.stopped_reason is None:
            self.stopped_reason = f"{REJECTED_PREFIX}: {reason}"  # set first: the other failures fetch nothing
            if templateless:
                self.stopped_reason = f"{self.stopped_reason.rstrip('.')}; {no_template_advice(self.endpoint.role)}"
            elif unknown:
                models = await served_models(client, self._secrets())
                advice = unknown_model_advice(self.endpoint.role, self.model, models)
                self.stopped_reason = f"{self.stopped_reason.rstrip('.')}; {advice}"
        return ChatResult(key=request.key, text=None, error=reason, finish_reason=None, prompt_tokens=0,
                          completion_tokens=0, model=self.model, latency_s=latency_s, mode=self.modes.now)

    def _reason(self, exc: Exception) -> str:
        """A short, redacted reason in the server's words: "timeout after 3 retries", "http 400: ..."."""
        return failure_reason(exc, self._secrets())

    async def _complete(self, requests: list[ChatRequest]) -> list[ChatResult]:
        # Stream under positional keys so repeated keys (k samples of one record) map back exactly.
        indexed = [replace(r, key=str(i)) for i, r in enumerate(requests)]
        results: list[ChatResult | None] = [None] * len(requests)
        try:
            async for result in self.stream(indexed):
                i = int(result.key)
                results[i] = replace(result, key=requests[i].key)
        finally:
            await self.aclose()
        return [r if r is not None else _unsent(req, self.model, self.stopped_reason)
                for req, r in zip(requests, results)]


def _unsendable(request: ChatRequest, model: str) -> ChatResult | None:
    """The failed result of a request whose text cannot be sent (UTF-8 cannot encode it: a lone surrogate such as
    ``"\\ud800"``), naming where (``core/user_files.first_unsendable``); None when it can be. Checked before the
    cache, the ledger and the send, so a request that never left is never counted as sent."""
    found = first_unsendable({"messages": list(request.messages), "stop": list(request.stop)})
    if found is None:
        return None
    where, index, char = found
    return _unsent(request, model, f"unencodable text: {where} has {char} at character {index}, which UTF-8 cannot "
                                   "encode (a lone surrogate); not sent")


def _unsent(request: ChatRequest, model: str, reason: str | None) -> ChatResult:
    return ChatResult(key=request.key, text=None, error=reason or "not sent", finish_reason=None,
                      prompt_tokens=0, completion_tokens=0, model=model, latency_s=0.0)


async def _cancel(tasks: set[asyncio.Task]) -> None:
    """Cancel and await what is still in flight (the consumer stopped iterating early)."""
    pending = [t for t in tasks if not t.done()]
    for task in pending:
        task.cancel()
    if pending:
        await asyncio.gather(*pending, return_exceptions=True)
