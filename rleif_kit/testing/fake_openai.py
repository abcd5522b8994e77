"""A small OpenAI-compatible HTTP server on loopback, for tests, benchmarks and offline demos.

Why not a mock transport: the pipeline talks to real servers through the real ``openai`` client,
whose retry, timeout and connection-pool behaviour is exactly what we need to exercise.  A real
socket server keeps that whole path honest, and can inject the failures real providers produce
(429 with ``Retry-After``, 500, requests that never answer).

Design: one background thread runs its own asyncio loop with ``asyncio.start_server`` and a
minimal HTTP/1.1 parser (keep-alive, ``Content-Length`` bodies).  Latency is an ``asyncio.sleep``
so thousands of slow requests can be in flight at once; nothing here blocks the loop.

Failure injection is decided per chat-completion request by a seeded RNG, so a test that uses
a fixed ``seed`` and sends requests sequentially sees the same failures every run.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import json
import random
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterable

__all__ = ["FakeOpenAIServer", "RequestRecord", "FAIL_MODES", "HOSTILE_REPLIES", "NO_TEMPLATE_REFUSALS"]

FAIL_MODES = ("429", "500", "timeout", "400")
#: Replies a hostile or broken server sends to every chat completion: a valid 200 one byte every ``drip_s``
#: (``"drip"``), a 200 announcing ``huge_bytes`` and sending them (``"huge"``), a chunked 200 that never ends
#: (``"endless"``), a chunked 500 whose error body is ``huge_bytes`` long, announced nowhere (``"huge_error"``).
HOSTILE_REPLIES = ("drip", "huge", "endless", "huge_error")
DEFAULT_FAIL_MODES = FAIL_MODES[:3]  # the ones a client retries; "400" only when asked for
FAKE_MODEL = "fake-model"
#: How real servers refuse a chat request for a model without a chat template (``no_chat_template``): vLLM's 400 (the
#: words transformers raises), TGI's 422, and ``transformers serve``'s bare 500 (an unhandled exception there).
NO_TEMPLATE_REFUSALS = {
    "vllm": (400, "As of transformers v4.44, default chat template is no longer allowed, so you must provide a chat "
                  "template if the tokenizer does not define one.", "BadRequestError"),
    "tgi": (422, "Template error: template not found", "template_error"),
    "transformers": (500, None, None),
}

_REASONS = {200: "OK", 400: "Bad Request", 401: "Unauthorized", 404: "Not Found", 429: "Too Many Requests",
            500: "Internal Server Error", 501: "Not Implemented"}


@dataclass(frozen=True)
class RequestRecord:
    """One received request: ``headers`` has lower-case keys, ``body`` is the parsed JSON (or None)."""

    method: str
    path: str
    headers: dict[str, str]
    body: Any


class _Reply:
    """An HTTP response to write; ``close`` ends the keep-alive connection afterwards."""

    __slots__ = ("status", "payload", "headers", "close", "hostile")

    def __init__(self, status: int, payload: Any, headers: dict[str, str] | None = None, close: bool = False,
                 hostile: str | None = None):
        self.status, self.payload, self.headers, self.close = status, payload, headers or {}, close
        self.hostile = hostile  # one of HOSTILE_REPLIES: the body is written by _write_hostile


def _error(status: int, message: str, type_: str, code: str | None, headers: dict[str, str] | None = None) -> _Reply:
    """An OpenAI-style error body, so client code parses it the way it parses a real provider's."""
    return _Reply(status, {"error": {"message": message, "type": type_, "param": None, "code": code}}, headers)


def _words(text: Any) -> int:
    """Token count stand-in: whitespace-split words (enough to test usage accounting)."""
    if isinstance(text, str):
        return len(text.split())
    if isinstance(text, list):  # content parts: [{"type": "text", "text": ...}, ...]
        return sum(_words(part.get("text", "")) for part in text if isinstance(part, dict))
    return 0


def _default_responder(body: dict) -> str:
    return "ok"


class FakeOpenAIServer:
    """Serve ``/v1/chat/completions``, ``/v1/completions`` and ``/v1/models`` on ``127.0.0.1`` in a background
    thread.

    Use as a context manager; ``base_url`` is ready for ``openai.OpenAI(base_url=...)``.

    * ``responder(body) -> str`` makes the reply content (default ``"ok"``), or ``(text, finish_reason)``
      when it decides the finish reason itself (a reply it cut off: ``"length"``); an exception in it
      becomes a 500 whose message names the exception. A reply longer than the request's ``max_tokens``
      (one word = one token here) is cut to it with ``finish_reason = "length"``, as real servers do.
    * ``latency_s`` delays every chat completion (non-blocking).
    * With probability ``fail_rate`` a chat completion fails in one of ``fail_modes``:
      ``"429"`` (with ``Retry-After: retry_after_s``), ``"500"``, or ``"timeout"`` (the request is
      held ``hang_s`` seconds, then the connection is closed without an answer).
    * ``require_key``: when set, a different bearer token gets a 401 quoting the sent key as
      ``sk-...abcd`` like OpenAI does (useful to test redaction).
    * ``/v1/completions`` (a ``prompt`` string instead of ``messages``) answers like the chat route: the same
      responder (it sees the body with ``prompt``), failures, latency and hostile replies; its reply is a
      ``text_completion`` with ``choices[].text``.
    * ``no_chat_template``: one of :data:`NO_TEMPLATE_REFUSALS` ("vllm", "tgi", "transformers"): every chat
      completion is refused the way that server refuses a model without a chat template; completions still answer.
    * ``hostile``: every chat completion gets that reply of :data:`HOSTILE_REPLIES` (a dripping, huge or endless
      body); ``bytes_sent`` counts the body bytes written, which a client that stops reading holds down (the
      writes wait for the socket).
    """

    def __init__(
        self,
        responder: Callable[[dict], str] | None = None,
        latency_s: float = 0.0,
        fail_rate: float = 0.0,
        fail_modes: Iterable[str] = DEFAULT_FAIL_MODES,
        retry_after_s: float = 0.1,
        seed: int = 0,
        hang_s: float = 30.0,
        require_key: str | None = None,
        hostile: str | None = None,
        drip_s: float = 2.0,
        huge_bytes: int = 2 << 30,
        no_chat_template: str | None = None,
    ):
        if no_chat_template is not None and no_chat_template not in NO_TEMPLATE_REFUSALS:
            raise ValueError(f"no_chat_template must be one of {tuple(NO_TEMPLATE_REFUSALS)}, got {no_chat_template!r}")
        self.no_chat_template = no_chat_template
        if hostile is not None and hostile not in HOSTILE_REPLIES:
            raise ValueError(f"hostile must be one of {HOSTILE_REPLIES}, got {hostile!r}")
        self.hostile, self.drip_s, self.huge_bytes = hostile, drip_s, huge_bytes
        self.bytes_sent = 0
        self.fail_modes = tuple(fail_modes)
        unknown = set(self.fail_modes) - set(FAIL_MODES)
        if unknown or not self.fail_modes:
            raise ValueError(f"fail_modes must be a non-empty subset of {FAIL_MODES}, got {self.fail_modes}")
        if not 0.0 <= fail_rate <= 1.0:
            raise ValueError(f"fail_rate must be in [0, 1], got {fail_rate}")
        self.responder = responder or _default_responder
        self.latency_s = latency_s
        self.fail_rate = fail_rate
        self.retry_after_s = retry_after_s
        self.hang_s = hang_s
        self.require_key = require_key
        self._rng = random.Random(seed)
        self._lock = threading.Lock()
        self._records: list[RequestRecord] = []
        self._counters: collections.Counter[str] = collections.Counter()
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._tasks: set[asyncio.Task] = set()
        self._ready = threading.Event()
        self._startup_error: BaseException | None = None
        self._completion_ids = 0
        self.port: int | None = None

    # ---------------------------------------------------------------- lifecycle (caller's thread)

    def start(self) -> "FakeOpenAIServer":
        """Start serving; returns once the port is bound."""
        if self._thread is not None:
            raise RuntimeError("FakeOpenAIServer already started")
        self._thread = threading.Thread(target=self._run_loop, name="fake-openai", daemon=True)
        self._thread.start()
        self._ready.wait()
        if self._startup_error is not None:
            self._thread.join()
            raise RuntimeError("FakeOpenAIServer failed to start") from self._startup_error
        return self

    def stop(self) -> None:
        """Close the listener, cancel in-flight requests (hangs included) and join the thread."""
        if self._thread is None:
            return
        if self._loop is not None and self._stop is not None and not self._loop.is_closed():
            try:
                self._loop.call_soon_threadsafe(self._stop.set)
            except RuntimeError:  # loop already closed
                pass
        self._thread.join()
        self._thread = None

    def __enter__(self) -> "FakeOpenAIServer":
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    @property
    def base_url(self) -> str:
        if self.port is None:
            raise RuntimeError("FakeOpenAIServer is not started")
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def requests(self) -> list[RequestRecord]:
        """A snapshot of the requests received so far, in arrival order."""
        with self._lock:
            return list(self._records)

    @property
    def counters(self) -> dict[str, int]:
        """Counts: ``requests``, ``connections``, ``ok`` and one per failure (``"429"``, ``"500"``,
        ``"timeout"``, ``"401"``, ``"404"``, ``"400"``...)."""
        with self._lock:
            return dict(self._counters)

    def _count(self, key: str) -> None:
        with self._lock:
            self._counters[key] += 1

    # ---------------------------------------------------------------- event loop (server thread)

    def _run_loop(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        try:
            loop.run_until_complete(self._serve())
        except BaseException as exc:  # surfaced to start() if it happens before ready
            self._startup_error = exc
        finally:
            self._ready.set()
            loop.close()

    async def _serve(self) -> None:
        self._stop = asyncio.Event()
        server = await asyncio.start_server(self._handle_connection, "127.0.0.1", 0, backlog=1024)
        self.port = server.sockets[0].getsockname()[1]
        self._ready.set()
        try:
            await self._stop.wait()
        finally:
            await self._shutdown(server)

    async def _shutdown(self, server: asyncio.Server) -> None:
        """Stop accepting, let half-accepted connections settle, then cancel every handler.

        The settling step matters: closing a server while an accept is half done makes asyncio
        (3.11) fail to build that transport and leak its socket.
        """
        loop = asyncio.get_running_loop()
        for sock in server.sockets:
            loop.remove_reader(sock.fileno())
        for _ in range(5):
            await asyncio.sleep(0)
        server.close()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await server.wait_closed()

    async def _handle_connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        self._tasks.add(task)
        self._count("connections")
        try:
            while await self._handle_one(reader, writer):
                pass
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.LimitOverrunError, ValueError):
            pass  # client went away or sent garbage: drop the connection
        except asyncio.CancelledError:
            pass  # server shutting down
        except Exception as exc:  # a bug in this server: answer 500 so a test fails loudly, not hangs
            reply = _error(500, f"FakeOpenAIServer error: {type(exc).__name__}: {exc}", "server_error", None)
            reply.close = True
            with contextlib.suppress(Exception):
                await self._write(writer, reply)
        finally:
            writer.close()
            with contextlib.suppress(Exception, asyncio.CancelledError):
                await writer.wait_closed()
            self._tasks.discard(task)

    async def _handle_one(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        """Serve one request; False ends the connection."""
        head = await reader.readuntil(b"\r\n\r\n")
        request_line, *header_lines = head.decode("latin-1").split("\r\n")
        method, target, version = request_line.split(" ", 2)
        headers = {}
        for line in header_lines:
            if line:
                name, _, value = line.partition(":")
                headers[name.strip().lower()] = value.strip()
        if "chunked" in headers.get("transfer-encoding", "").lower():
            await self._write(writer, _error(501, "chunked request bodies are not supported", "server_error", None))
            return False
        raw = await reader.readexactly(int(headers.get("content-length", "0")))
        reply = await self._dispatch(method, target.split("?", 1)[0], headers, raw)
        if reply is None:  # "timeout": the hang ended, answer nothing
            return False
        keep_alive = headers.get("connection", "").lower() != "close" and version == "HTTP/1.1"
        reply.close = reply.close or not keep_alive
        await self._write(writer, reply)
        return not reply.close

    async def _write(self, writer: asyncio.StreamWriter, reply: _Reply) -> None:
        if reply.hostile is not None:
            await self._write_hostile(writer, reply)
            return
        body = json.dumps(reply.payload).encode()
        lines = [f"HTTP/1.1 {reply.status} {_REASONS.get(reply.status, 'Unknown')}",
                 "Content-Type: application/json", f"Content-Length: {len(body)}"]
        lines += [f"{k}: {v}" for k, v in reply.headers.items()]
        if reply.close:
            lines.append("Connection: close")
        writer.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body)
        await writer.drain()

    async def _write_hostile(self, writer: asyncio.StreamWriter, reply: _Reply) -> None:
        """The body of a hostile reply, written until it is done or the client hangs up (the handler then ends)."""
        mode, block = reply.hostile, b" " * 65536
        status, length = (500, self.huge_bytes) if mode == "huge_error" else (200, self.huge_bytes)
        head = [f"HTTP/1.1 {status} {_REASONS[status]}", "Content-Type: application/json"]
        chunked = mode in ("endless", "huge_error")
        if chunked:
            head.append("Transfer-Encoding: chunked")
        elif mode == "drip":
            body = json.dumps(reply.payload).encode()
            head.append(f"Content-Length: {len(body)}")
        else:
            head.append(f"Content-Length: {length}")
        writer.write(("\r\n".join(head + ["Connection: close"]) + "\r\n\r\n").encode("latin-1"))
        await writer.drain()
        if mode == "drip":
            for i in range(len(body)):
                writer.write(body[i:i + 1])
                await writer.drain()
                self.bytes_sent += 1
                await asyncio.sleep(self.drip_s)
            return
        opening = b'{"error": {"message": "' if mode == "huge_error" else b'{"choices": "'
        writer.write(f"{len(opening):x}\r\n".encode() + opening + b"\r\n" if chunked else opening)
        sent = len(opening)
        while mode == "endless" or sent < length:
            part = block if mode == "endless" else block[:length - sent]
            writer.write(f"{len(part):x}\r\n".encode() + part + b"\r\n" if chunked else part)
            await writer.drain()  # waits while the client does not read: what a reader that stopped holds down
            sent += len(part)
            self.bytes_sent += len(part)
        if chunked:
            writer.write(b"0\r\n\r\n")
            await writer.drain()

    # ---------------------------------------------------------------- routing

    async def _dispatch(self, method: str, path: str, headers: dict[str, str], raw: bytes) -> _Reply | None:
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = None
            self._record(method, path, headers, body)
            self._count("400")
            return _error(400, "request body is not valid JSON", "invalid_request_error", None)
        self._record(method, path, headers, body)
        auth_failure = self._check_key(headers)
        if auth_failure is not None:
            self._count("401")
            return auth_failure
        if method == "POST" and path == "/v1/chat/completions":
            return await self._chat(body)
        if method == "POST" and path == "/v1/completions":
            return await self._text(body)
        if method == "GET" and path == "/v1/models":
            self._count("ok")
            return _Reply(200, {"object": "list", "data": [
                {"id": FAKE_MODEL, "object": "model", "created": 0, "owned_by": "fake-openai"}]})
        self._count("404")
        return _error(404, f"Invalid URL ({method} {path})", "invalid_request_error", None)

    def _record(self, method: str, path: str, headers: dict[str, str], body: Any) -> None:
        with self._lock:
            self._records.append(RequestRecord(method, path, headers, body))
            self._counters["requests"] += 1

    def _check_key(self, headers: dict[str, str]) -> _Reply | None:
        """401 like OpenAI's, quoting the sent key as first 3 + ``...`` + last 4 characters."""
        if self.require_key is None:
            return None
        auth = headers.get("authorization", "")
        sent = auth[7:] if auth.lower().startswith("bearer ") else ""
        if sent == self.require_key:
            return None
        if not sent:
            message = "You didn't provide an API key. You need to provide your API key in an Authorization header."
            return _error(401, message, "invalid_request_error", None)
        message = (f"Incorrect API key provided: {sent[:3]}...{sent[-4:]}. "
                   "You can find your API key at https://platform.openai.com/account/api-keys.")
        return _error(401, message, "invalid_request_error", "invalid_api_key")

    async def _chat(self, body: Any) -> _Reply | None:
        if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
            self._count("400")
            return _error(400, "'messages' is a required property", "invalid_request_error", None)
        if self.no_chat_template is not None:
            status, message, type_ = NO_TEMPLATE_REFUSALS[self.no_chat_template]
            self._count(str(status))
            if message is None:  # uvicorn's own answer to an unhandled exception: no words at all
                return _Reply(status, "Internal Server Error")
            return _error(status, message, type_, None)
        return await self._answer(body)

    async def _text(self, body: Any) -> _Reply | None:
        """``/v1/completions``: the prompt as it is, no template."""
        if not isinstance(body, dict) or not isinstance(body.get("prompt"), str):
            self._count("400")
            return _error(400, "'prompt' is a required property (a string)", "invalid_request_error", None)
        return await self._answer(body)

    async def _answer(self, body: dict) -> _Reply | None:
        """Either route's reply: failures injected, latency, hostile replies, then the completion."""
        if body.get("stream"):
            self._count("400")
            return _error(400, "stream=true is not supported by FakeOpenAIServer", "invalid_request_error", None)
        if self.hostile is not None:
            self._count(self.hostile)
            reply = self._completion(body)
            reply.hostile, reply.close = self.hostile, True
            return reply
        mode = self._rng.choice(self.fail_modes) if self._rng.random() < self.fail_rate else None
        if mode == "timeout":
            self._count("timeout")
            await asyncio.sleep(self.hang_s)
            return None
        if self.latency_s > 0:
            await asyncio.sleep(self.latency_s)
        if mode == "429":
            self._count("429")
            retry = {"Retry-After": f"{self.retry_after_s:g}", "retry-after-ms": f"{self.retry_after_s * 1000:.0f}"}
            return _error(429, "Rate limit reached for requests (FakeOpenAIServer).", "requests",
                          "rate_limit_exceeded", retry)
        if mode == "500":
            self._count("500")
            return _error(500, "The server had an error while processing your request (injected).", "server_error", None)
        if mode == "400":  # a request the server refuses on its own account (not the endpoint's fault)
            self._count("400")
            return _error(400, "This request exceeds the model's context length (injected).",
                          "invalid_request_error", "context_length_exceeded")
        return self._completion(body)

    def _completion(self, body: dict) -> _Reply:
        try:
            contents = [self.responder(body) for _ in range(int(body.get("n") or 1))]
        except Exception as exc:  # a broken responder is a test bug; make it visible, not a hang
            self._count("500")
            return _error(500, f"responder raised {type(exc).__name__}: {exc}", "server_error", None)
        self._count("ok")
        self._completion_ids += 1
        limit = body.get("max_completion_tokens") or body.get("max_tokens")
        finish = [c[1] if isinstance(c, tuple) else "stop" for c in contents]  # a responder may say it cut
        contents = [c[0] if isinstance(c, tuple) else c for c in contents]
        if isinstance(limit, int) and limit > 0:  # a word is a token here: a longer reply is cut, as servers do
            for i, c in enumerate(contents):
                if _words(c) > limit and finish[i] != "length":
                    contents[i], finish[i] = " ".join(str(c).split()[:limit]), "length"
        completion_tokens = sum(_words(c) for c in contents)
        if "messages" not in body:  # /v1/completions
            prompt_tokens = _words(body["prompt"])
            return _Reply(200, {
                "id": f"cmpl-fake-{self._completion_ids}", "object": "text_completion", "created": int(time.time()),
                "model": body.get("model") or FAKE_MODEL,
                "choices": [{"index": i, "text": c, "logprobs": None, "finish_reason": finish[i]}
                            for i, c in enumerate(contents)],
                "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                          "total_tokens": prompt_tokens + completion_tokens},
            })
        prompt_tokens = sum(_words(m.get("content")) for m in body["messages"] if isinstance(m, dict))
        return _Reply(200, {
            "id": f"chatcmpl-fake-{self._completion_ids}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model") or FAKE_MODEL,
            "choices": [
                {"index": i, "message": {"role": "assistant", "content": c}, "logprobs": None,
                 "finish_reason": finish[i]} for i, c in enumerate(contents)
            ],
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                      "total_tokens": prompt_tokens + completion_tokens},
        })
