"""The HTTP client every endpoint request goes through: a total deadline and a bound on the reply body.

Why: the ``openai`` client's ``timeout`` is per read, so a server that sends a valid reply one byte every 2 s
never times out, and it reads a reply body (success or error) whole, so a 2 GiB body or an endless chunked one
fills memory. Here each attempt (the client's retries are attempts of their own) has ``timeout`` seconds for all
of it: connecting, the headers and the whole body. Past that it fails as a timeout, which the client retries and
``llm/errors.failure_reason`` reports as ``timeout``. A body is read up to ``max_reply_bytes`` (decoded bytes;
a ``Content-Length`` over it is refused before a byte of the body is read) and refused past it with
a refusal the client does not retry (``is_reply_too_large``): the same server sends the same body again.
"""

from __future__ import annotations

import asyncio
import functools
import time
from typing import Any

__all__ = ["bounded_async_client", "bounded_client", "is_reply_too_large", "format_bytes"]


def format_bytes(n: int) -> str:
    """``4194304`` -> ``"4 MiB"``; sizes under 1 KiB in bytes."""
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:g} {unit}"
    return f"{n} bytes"


def bounded_async_client(deadline_s: float, max_reply_bytes: int) -> Any:
    """An ``httpx`` async client for ``openai.AsyncOpenAI(http_client=...)``: each ``send`` under one deadline of
    ``deadline_s``, the body read up to ``max_reply_bytes``; otherwise the openai client's own defaults
    (connection limits, redirects, proxies from the environment)."""
    return _classes()[1](deadline_s=deadline_s, max_reply_bytes=max_reply_bytes)


def bounded_client(deadline_s: float, max_reply_bytes: int) -> Any:
    """The synchronous :func:`bounded_async_client`: the same bound on the body; the deadline is checked between
    the body's reads (a blocking read cannot be cut short, so headers that drip are bounded by the per-read timeout
    only). The kit's own requests all go through the async client."""
    return _classes()[2](deadline_s=deadline_s, max_reply_bytes=max_reply_bytes)


def is_reply_too_large(exc: BaseException) -> bool:
    """Is ``exc`` the refusal of a body past ``api.max_reply_bytes``?"""
    return isinstance(exc, _classes()[0])


@functools.cache
def _classes() -> tuple[type, type, type]:
    """The refusal and the two clients, made on first use: they subclass the ``openai`` package's (heavy)."""
    import httpx2
    import openai

    class ReplyTooLarge(openai.OpenAIError):
        """A reply body past ``api.max_reply_bytes``: refused, never retried (an ``openai.OpenAIError`` passes
        the client's retry loop untouched)."""

    class BoundedAsyncClient(openai.DefaultAsyncHttpxClient):
        def __init__(self, *, deadline_s: float, max_reply_bytes: int, **kwargs: Any):
            super().__init__(timeout=deadline_s, **kwargs)
            self.deadline_s, self.max_reply_bytes = deadline_s, max_reply_bytes

        async def send(self, request: Any, *, stream: bool = False, **kwargs: Any) -> Any:
            seconds = _deadline_s(self.deadline_s, request)
            deadline = asyncio.get_running_loop().time() + seconds
            try:
                async with asyncio.timeout_at(deadline):
                    response = await super().send(request, stream=True, **kwargs)
            except TimeoutError:
                raise httpx2.ReadTimeout(_late(seconds), request=request) from None
            try:
                _check_length(response, self.max_reply_bytes, ReplyTooLarge)
                if stream:  # never asked for by the kit; the deadline then covers the headers only
                    return response
                async with asyncio.timeout_at(deadline):
                    parts, size = [], 0
                    async for part in response.aiter_bytes():
                        size = _counted(size, part, self.max_reply_bytes, ReplyTooLarge)
                        parts.append(part)
            except TimeoutError:
                await response.aclose()
                raise httpx2.ReadTimeout(_late(seconds), request=request) from None
            except BaseException:
                await response.aclose()
                raise
            response._content = b"".join(parts)  # what aread leaves: .content, .text and .json() work as usual
            await response.aclose()
            return response

    class BoundedClient(openai.DefaultHttpxClient):
        def __init__(self, *, deadline_s: float, max_reply_bytes: int, **kwargs: Any):
            super().__init__(timeout=deadline_s, **kwargs)
            self.deadline_s, self.max_reply_bytes = deadline_s, max_reply_bytes

        def send(self, request: Any, *, stream: bool = False, **kwargs: Any) -> Any:
            seconds = _deadline_s(self.deadline_s, request)
            deadline = time.monotonic() + seconds
            response = super().send(request, stream=True, **kwargs)
            try:
                _check_length(response, self.max_reply_bytes, ReplyTooLarge)
                if stream:
                    return response
                parts, size = [], 0
                for part in response.iter_bytes():
                    if time.monotonic() > deadline:
                        raise httpx2.ReadTimeout(_late(seconds), request=request)
                    size = _counted(size, part, self.max_reply_bytes, ReplyTooLarge)
                    parts.append(part)
            except BaseException:
                response.close()
                raise
            response._content = b"".join(parts)  # what read() leaves
            response.close()
            return response

    return ReplyTooLarge, BoundedAsyncClient, BoundedClient


def _deadline_s(deadline_s: float, request: Any) -> float:
    """The client's deadline, or the request's own timeout where it is shorter (the quick ``GET /models``)."""
    own = [v for v in (request.extensions.get("timeout") or {}).values() if isinstance(v, (int, float))]
    return min([deadline_s] + ([max(own)] if own else []))


def _counted(size: int, part: bytes, limit: int, refusal: type) -> int:
    size += len(part)
    if size > limit:
        raise refusal(_too_large(limit, "the body"))
    return size


def _late(timeout: float) -> str:
    return f"no complete reply within {timeout:g} s (api.timeout: connect, headers and body together)"


def _too_large(limit: int, what: str) -> str:
    return (f"reply too large: {what} over api.max_reply_bytes = {limit} ({format_bytes(limit)}); refused "
            "(raise api.max_reply_bytes in settings.json if the server's replies are really this big)")


def _check_length(response: Any, limit: int, refusal: type) -> None:
    try:
        length = int(response.headers.get("content-length", ""))
    except ValueError:
        return
    if length > limit:
        raise refusal(_too_large(limit, f"Content-Length {length} bytes ({format_bytes(length)})"))
