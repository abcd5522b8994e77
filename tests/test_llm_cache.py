"""Issue 30, item 3: only complete, accepted replies are served from the response cache. A reply cut off at
``max_tokens`` (finish_reason "length"), an empty one or a failure is never stored, and such rows in an older
cache are ignored: once the endpoint recovered, a rerun sends those requests again.

Against the loopback FakeOpenAIServer with the real openai client; no network.
"""

from __future__ import annotations

from rleif_kit.core.settings import Endpoint
from rleif_kit.llm.base import ChatRequest, ChatResult, cut_off
from rleif_kit.llm.cache import ResponseCache, cache_key
from rleif_kit.llm.openai_backend import OpenAIBackend
from rleif_kit.testing.fake_openai import FakeOpenAIServer


def asks(n: int, max_tokens: int = 8) -> list[ChatRequest]:
    return [ChatRequest(f"r{i}", ({"role": "user", "content": f"question {i}"},), max_tokens=max_tokens)
            for i in range(n)]


def backend(server, cache) -> OpenAIBackend:
    return OpenAIBackend(Endpoint("evolve", "m", server.base_url, None, 5.0, 0), cache=cache, concurrency=4)


def test_cut_off_replies_are_not_cached_and_are_asked_again_once_the_endpoint_recovered(tmp_path):
    cache = ResponseCache(tmp_path / "cache.sqlite")
    broken = {"on": True}

    def responder(body):  # a server that cuts every reply short, until it is fixed
        return ("a very long answer that goes on and on", "length") if broken["on"] else "The answer is: 5"

    with FakeOpenAIServer(responder=responder) as server:
        first = backend(server, cache).complete(asks(4))
        assert all(r.ok and cut_off(r) for r in first) and len(cache) == 0  # ok to the client, not to the cache
        broken["on"] = False
        again = backend(server, cache).complete(asks(4))
        assert server.counters["requests"] == 8  # the rerun sent all 4 again (issue: it sent 0)
        assert [r.text for r in again] == ["The answer is: 5"] * 4 and not any(r.cached for r in again)
        third = backend(server, cache).complete(asks(4))
        assert server.counters["requests"] == 8 and all(r.cached for r in third)  # complete replies: served


def test_failures_and_empty_replies_are_never_stored(tmp_path):
    cache = ResponseCache(tmp_path / "cache.sqlite")
    with FakeOpenAIServer(fail_rate=1.0, fail_modes=("500",)) as server:
        assert not any(r.ok for r in backend(server, cache).complete(asks(2)))
    with FakeOpenAIServer(responder=lambda body: "   ") as server:
        backend(server, cache).complete(asks(2))
    assert len(cache) == 0


def test_an_old_caches_cut_off_or_empty_rows_are_ignored(tmp_path):
    """A cache written by an older kit may hold cut-off replies: they are never served."""
    cache = ResponseCache(tmp_path / "cache.sqlite")
    requests = asks(3)
    rows = [("half an answ", "length"), ("", "stop"), ("The answer is: 7", "stop")]
    for request, (text, finish) in zip(requests, rows):  # written as the old put did: straight into the table
        cache._db.execute("INSERT OR REPLACE INTO responses VALUES (?, ?, ?, ?, ?, ?, ?)",
                          (cache_key(request, "m"), "m", text, finish, 1, 3, 0.1))
    assert [cache.get(r, "m") is not None for r in requests] == [False, False, True]
    with FakeOpenAIServer(responder=lambda body: "The answer is: 9") as server:
        results = backend(server, cache).complete(requests)
        assert server.counters["requests"] == 2  # the cut and the empty one were asked again
    assert [r.cached for r in results] == [False, False, True]
    assert [r.text for r in results] == ["The answer is: 9", "The answer is: 9", "The answer is: 7"]
    assert cache.get(requests[0], "m").text == "The answer is: 9"  # the fresh, complete reply replaced the cut one


def test_put_refuses_what_is_not_a_complete_reply(tmp_path):
    cache = ResponseCache(tmp_path / "cache.sqlite")
    request = asks(1)[0]
    for text, error, finish in (("cut", None, "length"), ("filtered", None, "content_filter"), (None, "http 500", None),
                                ("", None, "stop")):
        cache.put(request, ChatResult("r0", text, error, finish, 1, 1, "m", 0.1))
    assert len(cache) == 0
    cache.put(request, ChatResult("r0", "whole", None, "stop", 1, 1, "m", 0.1))
    assert len(cache) == 1 and cache.get(request, "m").text == "whole"


def test_a_full_disk_while_storing_a_reply_is_a_note_and_the_run_goes_on(tmp_path, capsys):
    # sqlite's own "database or disk is full" (SQLITE_FULL), made by capping the file's pages, not by a mock
    cache = ResponseCache(tmp_path / "cache.sqlite")
    cache._db.execute("PRAGMA max_page_count = 8")
    requests = asks(40)
    for request in requests:  # the old code: sqlite3.OperationalError out of put, a traceback ending the stage
        cache.put(request, ChatResult(request.key, "x" * 2000, None, "stop", 1, 1, "m", 0.1))
    out = capsys.readouterr().out
    assert out.count("\n") == 1 and out.startswith("note: no space left on device for the response cache ")
    assert "stores no more replies this run" in out
    assert cache.full and 0 < len(cache) < len(requests)
    assert cache.get(requests[0], "m").text == "x" * 2000  # what was stored before is kept
