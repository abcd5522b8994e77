"""The chat backends: the OpenAI one against the loopback FakeOpenAIServer with the real openai
client (retries, timeouts, Retry-After, budgets, cache, lazy input, key redaction), and the local
HF one on a tiny model.  No network beyond 127.0.0.1.
"""

from __future__ import annotations

import asyncio
import time

import pytest

from rleif_kit.testing.fake_openai import FakeOpenAIServer
from rleif_kit.llm.base import ChatRequest, ChatResult, Usage, run_sync
from rleif_kit.llm.hf_backend import HFBackend
from rleif_kit.llm.openai_backend import OpenAIBackend, estimate
from rleif_kit.llm.cache import ResponseCache
from rleif_kit.core.settings import Endpoint, Price
from rleif_kit.evolve.evolvers import alpaca_prompt
from rleif_kit.models.loading import load_causal_lm, load_tokenizer

KEY_ENV = "RLEIF_TEST_LLM_KEY"


def endpoint(server: FakeOpenAIServer, *, timeout: float = 5.0, max_retries: int = 0, key_env: str | None = None):
    return Endpoint("evolve", "fake-evolver", server.base_url, key_env, timeout, max_retries)


def requests(n: int, words: int = 3, prefix: str = "r", **kw) -> list[ChatRequest]:
    return [ChatRequest(f"{prefix}{i}", ({"role": "user", "content": " ".join(["w"] * (words - 1) + [str(i)])},), **kw)
            for i in range(n)]


class CountingServer(FakeOpenAIServer):
    """Counts chat completions in flight at the server (its loop is single-threaded)."""

    in_flight = peak = 0

    async def _chat(self, body):
        self.in_flight += 1
        self.peak = max(self.peak, self.in_flight)
        try:
            return await super()._chat(body)
        finally:
            self.in_flight -= 1


async def collect(backend, reqs) -> list[ChatResult]:
    try:
        return [r async for r in backend.stream(reqs)]
    finally:
        await backend.aclose()


def test_results_carry_keys_and_concurrency_is_bounded():
    with CountingServer(responder=lambda body: "echo " + body["messages"][0]["content"], latency_s=0.03) as server:
        backend = OpenAIBackend(endpoint(server), concurrency=4)
        reqs = requests(30)
        results = asyncio.run(collect(backend, reqs))
        bodies = [r.body for r in server.requests]
    assert sorted(r.key for r in results) == sorted(r.key for r in reqs)
    for result in results:  # each text answers its own request
        assert result.ok and result.text == f"echo w w {result.key[1:]}" and result.model == "fake-evolver"
        assert (result.prompt_tokens, result.completion_tokens, result.finish_reason) == (3, 4, "stop")
    assert server.peak == 4  # the cap was reached and never exceeded
    assert bodies[0]["model"] == "fake-evolver" and bodies[0]["max_tokens"] == 512 and "stop" not in bodies[0]


def test_acomplete_from_many_jobs_keeps_the_concurrency_bound_and_the_budget():
    async def jobs(backend):
        try:
            return await asyncio.gather(*(backend.acomplete(r) for r in requests(40)))
        finally:
            await backend.aclose()

    with CountingServer(latency_s=0.02) as server:
        results = asyncio.run(jobs(OpenAIBackend(endpoint(server), concurrency=5)))
        assert server.peak == 5 and all(r.ok for r in results)
        capped = OpenAIBackend(endpoint(server), concurrency=5, max_requests=12)
        results = asyncio.run(jobs(capped))
    assert sum(r.ok for r in results) == 12  # 12 sent, the other 28 refused without a request
    assert all(r.error.startswith("budget: max_requests") for r in results if not r.ok)


def test_injected_429_500_and_timeouts_are_retried_and_every_request_gets_a_result():
    with FakeOpenAIServer(latency_s=0.01, fail_rate=0.2, retry_after_s=0.05, hang_s=3.0, seed=3) as server:
        backend = OpenAIBackend(endpoint(server, timeout=0.5, max_retries=3), concurrency=16)
        results = backend.complete(requests(60))
        counters = server.counters
    assert [r.key for r in results] == [f"r{i}" for i in range(60)]
    assert counters["429"] + counters["500"] + counters["timeout"] > 0  # failures really were injected
    failed = [r for r in results if not r.ok]
    assert all(r.error.startswith(("timeout", "rate limited (429)", "http 500")) for r in failed)
    usage = backend.usage
    assert (usage.requests, usage.ok, usage.failed, usage.cached) == (60, 60 - len(failed), len(failed), 0)
    assert usage.ok == counters["ok"]  # one server success per ok result: nothing lost or doubled
    assert usage.prompt_tokens == sum(r.prompt_tokens for r in results) == 3 * usage.ok
    assert usage.completion_tokens == usage.ok  # "ok" is one word
    assert usage.cost_usd is None  # no price given: unknown, never 0


def test_failure_reasons_after_retries():
    with FakeOpenAIServer(fail_rate=1.0, fail_modes=("429",), retry_after_s=0.05) as server:
        start = time.perf_counter()
        (rate_limited,) = OpenAIBackend(endpoint(server, max_retries=3)).complete(requests(1))
        elapsed = time.perf_counter() - start
        assert server.counters["429"] == 4  # first try + 3 retries
    # Retry-After (0.05 s) was honoured: the client's own backoff would take 0.5 + 1 + 2 s.
    assert elapsed < 1.0
    # the cause first (what the failure checks classify by), then the server's own words
    assert rate_limited.error == "rate limited (429) after 3 retries: Rate limit reached for requests " \
        "(FakeOpenAIServer)." and rate_limited.text is None
    with FakeOpenAIServer(fail_rate=1.0, fail_modes=("500",)) as server:
        (http500,) = OpenAIBackend(endpoint(server, max_retries=0)).complete(requests(1))
    assert http500.error == "http 500: The server had an error while processing your request (injected)."
    with FakeOpenAIServer(fail_rate=1.0, fail_modes=("timeout",), hang_s=5.0) as server:
        (timed_out,) = OpenAIBackend(endpoint(server, timeout=0.2, max_retries=1)).complete(requests(1))
    assert timed_out.error == "timeout after 1 retries" and not timed_out.ok and timed_out.latency_s >= 0.4


def test_cost_is_computed_from_the_price():
    # 4 requests x 250 prompt words = 1,000 prompt tokens; 4 x 125 reply words = 500 output tokens.
    with FakeOpenAIServer(responder=lambda body: " ".join(["x"] * 125)) as server:
        backend = OpenAIBackend(endpoint(server), price=Price(2.5, 10.0))
        backend.complete(requests(4, words=250))
    assert (backend.usage.prompt_tokens, backend.usage.completion_tokens) == (1000, 500)
    # 1,000 x $2.5/M + 500 x $10/M = $0.0025 + $0.005 = $0.0075
    assert backend.usage.cost_usd == pytest.approx(0.0075)
    assert backend.usage.to_dict() == {"requests": 4, "ok": 4, "failed": 0, "cached": 0, "prompt_tokens": 1000,
                                       "completion_tokens": 500, "cost_usd": pytest.approx(0.0075)}


def test_usage_unknown_price_stays_unknown():
    usage = Usage(cost_usd=0.0)
    ok = ChatResult("a", "t", None, "stop", 10, 5, "m", 0.1)
    usage.add(ok, Price(1.0, 1.0))
    usage.add(ok, None)
    usage.add(ok, Price(1.0, 1.0))
    assert usage.cost_usd is None and usage.requests == 3


def test_max_requests_stops_cleanly():
    with FakeOpenAIServer(latency_s=0.01) as server:
        backend = OpenAIBackend(endpoint(server), concurrency=3, max_requests=7)
        results = asyncio.run(collect(backend, requests(20)))
        assert server.counters["requests"] == 7  # exactly the budget was sent
    assert len(results) == 7 and all(r.ok for r in results)
    assert backend.stopped_reason == "budget: max_requests reached (7)"
    # complete() returns one result per input; the unsent ones say why
    with FakeOpenAIServer() as server:
        results = OpenAIBackend(endpoint(server), concurrency=2, max_requests=5).complete(requests(8))
        assert server.counters["requests"] == 5
    assert [r.key for r in results] == [f"r{i}" for i in range(8)]
    assert [r.error for r in results[5:]] == ["budget: max_requests reached (5)"] * 3


def test_max_cost_stops_once_spent():
    with FakeOpenAIServer() as server:
        # $1 per prompt token, 2 prompt tokens per request: $2 each; stops after the 3rd ($6 >= $5)
        backend = OpenAIBackend(endpoint(server), concurrency=1, price=Price(1e6, 0.0), max_cost=5.0)
        results = asyncio.run(collect(backend, requests(10, words=2)))
        assert server.counters["requests"] == 3
    assert len(results) == 3 and backend.usage.cost_usd == pytest.approx(6.0)
    assert backend.stopped_reason.startswith("budget: max_cost reached")
    with pytest.raises(ValueError, match="needs a price"):
        OpenAIBackend(endpoint(server), max_cost=1.0)


def test_cache_makes_a_rerun_free(tmp_path):
    cache = ResponseCache(tmp_path / "cache.sqlite")
    with FakeOpenAIServer(responder=lambda body: "answer " + body["messages"][0]["content"]) as server:
        first = OpenAIBackend(endpoint(server), cache=cache).complete(requests(10))
        sent = server.counters["requests"]
        again = OpenAIBackend(endpoint(server), cache=cache)
        second = again.complete(requests(10, prefix="again"))
        assert server.counters["requests"] == sent == 10  # the second run sent nothing
        other_sample = OpenAIBackend(endpoint(server), cache=cache).complete(requests(1, sample_index=1))
        assert server.counters["requests"] == 11  # another sample of a prompt is another entry
    assert all(r.cached for r in second) and not any(r.cached for r in first) and not other_sample[0].cached
    assert [r.key for r in second] == [f"again{i}" for i in range(10)]  # keys of the new requests
    assert [r.text for r in second] == [r.text for r in first]
    assert (again.usage.requests, again.usage.cached, again.usage.ok, again.usage.prompt_tokens) == (0, 10, 10, 0)
    assert len(cache) == 11
    cache.close()
    assert len(ResponseCache(tmp_path / "cache.sqlite")) == 11  # it is on disk


def test_failures_are_not_cached(tmp_path):
    cache = ResponseCache(tmp_path / "cache.sqlite")
    with FakeOpenAIServer(fail_rate=1.0, fail_modes=("500",)) as server:
        OpenAIBackend(endpoint(server), cache=cache).complete(requests(2))
    assert len(cache) == 0


def test_input_is_pulled_lazily():
    pulled = 0

    def source():
        nonlocal pulled
        for request in requests(100):
            pulled += 1
            yield request

    async def consume(backend):
        seen, ahead = 0, []
        async for _ in backend.stream(source()):
            seen += 1
            ahead.append(pulled - seen)
        await backend.aclose()
        return seen, max(ahead)

    with FakeOpenAIServer(latency_s=0.005) as server:
        seen, most_ahead = asyncio.run(consume(OpenAIBackend(endpoint(server), concurrency=5)))
    assert seen == 100 and most_ahead <= 5


def test_async_iterable_input_and_early_break():
    async def source():
        for request in requests(50):
            yield request

    async def first_two(backend):
        gen = backend.stream(source())
        got = [await anext(gen), await anext(gen)]
        await gen.aclose()  # the consumer stops early: in-flight requests are cancelled
        await backend.aclose()
        return got

    with FakeOpenAIServer(latency_s=0.01) as server:
        backend = OpenAIBackend(endpoint(server), concurrency=8)
        start = time.perf_counter()
        assert len(asyncio.run(first_two(backend))) == 2
        assert time.perf_counter() - start < 2.0
        assert server.counters["requests"] <= 10


def test_run_sync_outside_and_inside_a_running_loop():
    async def add(a, b):
        await asyncio.sleep(0)
        return a + b

    assert run_sync(add(1, 2)) == 3

    with FakeOpenAIServer() as server:
        backend = OpenAIBackend(endpoint(server), concurrency=4)
        outside = backend.complete(requests(5))

        async def notebook_cell():  # what a Jupyter cell looks like: a loop is already running
            assert run_sync(add(2, 3)) == 5
            return backend.complete(requests(5))

        inside = asyncio.run(notebook_cell())
        again = backend.complete(requests(5))  # the same backend on yet another loop
    assert [r.text for r in outside] == [r.text for r in inside] == [r.text for r in again] == ["ok"] * 5


def test_wrong_key_is_never_echoed_and_stops_the_run(monkeypatch):
    wrong = "sk-wrong-secret-98765zyxw"
    monkeypatch.setenv(KEY_ENV, wrong)
    with FakeOpenAIServer(require_key="sk-the-right-one-0000") as server:
        backend = OpenAIBackend(endpoint(server, key_env=KEY_ENV), concurrency=2)
        results = backend.complete(requests(6))
        # the first request to an endpoint goes alone: its 401 stopped the run, not 2 (concurrency) or 6 requests
        assert server.counters["401"] == 1
    assert all(not r.ok for r in results)
    assert results[0].error.startswith("http 401: Incorrect API key provided")
    for text in [r.error for r in results] + [backend.stopped_reason]:
        assert wrong not in text and wrong[-4:] not in text and wrong[:8] not in text
    assert backend.stopped_reason.startswith("endpoint rejected the request: http 401")


def test_openai_account_headers_never_reach_another_server(monkeypatch):
    monkeypatch.setenv("OPENAI_ORG_ID", "org-private")
    monkeypatch.setenv("OPENAI_PROJECT_ID", "proj-private")
    with FakeOpenAIServer() as server:
        OpenAIBackend(endpoint(server)).complete(requests(1))
        headers = server.requests[0].headers
    assert "openai-organization" not in headers and "openai-project" not in headers


def test_bad_endpoint_config_raises_at_construction(monkeypatch):
    from rleif_kit.core.settings import SettingsError

    monkeypatch.delenv(KEY_ENV, raising=False)
    with pytest.raises(SettingsError, match=KEY_ENV):
        OpenAIBackend(Endpoint("evolve", "m", "http://127.0.0.1:9/v1", KEY_ENV, 1.0, 0))
    with pytest.raises(ValueError, match="concurrency"):
        OpenAIBackend(Endpoint("evolve", "m", "http://127.0.0.1:9/v1", None, 1.0, 0), concurrency=0)


def test_stop_strings_are_sent():
    with FakeOpenAIServer() as server:
        OpenAIBackend(endpoint(server)).complete(requests(1, stop=("###",), temperature=0.7, top_p=0.9))
        body = server.requests[0].body
    assert (body["stop"], body["temperature"], body["top_p"]) == (["###"], 0.7, 0.9)


def test_estimate_is_a_dry_run():
    reqs = [ChatRequest(str(i), ({"role": "user", "content": "x" * 40},)) for i in range(3)]
    assert estimate(reqs, None, 100) == {"requests": 3, "prompt_tokens": 30, "output_tokens": 300, "cost_usd": None}
    # 30 x $2.5/M + 300 x $10/M = $0.000075 + $0.003 = $0.003075
    assert estimate(iter(reqs), Price(2.5, 10.0), 100)["cost_usd"] == pytest.approx(0.003075)


def test_messages_to_prompt_uses_the_chat_template_or_alpaca():
    from rleif_kit.worlds.prompts import math_prompt
    from rleif_kit.evolve.evolvers import alpaca_prompt
    from rleif_kit.llm.hf_backend import _cut_at_stop, messages_to_prompt

    class NoTemplate:
        chat_template = None

    messages = ({"role": "system", "content": "be brief"}, {"role": "user", "content": "Add 2 and 3."},
                {"role": "user", "content": "Show steps."})
    assert messages_to_prompt(messages, NoTemplate(), alpaca_prompt) == math_prompt("Add 2 and 3.\n\nShow steps.", cot=False)

    class Templated:  # writes its own BOS, which generation's tokenizer call would add again
        chat_template, bos_token, bos_token_id = "{{ messages }}", "<s>", 1

        def apply_chat_template(self, messages, tokenize, add_generation_prompt):
            assert tokenize is False and add_generation_prompt is True
            return "<s>[INST] " + messages[-1]["content"] + " [/INST]"

        def __call__(self, text):
            return {"input_ids": [1]}

    assert messages_to_prompt(messages, Templated(), alpaca_prompt) == "[INST] Show steps. [/INST]"
    assert _cut_at_stop("a###b##c", ("##", "###")) == "a" and _cut_at_stop("abc", ("x",)) is None


@pytest.mark.slow
def test_hf_backend_generates_with_token_counts(small_model_dir):
    backend = HFBackend(str(small_model_dir), load_model=load_causal_lm, load_tokenizer=load_tokenizer,
                        prompt_format=alpaca_prompt, batch_size=2, device="cpu")
    reqs = [ChatRequest("a", ({"role": "user", "content": "What is 2 + 3?"},), max_tokens=8),
            ChatRequest("b", ({"role": "user", "content": "What is 17 + 1?"},), max_tokens=8),
            ChatRequest("c", ({"role": "user", "content": "What is 4 + 4?"},), max_tokens=5, temperature=0.8)]
    results = backend.complete(reqs)
    assert [r.key for r in results] == ["a", "b", "c"]
    for result, request in zip(results, reqs):
        assert result.ok and isinstance(result.text, str) and result.model == str(small_model_dir)
        assert result.prompt_tokens > 10 and 0 <= result.completion_tokens <= request.max_tokens
        assert result.finish_reason == ("length" if result.completion_tokens == request.max_tokens else "stop")
    assert results[1].prompt_tokens == results[0].prompt_tokens + 1  # "17" is two digit tokens, "2" one
    assert backend.usage.requests == 3 and backend.usage.cost_usd is None
    assert backend.usage.completion_tokens == sum(r.completion_tokens for r in results)


def test_a_key_echoed_at_the_cut_is_redacted_whole(monkeypatch):
    """Issue 17: the reason was cut to 300 characters before redaction, so a key the server echoed across the cut
    survived in part (15-17 of its characters in stdout, usage.json and failed.jsonl)."""
    import types

    import httpx
    import openai

    key = "sk-proj-0123456789abcdefghijKLMNOP"
    backend = OpenAIBackend(endpoint(types.SimpleNamespace(base_url="http://127.0.0.1:9/v1")))
    backend._client = types.SimpleNamespace(api_key=key)
    response = httpx.Response(500, request=httpx.Request("POST", "http://127.0.0.1:9/v1/chat/completions"))
    for lead in range(270, 300):
        exc = openai.APIStatusError("boom", response=response, body={"message": "x" * lead + f" key {key} rejected"})
        reason = backend._reason(exc)
        assert len(reason) <= 300
        assert not any(key[i:i + 6] in reason for i in range(len(key) - 5)), (lead, reason)


def test_usage_accumulates_across_invocations():
    """Issue 17: usage.json held only the last invocation, so after resumed runs it said $0."""
    from rleif_kit.llm.base import merge_usage

    first = {"requests": 10, "ok": 9, "failed": 1, "cached": 0, "prompt_tokens": 100, "completion_tokens": 50,
             "cost_usd": 0.25, "stopped_reason": "budget: max_requests reached (10)"}
    second = {"requests": 0, "ok": 4, "failed": 0, "cached": 4, "prompt_tokens": 0, "completion_tokens": 0,
              "cost_usd": 0.0, "stopped_reason": None}
    merged = merge_usage(merge_usage(None, first), second)
    assert merged["stopped_reason"] is None and merged["requests"] == 0  # the top level is this invocation
    assert merged["total"] == {"requests": 10, "ok": 13, "failed": 1, "cached": 4, "prompt_tokens": 100,
                               "completion_tokens": 50, "cost_usd": 0.25, "invocations": 2}
    assert [r["requests"] for r in merged["invocations"]] == [10, 0]
    unpriced = merge_usage(merged, {**second, "cost_usd": None})
    assert unpriced["total"]["cost_usd"] is None and unpriced["total"]["invocations"] == 3
    legacy = merge_usage(first, second)  # a usage.json written before invocations were kept
    assert legacy["total"]["requests"] == 10 and len(legacy["invocations"]) == 2
