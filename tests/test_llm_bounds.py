"""Issue 42, items 2, 3 and 7 (client side): every request has a total deadline of ``api.timeout``, a reply body is
read up to ``api.max_reply_bytes``, and a request whose text cannot be encoded is never sent nor counted.

Against the loopback FakeOpenAIServer's hostile replies (a 200 dripping one byte at a time, a huge body, an endless
chunked one, a huge chunked error body); each call runs in a thread joined with a bound, so a client that hangs
fails the test instead of hanging it. No network.
"""

from __future__ import annotations

import threading
import time
from types import SimpleNamespace

import pytest

from rleif_kit.core.api_keys import make_client
from rleif_kit.core.settings import Endpoint
from rleif_kit.llm.base import ChatRequest
from rleif_kit.llm.check_api import check_endpoint
from rleif_kit.llm.errors import MAX_SCANNED_CHARS, server_message
from rleif_kit.llm.openai_backend import OpenAIBackend
from rleif_kit.llm.usage import ledger_runs
from rleif_kit.testing.fake_openai import FakeOpenAIServer

MIB = 1 << 20
ASK = ChatRequest("a", ({"role": "user", "content": "hi"},))


def bounded(call, limit_s: float = 20.0):
    """``call()``'s value and wall time; fails when it has not returned within ``limit_s``."""
    box: dict = {}

    def run():
        start = time.perf_counter()
        box["value"] = call()
        box["wall"] = time.perf_counter() - start

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(limit_s)
    assert "value" in box, f"no answer within {limit_s} s: no total deadline, or a body read without a bound"
    return box["value"], box["wall"]


def test_a_dripping_reply_fails_at_the_deadline_as_a_timeout_and_is_retried():
    # one byte every 0.3 s: no single read waits the 1 s api.timeout, the whole reply (200+ bytes) would take a minute
    with FakeOpenAIServer(hostile="drip", drip_s=0.3) as server:
        backend = OpenAIBackend(Endpoint("evolve", "m", server.base_url, None, 1.0, 1))
        (result,), wall = bounded(lambda: backend.complete([ASK]))
        assert result.error == "timeout after 1 retries"  # the failure table's `timeout` cause
        assert server.counters["drip"] == 2  # the usual handling: the client retried it
    assert wall < 10


def test_check_api_has_the_same_deadline():
    with FakeOpenAIServer(hostile="drip", drip_s=0.3) as server:
        row, _ = bounded(lambda: check_endpoint(Endpoint("evolve", "m", server.base_url, None, 1.0, 3)))
    assert not row.ok and row.detail == "timeout"  # check-api never retries


@pytest.mark.parametrize("hostile", ["huge", "endless", "huge_error"])
def test_a_reply_past_max_reply_bytes_is_refused_with_one_line_and_not_read_on(hostile):
    with FakeOpenAIServer(hostile=hostile, huge_bytes=256 * MIB) as server:
        backend = OpenAIBackend(Endpoint("evolve", "m", server.base_url, None, 10.0, 2, MIB))
        (result,), _ = bounded(lambda: backend.complete([ASK]))
        sent, asked = server.bytes_sent, server.counters[hostile]
    assert result.error.startswith("reply too large: ")
    assert "over api.max_reply_bytes = 1048576 (1 MiB); refused" in result.error and "\n" not in result.error
    assert asked == 1  # the same server sends the same body again: never retried
    assert sent < 32 * MIB  # 1 MiB read, then the client hung up (the rest is socket buffers)


def test_check_api_refuses_a_huge_reply_too():
    with FakeOpenAIServer(hostile="endless") as server:
        row, _ = bounded(lambda: check_endpoint(Endpoint("evolve", "m", server.base_url, None, 10.0, 0, MIB)))
        sent = server.bytes_sent
    assert not row.ok and row.detail.startswith("reply too large: the body over api.max_reply_bytes")
    assert sent < 32 * MIB


def test_the_failure_reason_scans_only_the_head_of_an_error_body():
    exc = SimpleNamespace(body="<html><body><p>" + "overloaded " * MIB + "</p></body></html>")
    text = server_message(exc)
    assert text.startswith("overloaded overloaded") and len(text) <= MAX_SCANNED_CHARS


def test_unencodable_text_is_refused_before_it_is_sent_or_counted(tmp_path):
    ledger = tmp_path / "usage.jsonl"
    bad = ChatRequest("b", ({"role": "system", "content": "be brief"}, {"role": "user", "content": "x\ud800y"}))
    with FakeOpenAIServer() as server:
        backend = OpenAIBackend(Endpoint("evolve", "m", server.base_url, None, 5.0, 0), ledger=ledger)
        ok, refused = backend.complete([ASK, bad])
        received = server.counters.get("requests", 0)
    assert ok.ok and received == 1
    assert refused.error == ("unencodable text: messages[1].content has \\ud800 at character 1, which UTF-8 cannot "
                             "encode (a lone surrogate); not sent")
    (run,) = ledger_runs(ledger)
    assert run["requests"] == 1 and run["unfinished"] == 0  # only what left
    assert backend.usage.requests == 1


def test_a_reply_holding_unencodable_text_fails_as_such_and_is_kept_nowhere(tmp_path):
    """JSON lets a server send a lone surrogate (``"\\ud800"``); no cache row, record or later request could hold
    it, so the reply is a failure of its own cause, not a traceback after it was counted."""
    from rleif_kit.checks.stage_failures import cause_of
    from rleif_kit.llm.cache import ResponseCache

    cache = ResponseCache(tmp_path / "cache.sqlite")
    with FakeOpenAIServer(responder=lambda body: "ok \ud800 reply") as server:
        backend = OpenAIBackend(Endpoint("evolve", "m", server.base_url, None, 5.0, 0), cache=cache)
        (result,) = backend.complete([ASK])
    assert not result.ok and result.text is None
    assert result.error.startswith("unencodable text in the reply: \\ud800 at character 3")
    assert cause_of(result.error) == "unencodable text" and len(cache) == 0


def test_the_synchronous_client_bounds_the_body_and_the_drip_too():
    with FakeOpenAIServer(hostile="endless") as server:
        client = make_client(Endpoint("evolve", "m", server.base_url, None, 10.0, 0, MIB))
        error, _ = bounded(lambda: _error_of(lambda: client.chat.completions.create(model="m", messages=[])))
        sent = server.bytes_sent
    assert error.startswith("reply too large: the body over api.max_reply_bytes") and sent < 32 * MIB
    with FakeOpenAIServer(hostile="drip", drip_s=0.3) as server:
        client = make_client(Endpoint("evolve", "m", server.base_url, None, 1.0, 0))
        error, wall = bounded(lambda: _error_of(lambda: client.chat.completions.create(model="m", messages=[])))
    assert error == "Request timed out." and wall < 10


def _error_of(call) -> str:
    try:
        call()
    except Exception as exc:  # noqa: BLE001 - the test reads what it says
        return str(exc)
    return "no error"
