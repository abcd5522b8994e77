"""Issue 30, items 1, 2 and 6: a failed request says what the server said; a request naming a model the server does
not serve stops the run as rejected, with the server's model list; a served evaluation stops at the first rejection.

Against the loopback FakeOpenAIServer with the real openai client (scripted error bodies); no network.
"""

from __future__ import annotations

import json

import httpx
import openai
import pytest

from conftest import TINY_PARAMS, tiny_overrides
from rleif_kit.checks.stage_failures import cause_of
from rleif_kit.checks.verdicts import failure_cause
from rleif_kit.core.exits import REJECTED_PREFIX
from rleif_kit.core.settings import Endpoint
from rleif_kit.llm.base import ChatRequest
from rleif_kit.llm.openai_backend import OpenAIBackend
from rleif_kit.llm.errors import failure_reason, names_unknown_model
from rleif_kit.testing.fake_openai import FakeOpenAIServer
from loopback import ScriptedErrorServer

KEY_ENV = "RLEIF_TEST_CLIENT_KEY"
PINNED = {"detail": "Server is pinned to 'pinned-7b'; requested 'gpt-4o'."}


def backend_for(server, model="gpt-4o", **kw) -> OpenAIBackend:
    return OpenAIBackend(Endpoint("evolve", model, server.base_url, None, 5.0, 0), concurrency=4, **kw)


def asks(n: int) -> list[ChatRequest]:
    return [ChatRequest(f"r{i}", ({"role": "user", "content": f"question {i}"},)) for i in range(n)]


def chats(server) -> int:
    return sum(r.path.endswith("/chat/completions") for r in server.requests)


# ------------------------------------------------------------------ 1. the server's own words


@pytest.mark.parametrize("status,payload,said", [
    (400, {"detail": "Stop sequences are limited to 4; got 6."}, "Stop sequences are limited to 4; got 6."),
    (400, {"error": {"message": "max_tokens is too large", "code": None}}, "max_tokens is too large"),
    (422, {"message": "temperature must be <= 2"}, "temperature must be <= 2"),
    (422, {"detail": [{"loc": ["body", "top_p"], "msg": "Input should be <= 1"}]}, "Input should be <= 1"),
    (500, {"unexpected": "shape"}, '{"unexpected": "shape"}'),
    (502, b"<html><head><title>502 Bad Gateway</title></head><body><h1>502 Bad Gateway</h1>nginx</body></html>",
     "502 Bad Gateway 502 Bad Gateway nginx"),
    (503, b"upstream connect error or disconnect/reset before headers", "upstream connect error or disconnect/"
                                                                       "reset before headers"),
])
def test_every_failed_result_carries_the_servers_own_words_after_its_cause(status, payload, said):
    with ScriptedErrorServer(status, payload) as server:
        results = backend_for(server, model="gpt-5").complete(asks(2))
    assert [r.error for r in results] == [f"http {status}: {said}"] * 2  # 2 sent: none of these is a rejection
    # the cause prefix stays first: both failure checks still classify it
    assert failure_cause(results[0].error) == ("client_error" if status < 500 else "server_error")
    assert cause_of(results[0].error) == ("http 4xx" if status < 500 else "http 5xx")


def test_a_long_server_message_is_cut_after_it_is_redacted():
    response = httpx.Response(400, request=httpx.Request("POST", "http://127.0.0.1:9/v1/chat/completions"))
    exc = openai.APIStatusError("Error code: 400", response=response, body={"detail": "x" * 1000})
    reason = failure_reason(exc, [])
    assert reason.startswith("http 400: xxx") and len(reason) == 300 and reason.endswith("...")


# ------------------------------------------------------------------ 2. an unknown model is a rejection


def _status_error(status: int, body) -> openai.APIStatusError:
    response = httpx.Response(status, request=httpx.Request("POST", "http://127.0.0.1:9/v1/chat/completions"))
    return openai.APIStatusError(f"Error code: {status}", response=response, body=body)


@pytest.mark.parametrize("status,body", [
    (400, PINNED),  # a server pinned to one model (the issue's)
    (404, {"object": "error", "message": "The model `gpt-4o` does not exist.", "type": "NotFoundError"}),  # vLLM
    (404, {"error": "model 'gpt-4o' not found, try pulling it first"}),  # Ollama
    (404, {"error": {"message": "The model `gpt-4o` does not exist or you do not have access to it.",
                     "type": "invalid_request_error", "code": "model_not_found"}}),  # OpenAI
    (400, {"error": {"message": "Invalid model name passed in model=gpt-4o", "code": "400"}}),  # LiteLLM
    (400, {"error": {"message": "bad request", "code": "model_not_found"}}),  # the code alone says it
    (422, {"detail": "Unknown model: gpt-4o"}),
])
def test_a_400_404_or_422_naming_an_unknown_model_is_recognised(status, body):
    assert names_unknown_model(_status_error(status, body), "gpt-4o")


@pytest.mark.parametrize("status,body", [
    (400, {"error": {"message": "This model's maximum context length is 4096 tokens. However, you requested 5000 "
                                "tokens. Please reduce the length of the messages.",
                     "code": "context_length_exceeded"}}),
    (400, {"error": {"message": "'logprobs' is not supported with this model.", "code": None}}),
    (400, {"detail": "max_tokens must be at least 1, got 0."}),
    (500, {"detail": "The model `gpt-4o` does not exist."}),  # a server error is the server's, whatever it says
    (401, {"error": {"message": "Incorrect API key provided", "code": "invalid_api_key"}}),
])
def test_other_client_errors_do_not_read_as_an_unknown_model(status, body):
    assert not names_unknown_model(_status_error(status, body), "gpt-4o")


def test_an_unknown_model_stops_the_run_with_the_servers_model_list():
    with ScriptedErrorServer(400, PINNED) as server:
        backend = backend_for(server)
        results = backend.complete(asks(8))
        assert chats(server) == 1  # the first request goes alone: its rejection stopped the run
        assert sum(r.path == "/v1/models" for r in server.requests) == 1  # the list, fetched once
    assert results[0].error == "http 400: Server is pinned to 'pinned-7b'; requested 'gpt-4o'."
    assert backend.stopped_reason == (
        f"{REJECTED_PREFIX}: http 400: Server is pinned to 'pinned-7b'; requested 'gpt-4o'; check `model` in "
        "settings.json (models.evolve.name = 'gpt-4o') against the server's model list: pinned-7b, other-13b")
    assert all(r.error.startswith(("http 400", REJECTED_PREFIX)) for r in results)


def test_a_failing_model_list_never_fails_the_rejection():
    with ScriptedErrorServer(404, {"error": {"message": "The model `gpt-4o` does not exist", "code": "model_not_found"}},
                  models=None) as server:
        backend = backend_for(server)
        backend.complete(asks(3))
    assert backend.stopped_reason.startswith(f"{REJECTED_PREFIX}: http 404: The model `gpt-4o` does not exist")
    assert backend.stopped_reason.endswith("against the server's model list (GET /models gave none)")


def test_a_client_error_that_is_not_about_the_model_does_not_stop_the_run():
    body = {"error": {"message": "This model's maximum context length is 4096 tokens.", "code": "context_length"}}
    with ScriptedErrorServer(400, body) as server:
        backend = backend_for(server)
        results = backend.complete(asks(6))
        assert chats(server) == 6 and not any(r.path == "/v1/models" for r in server.requests)
    assert backend.stopped_reason is None
    assert {r.error for r in results} == {"http 400: This model's maximum context length is 4096 tokens."}


def test_rleif_evolve_exits_3_on_an_unknown_model_with_the_advice(tmp_path, monkeypatch, capsys):
    from rleif_kit.pipeline.cli import main

    monkeypatch.setenv(KEY_ENV, "sk-client-test-key-0123456789")
    with ScriptedErrorServer(400, PINNED) as server:
        settings = tmp_path / "settings.json"
        settings.write_text(json.dumps({"api": {"base_url": server.base_url, "api_key_env": KEY_ENV, "max_retries": 0},
                                        "models": {"evolve": "gpt-4o"}}))
        extra = ('evol_instruct.backend="openai"', 'evol_instruct.seeds="arith:12"', "evol_instruct.rounds=1",
                 "evol_instruct.cache=false")
        code = main(["evolve", str(TINY_PARAMS), "--settings", str(settings),
                     *[a for o in tiny_overrides(tmp_path / "run", *extra) for a in ("--set", o)]])
        assert chats(server) == 1
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip() and "it/s" not in line]
    assert code == 3 and len(err) == 1, err
    assert err[0].startswith(f"rleif evolve: error: {REJECTED_PREFIX}: http 400: Server is pinned to 'pinned-7b'")
    assert "against the server's model list: pinned-7b, other-13b" in err[0]


# ------------------------------------------------------------------ 6. served evaluation and a rejection


def test_served_evaluation_against_a_401_exits_3_with_one_line_after_one_request(tmp_path, monkeypatch, capsys):
    from rleif_kit.pipeline.cli import main

    monkeypatch.setenv(KEY_ENV, "sk-wrong-wrong-wrong-98765")
    monkeypatch.chdir(tmp_path)  # rleif eval's lock and default output stay in the test's folder
    data = tmp_path / "gsm8k_test.jsonl"
    data.write_text("".join(json.dumps({"question": f"What is {i} + 1?", "answer": f"Add.\n#### {i + 1}"}) + "\n"
                            for i in range(40)))
    with FakeOpenAIServer(require_key="sk-the-right-key-000000") as server:
        settings = tmp_path / "settings.json"
        settings.write_text(json.dumps({"api": {"base_url": server.base_url, "api_key_env": KEY_ENV, "max_retries": 0},
                                        "models": {"math_eval": "served-math"}}))
        code = main(["eval", "gsm8k", "--served", "--settings", str(settings), "--data", str(data),
                     "--out", str(tmp_path / "out")])
        counters = server.counters
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip() and "it/s" not in line]
    assert code == 3 and counters["401"] == 1 and counters["requests"] == 1  # not exit 4 after 16 requests
    assert len(err) == 1 and err[0].startswith(f"rleif eval: error: {REJECTED_PREFIX}: http 401"), err
    assert "98765" not in err[0]


def test_jobs_awaiting_one_request_each_send_one_to_a_rejecting_endpoint(monkeypatch):
    """acomplete (the evolver's path): 10 jobs at once against a wrong key make 1 request, not ``concurrency``."""
    import asyncio

    async def jobs(backend):
        try:
            return await asyncio.gather(*(backend.acomplete(r) for r in asks(10)))
        finally:
            await backend.aclose()

    monkeypatch.setenv(KEY_ENV, "sk-wrong-wrong-wrong-4321")
    with FakeOpenAIServer(require_key="sk-the-right-key-000000") as server:
        backend = OpenAIBackend(Endpoint("evolve", "m", server.base_url, KEY_ENV, 5.0, 0), concurrency=4)
        results = asyncio.run(jobs(backend))
        assert server.counters["requests"] == 1  # the others waited for its answer, then were refused unsent
    assert backend.stopped_reason.startswith(f"{REJECTED_PREFIX}: http 401")
    assert all(r.error.startswith(("http 401", REJECTED_PREFIX)) for r in results)
