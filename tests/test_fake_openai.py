"""The loopback fake OpenAI server: protocol shape, failure injection, keep-alive, concurrency."""

from __future__ import annotations

import asyncio
import socket
import time

import httpx
import openai
import pytest

from rleif_kit.testing.fake_openai import FakeOpenAIServer

KEY = "sk-test-key-1234abcd"
MESSAGES = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "what is two plus two"}]


def test_chat_completion_shape_and_usage():
    seen = []

    def responder(body):
        seen.append(body)
        return "the answer is 4"

    with FakeOpenAIServer(responder=responder) as server:
        assert server.base_url == f"http://127.0.0.1:{server.port}/v1"
        with openai.OpenAI(api_key=KEY, base_url=server.base_url, max_retries=0) as client:
            reply = client.chat.completions.create(model="wizard", messages=MESSAGES, temperature=0)
        raw = httpx.post(f"{server.base_url}/chat/completions", json={"model": "wizard", "messages": MESSAGES}).json()
        (record, _) = server.requests
    assert reply.choices[0].message.content == "the answer is 4"
    assert reply.choices[0].finish_reason == "stop" and reply.model == "wizard"
    assert (reply.usage.prompt_tokens, reply.usage.completion_tokens, reply.usage.total_tokens) == (7, 4, 11)
    assert raw["object"] == "chat.completion" and raw["id"].startswith("chatcmpl-") and isinstance(raw["created"], int)
    assert seen[0]["messages"] == MESSAGES and seen[0]["temperature"] == 0
    assert record.method == "POST" and record.path == "/v1/chat/completions"
    assert record.headers["authorization"] == f"Bearer {KEY}" and record.body["model"] == "wizard"


def test_models_list_and_unknown_path():
    with FakeOpenAIServer() as server:
        models = httpx.get(f"{server.base_url}/models")
        missing = httpx.get(f"{server.base_url}/nope")
        bad_json = httpx.post(f"{server.base_url}/chat/completions", content=b"{not json")
        no_messages = httpx.post(f"{server.base_url}/chat/completions", json={"model": "m"})
    assert models.status_code == 200 and models.json()["object"] == "list" and models.json()["data"][0]["id"]
    assert missing.status_code == 404 and "Invalid URL" in missing.json()["error"]["message"]
    assert bad_json.status_code == 400 and no_messages.status_code == 400


def test_429_carries_retry_after():
    with FakeOpenAIServer(fail_rate=1.0, fail_modes=("429",), retry_after_s=0.25) as server:
        r = httpx.post(f"{server.base_url}/chat/completions", json={"model": "m", "messages": MESSAGES})
    assert r.status_code == 429
    assert r.headers["retry-after"] == "0.25"
    err = r.json()["error"]
    assert err["code"] == "rate_limit_exceeded" and err["message"]


def test_openai_client_retries_429_with_retry_after_until_success():
    with FakeOpenAIServer(fail_rate=0.5, fail_modes=("429",), retry_after_s=0.02, seed=1) as server:
        with openai.OpenAI(api_key=KEY, base_url=server.base_url, max_retries=2, timeout=5) as client:
            replies = [client.chat.completions.create(model="m", messages=MESSAGES) for _ in range(12)]
        counters = server.counters
    assert [r.choices[0].message.content for r in replies] == ["ok"] * 12
    assert counters["ok"] == 12 and counters["429"] > 0  # failures were really injected and retried
    assert counters["requests"] == 12 + counters["429"]


def test_openai_client_retries_a_500():
    # seed 4: the first request fails with 500, the retry succeeds (one client backoff, < 1 s)
    with FakeOpenAIServer(fail_rate=0.5, fail_modes=("500",), seed=4) as server:
        with openai.OpenAI(api_key=KEY, base_url=server.base_url, max_retries=2, timeout=5) as client:
            assert client.chat.completions.create(model="m", messages=MESSAGES).choices[0].message.content == "ok"
        assert (server.counters["500"], server.counters["ok"]) == (1, 1)


def test_same_seed_same_failures():
    def run(seed):
        with FakeOpenAIServer(fail_rate=0.5, fail_modes=("429", "500"), seed=seed) as server, httpx.Client() as c:
            return [c.post(f"{server.base_url}/chat/completions", json={"model": "m", "messages": MESSAGES}).status_code
                    for _ in range(20)]

    assert run(7) == run(7)
    assert set(run(7)) == {200, 429, 500}


def test_timeout_mode_hangs_and_shutdown_is_prompt():
    server = FakeOpenAIServer(fail_rate=1.0, fail_modes=("timeout",), hang_s=30.0).start()
    try:
        with openai.OpenAI(api_key=KEY, base_url=server.base_url, max_retries=0, timeout=0.3) as client:
            with pytest.raises(openai.APITimeoutError):
                client.chat.completions.create(model="m", messages=MESSAGES)
        # a second, still-hanging request must not hold up shutdown
        s = socket.create_connection(("127.0.0.1", server.port))
        s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nContent-Length: 28\r\n\r\n"
                  b'{"messages": [], "model": 1}')
        deadline = time.monotonic() + 2.0
        while server.counters["timeout"] < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert server.counters["timeout"] == 2
    finally:
        start = time.perf_counter()
        server.stop()
        assert time.perf_counter() - start < 2.0
    assert s.recv(1) == b""  # closed without an answer
    s.close()
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", server.port), timeout=1)


def test_require_key_401_quotes_key_like_openai():
    with FakeOpenAIServer(require_key=KEY) as server:
        good = httpx.get(f"{server.base_url}/models", headers={"Authorization": f"Bearer {KEY}"})
        wrong = httpx.get(f"{server.base_url}/models", headers={"Authorization": "Bearer sk-wrong-key-zz99"})
        none = httpx.get(f"{server.base_url}/models")
    assert good.status_code == 200
    assert wrong.status_code == 401
    assert wrong.json()["error"]["message"].startswith("Incorrect API key provided: sk-...zz99.")
    assert wrong.json()["error"]["code"] == "invalid_api_key"
    assert none.status_code == 401 and "didn't provide an API key" in none.json()["error"]["message"]


def test_keep_alive_200_sequential_requests_one_connection():
    with FakeOpenAIServer() as server, httpx.Client(base_url=server.base_url) as client:
        codes = [client.post("/chat/completions", json={"model": "m", "messages": MESSAGES}).status_code
                 for _ in range(200)]
        counters = server.counters
    assert codes == [200] * 200
    assert counters["connections"] == 1 and counters["ok"] == 200


def test_concurrency_smoke_async_openai():
    async def run(base_url):
        sem = asyncio.Semaphore(32)
        async with openai.AsyncOpenAI(api_key=KEY, base_url=base_url, max_retries=0, timeout=10) as client:
            async def one(i):
                async with sem:
                    r = await client.chat.completions.create(model="m", messages=[{"role": "user", "content": f"q{i}"}])
                    return r.choices[0].message.content

            return await asyncio.gather(*(one(i) for i in range(100)))

    with FakeOpenAIServer(latency_s=0.05) as server:
        start = time.perf_counter()
        out = asyncio.run(run(server.base_url))
        elapsed = time.perf_counter() - start
        assert server.counters["ok"] == 100
    assert out == ["ok"] * 100
    assert elapsed < 2.0, f"100 requests at 32 in flight took {elapsed:.2f}s (ideal ~0.16s)"


def test_bad_arguments_rejected():
    with pytest.raises(ValueError):
        FakeOpenAIServer(fail_modes=("503",))
    with pytest.raises(ValueError):
        FakeOpenAIServer(fail_rate=1.5)
