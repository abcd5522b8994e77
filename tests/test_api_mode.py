"""Issue 44, first point: settings.json ``mode`` = "chat" | "completions" | "auto" (``llm/api_mode.py``).

A base model without a chat template is served on ``/v1/completions``: the backend (evolution, the judges), served
evaluation and ``check-api`` send the prompt there exactly where the mode says so; "auto" falls back to it when a
chat request is refused for want of a chat template (vLLM's 400, TGI's 422, transformers serve's bare 500). The
cache keys the route; usage, retries, redaction and the reply bound work on either route. Against the loopback
FakeOpenAIServer with the real openai client; no network.
"""

from __future__ import annotations

import hashlib
import json

import pytest

from conftest import ROOT, TINY_PARAMS, tiny_overrides
from rleif_kit.core.exits import REJECTED_PREFIX
from rleif_kit.core.jsonl import read_jsonl
from rleif_kit.core.run_setup import setup
from rleif_kit.core.settings import Endpoint, SettingsError, load_settings, parse_settings
from rleif_kit.evaluation.commands import eval_config, served_endpoint
from rleif_kit.evaluation.generators import ServedModel
from rleif_kit.evolve.stage import run_evolve
from rleif_kit.llm.api_mode import ModeChooser, completion_prompt, no_chat_template
from rleif_kit.llm.base import ChatRequest
from rleif_kit.llm.cache import ResponseCache, cache_key
from rleif_kit.llm.check_api import check_endpoint, format_check_table
from rleif_kit.llm.openai_backend import OpenAIBackend
from rleif_kit.pipeline.cli import main
from rleif_kit.testing.fake_openai import FakeOpenAIServer
from rleif_kit.worlds.prompts import ALPACA_HEADER, math_prompt

KEY_ENV = "RLEIF_TEST_MODE_KEY"
FAKE_KEY = "sk-mode-test-key-0123456789abcdef"


def ep(server, mode: str, *, retries: int = 0, key_env: str | None = None) -> Endpoint:
    return Endpoint("evolve", "m", server.base_url, key_env, 5.0, retries, mode=mode)


def asks(n: int, **kw) -> list[ChatRequest]:
    return [ChatRequest(f"r{i}", ({"role": "user", "content": f"question {i}"},), **kw) for i in range(n)]


def echo(body: dict) -> str:
    """Which route asked, and what: the text a completions request sent, or the chat message."""
    return f"text[{body['prompt']}]" if "prompt" in body else f"chat[{body['messages'][-1]['content']}]"


def routes(server) -> list[str]:
    return [r.path for r in server.requests]


# ------------------------------------------------------------------ settings.json


def test_mode_defaults_to_chat_is_set_in_api_and_overridden_per_model():
    api = {"base_url": "http://127.0.0.1:9/v1", "api_key_env": None}
    plain = parse_settings({"api": api, "models": {"evolve": "m"}})
    assert plain.api.mode == "chat" and plain.endpoint("evolve").mode == "chat"
    mixed = parse_settings({"api": {**api, "mode": "completions"},
                            "models": {"evolve": "m", "irm_judge": {"name": "judge", "mode": "chat"},
                                       "math_eval": {"name": "wizardmath", "mode": "auto"}}})
    assert [mixed.endpoint(r).mode for r in ("evolve", "irm_judge", "math_eval")] == ["completions", "chat", "auto"]


@pytest.mark.parametrize("where", ["api", "model"])
def test_a_bad_mode_is_one_line_with_did_you_mean(tmp_path, where, capsys):
    api = {"base_url": "http://127.0.0.1:9/v1", "api_key_env": None}
    data = ({"api": {**api, "mode": "completion"}, "models": {"evolve": "m"}} if where == "api" else
            {"api": api, "models": {"evolve": {"name": "m", "mode": "completion"}}})
    with pytest.raises(SettingsError) as err:
        parse_settings(data)
    key = "api.mode" if where == "api" else "models.evolve.mode"
    assert err.value.problems == [f'settings.json: {key} = "completion": expected one of chat, completions, auto '
                                  "(did you mean 'completions'?)"]
    path = tmp_path / "settings.json"
    path.write_text(json.dumps(data))
    assert main(["check-api", "--settings", str(path)]) == 2
    err_text = capsys.readouterr().err
    assert err_text.count("\n") == 1 and "did you mean 'completions'?" in err_text  # one line, nothing sent


def test_a_mode_that_is_no_string_is_named_without_a_guess():
    with pytest.raises(SettingsError) as err:
        parse_settings({"api": {"base_url": "http://127.0.0.1:9/v1", "mode": True}, "models": {}})
    assert err.value.problems == ["settings.json: api.mode = true: expected one of chat, completions, auto"]


# ------------------------------------------------------------------ the routes


def test_chat_mode_sends_messages_on_the_chat_route():
    with FakeOpenAIServer(responder=echo) as server:
        (result,) = OpenAIBackend(ep(server, "chat")).complete(asks(1))
        assert routes(server) == ["/v1/chat/completions"]
    assert result.text == "chat[question 0]" and result.mode == "chat"


def test_completions_mode_sends_the_exact_prompt_with_the_same_sampling_and_counts_usage():
    prompt = ALPACA_HEADER + "### Instruction:\n  What is 2 + 3?\n\n### Response: Let's think step by step."
    request = ChatRequest("a", ({"role": "user", "content": prompt},), temperature=0.0, top_p=1.0, max_tokens=64,
                          stop=("Question:", "</s>"))
    with FakeOpenAIServer(responder=lambda body: "Step 1: 2 + 3 = 5. The answer is: 5") as server:
        backend = OpenAIBackend(ep(server, "completions"))
        (result,) = backend.complete([request])
        (sent,) = server.requests
    assert sent.path == "/v1/completions" and "messages" not in sent.body
    assert sent.body["prompt"] == prompt  # character for character: no template, nothing added
    assert (sent.body["max_tokens"], sent.body["temperature"], sent.body["top_p"], sent.body["stop"]) == (
        64, 0.0, 1.0, ["Question:", "</s>"])
    assert result.ok and result.text == "Step 1: 2 + 3 = 5. The answer is: 5" and result.mode == "completions"
    words = len(prompt.split())
    assert (backend.usage.requests, backend.usage.prompt_tokens, backend.usage.completion_tokens) == (1, words, 11)


def test_a_prompt_format_writes_the_instruction_on_the_completions_route_only():
    instruction = "Rewrite this problem: 2 + 3"
    with FakeOpenAIServer(responder=echo) as server:
        for mode in ("completions", "chat"):
            OpenAIBackend(ep(server, mode), prompt_format=lambda t: math_prompt(t, cot=False)).complete(
                [ChatRequest("a", ({"role": "user", "content": instruction},))])
        text, chat = server.requests
    assert text.body["prompt"] == ALPACA_HEADER + f"### Instruction:\n{instruction}\n\n### Response:"
    assert chat.body["messages"] == [{"role": "user", "content": instruction}]  # the server's template does it


def test_completion_prompt_joins_the_contents_in_order():
    assert completion_prompt(({"role": "user", "content": "only"},)) == "only"
    assert completion_prompt(({"role": "system", "content": "a"}, {"role": "user", "content": [
        {"type": "text", "text": "b"}]})) == "a\n\nb"


@pytest.mark.parametrize("server_kind", ["vllm", "tgi", "transformers"])
def test_auto_falls_back_to_completions_when_the_model_has_no_chat_template(server_kind):
    with FakeOpenAIServer(responder=echo, no_chat_template=server_kind) as server:
        backend = OpenAIBackend(ep(server, "auto"), concurrency=4)
        results = backend.complete(asks(5))
        paths = routes(server)
    # the first request alone: chat refused, the same request sent again as text; every later one as text only
    assert paths == ["/v1/chat/completions"] + ["/v1/completions"] * 5
    assert [r.text for r in results] == [f"text[question {i}]" for i in range(5)]
    assert all(r.mode == "completions" for r in results) and backend.modes.label() == "auto:completions"
    assert backend.usage.requests == 5 and backend.usage.failed == 0 and backend.stopped_reason is None


def test_auto_keeps_chat_where_the_model_has_a_template():
    with FakeOpenAIServer(responder=echo) as server:
        backend = OpenAIBackend(ep(server, "auto"), concurrency=4)
        results = backend.complete(asks(3))
        assert routes(server) == ["/v1/chat/completions"] * 3
    assert [r.text for r in results] == [f"chat[question {i}]" for i in range(3)] and backend.modes.used == "chat"


def test_auto_does_not_switch_on_a_server_error_with_words():
    # a 500 that says what went wrong is a failure of that request, not a missing template: no completions tried
    with FakeOpenAIServer(responder=echo, fail_rate=1.0, fail_modes=("500",)) as server:
        backend = OpenAIBackend(ep(server, "auto"))
        (result,) = backend.complete(asks(1))
        assert routes(server) == ["/v1/chat/completions"]
    assert result.error.startswith("http 500: The server had an error") and backend.modes.used is None


class TextRouteDown(FakeOpenAIServer):
    """A bare 500 on chat, and the completions route fails too."""

    async def _text(self, body):
        from rleif_kit.testing.fake_openai import _error
        return _error(503, "overloaded", "server_error", None)


def test_a_bare_500_stays_a_chat_failure_when_completions_does_not_confirm_it():
    with TextRouteDown(responder=echo, no_chat_template="transformers") as server:
        backend = OpenAIBackend(ep(server, "auto"))
        (result,) = backend.complete(asks(1))
        # the confirmation is retried once (uvicorn closes the connection after its bare 500), even with retries off
        assert routes(server) == ["/v1/chat/completions", "/v1/completions", "/v1/completions"]
    assert result.error == "http 500: Internal Server Error" and backend.modes.used is None


def test_chat_mode_on_a_model_without_a_template_stops_the_run_with_what_to_set():
    with FakeOpenAIServer(responder=echo, no_chat_template="vllm") as server:
        backend = OpenAIBackend(ep(server, "chat"), concurrency=4)
        results = backend.complete(asks(6))
        assert routes(server) == ["/v1/chat/completions"]  # one request learnt it; the other 5 never went out
    assert backend.stopped_reason.startswith(f"{REJECTED_PREFIX}: http 400: As of transformers v4.44")
    assert backend.stopped_reason.endswith('the model has no chat template: set "mode": "completions" (or "auto") in '
                                           "settings.json (api.mode or models.evolve.mode) to send the prompt as it "
                                           "is on /v1/completions")
    assert not any(r.ok for r in results)


def test_no_chat_template_reads_the_servers_refusals():
    class Refusal(Exception):
        def __init__(self, status, body):
            self.status_code, self.body = status, body

    assert no_chat_template(Refusal(400, {"error": {"message": "chat_template is not set"}})) == "named"
    assert no_chat_template(Refusal(422, {"error": "Template error: template not found"})) == "named"
    assert no_chat_template(Refusal(500, "Internal Server Error")) == "bare"
    assert no_chat_template(Refusal(500, {"error": {"message": "CUDA out of memory"}})) is None
    assert no_chat_template(Refusal(401, {"error": {"message": "no chat template"}})) is None  # a key, not a template
    assert no_chat_template(Refusal(400, {"error": {"message": "context length exceeded"}})) is None


# ------------------------------------------------------------------ the cache


def test_the_cache_key_names_the_route_and_the_chat_key_is_the_old_one():
    request = asks(1)[0]
    old = hashlib.sha256(json.dumps(["m", list(request.messages), 0.0, 1.0, 512, 0, []], sort_keys=True,
                                    ensure_ascii=False).encode("utf-8")).hexdigest()
    assert cache_key(request, "m") == cache_key(request, "m", "chat") == old  # a rerun after the update pays nothing
    assert cache_key(request, "m", "completions") != old


def test_a_cached_chat_reply_is_not_served_to_a_completions_request(tmp_path):
    cache = ResponseCache(tmp_path / "cache.sqlite")
    with FakeOpenAIServer(responder=echo) as server:
        chat = OpenAIBackend(ep(server, "chat"), cache=cache).complete(asks(2))
        text = OpenAIBackend(ep(server, "completions"), cache=cache).complete(asks(2))
        again = OpenAIBackend(ep(server, "completions"), cache=cache).complete(asks(2))
        again_chat = OpenAIBackend(ep(server, "chat"), cache=cache).complete(asks(2))
        assert routes(server) == ["/v1/chat/completions"] * 2 + ["/v1/completions"] * 2  # the reruns sent nothing
    assert [r.text for r in text] == ["text[question 0]", "text[question 1]"] and not any(r.cached for r in text)
    assert [r.text for r in again] == [r.text for r in text] and all(r.cached for r in again)
    assert [r.text for r in again_chat] == [r.text for r in chat] and all(r.cached for r in again_chat)
    assert len(cache) == 4


def test_auto_reruns_from_the_cache_of_the_route_it_found(tmp_path):
    cache = ResponseCache(tmp_path / "cache.sqlite")
    with FakeOpenAIServer(responder=echo, no_chat_template="vllm") as server:
        first = OpenAIBackend(ep(server, "auto"), cache=cache).complete(asks(3))
        sent = len(server.requests)
        rerun = OpenAIBackend(ep(server, "auto"), cache=cache).complete(asks(3))
        assert len(server.requests) == sent  # nothing sent again: the completions replies are found undecided
    assert [r.text for r in rerun] == [r.text for r in first] and all(r.cached for r in rerun)


# ------------------------------------------------------------------ retries, redaction, the reply bound


def test_completions_requests_are_retried_like_chat_ones():
    with FakeOpenAIServer(responder=echo, fail_rate=0.5, fail_modes=("429", "500"), retry_after_s=0.01,
                          seed=1) as server:
        results = OpenAIBackend(ep(server, "completions", retries=8)).complete(asks(6))
        counts = server.counters
    assert all(r.ok for r in results) and counts["429"] + counts["500"] > 0  # the client retried them
    assert {r.path for r in server.requests} == {"/v1/completions"}


def test_a_completions_reply_and_error_are_redacted(monkeypatch):
    monkeypatch.setenv(KEY_ENV, FAKE_KEY)
    with FakeOpenAIServer(responder=lambda body: f"your key is {FAKE_KEY}", require_key=FAKE_KEY) as server:
        (quoted,) = OpenAIBackend(ep(server, "completions", key_env=KEY_ENV)).complete(asks(1))
    assert quoted.ok and FAKE_KEY not in quoted.text and "[REDACTED]" in quoted.text
    monkeypatch.setenv(KEY_ENV, "sk-wrong-key-0000000000000000wxyz")
    with FakeOpenAIServer(responder=echo, require_key=FAKE_KEY) as server:
        backend = OpenAIBackend(ep(server, "completions", key_env=KEY_ENV))
        (refused,) = backend.complete(asks(1))
    assert refused.error.startswith("http 401") and "wxyz" not in refused.error
    assert backend.stopped_reason.startswith(f"{REJECTED_PREFIX}: http 401")  # the failure table's `rejected`


def test_a_huge_completions_reply_is_refused_at_max_reply_bytes():
    mib = 1 << 20
    with FakeOpenAIServer(hostile="huge", huge_bytes=64 * mib) as server:
        endpoint = Endpoint("evolve", "m", server.base_url, None, 10.0, 0, mib, mode="completions")
        (result,) = OpenAIBackend(endpoint).complete(asks(1))
        assert routes(server) == ["/v1/completions"]
    assert result.error.startswith("reply too large: ") and "api.max_reply_bytes" in result.error


# ------------------------------------------------------------------ check-api, evaluation, evolution


@pytest.mark.parametrize("mode, refusal, label", [("chat", None, "chat"), ("completions", None, "completions"),
                                                  ("auto", None, "auto:chat"), ("auto", "vllm", "auto:completions")])
def test_check_api_reports_the_route_it_used(mode, refusal, label):
    with FakeOpenAIServer(responder=echo, no_chat_template=refusal) as server:
        row = check_endpoint(ep(server, mode))
        last = server.requests[-1].path
    assert row.ok and row.mode == label
    assert last == ("/v1/chat/completions" if label.endswith("chat") else "/v1/completions")
    assert format_check_table([row]).splitlines()[1].split()[3] == label


def test_doctor_shows_the_route_of_each_endpoint(tmp_path):
    from rleif_kit.pipeline.doctor import check_endpoints

    cfg, _ = setup(str(TINY_PARAMS), tiny_overrides(tmp_path / "run", 'evol_instruct.backend="openai"'),
                   stage="01_evolve", report_dir=str(tmp_path / "reports"), workdir=str(ROOT))
    settings = tmp_path / "settings.json"
    with FakeOpenAIServer(responder=echo, no_chat_template="vllm") as server:
        settings.write_text(json.dumps({"api": {"base_url": server.base_url, "api_key_env": None, "mode": "auto"},
                                        "models": {"evolve": "m"}}))
        (verdict,) = [v for v in check_endpoints(cfg, str(settings)) if v.check == "endpoint_evolve"]
    assert verdict.status == "ok" and verdict.numbers["mode"] == "auto:completions"


def test_check_api_on_a_templateless_model_in_chat_mode_says_what_to_set():
    with FakeOpenAIServer(no_chat_template="tgi") as server:
        row = check_endpoint(ep(server, "chat"))
    assert not row.ok and row.detail.startswith("http 422: Template error: template not found; the model has no "
                                                'chat template: set "mode": "completions"')


def test_served_evaluation_sends_the_benchmark_prompt_as_it_is():
    from rleif_kit.evaluation.stage import prompt_for, stop_for

    ev = eval_config(max_new_tokens=32)
    item = {"id": "q1", "question": "Tom has 3 apples and buys 5 more. How many apples?", "gold": "8"}
    prompt = prompt_for("gsm8k", item, ev)
    with FakeOpenAIServer(responder=lambda body: " He has 3 + 5 = 8. The answer is: 8") as server:
        settings = parse_settings({"api": {"base_url": server.base_url, "api_key_env": None, "mode": "completions"}})
        model = ServedModel(served_endpoint(settings, "gsm8k", "wizardmath"))  # no math_eval role: api's server
        (text,) = model.complete([prompt], ev, stop_for("gsm8k", ev))
        (sent,) = server.requests
    assert sent.path == "/v1/completions" and sent.body["prompt"] == prompt and sent.body["model"] == "wizardmath"
    assert prompt.startswith(ALPACA_HEADER) and prompt.endswith("### Response: Let's think step by step.")
    assert text == " He has 3 + 5 = 8. The answer is: 8"
    assert model.fingerprint["mode"] == "completions"  # results over another route are never resumed as these


def evolution_on_text(body: dict) -> str:
    """The evolver, reading the Alpaca prompt a completions request carries."""
    instruction = body["prompt"].split("### Instruction:\n", 1)[1].rsplit("\n\n### Response:", 1)[0]
    original = instruction.split("Original problem:\n", 1)[1].strip()
    return f"{original} Then {len(original) % 9 + 2} more are added."


def test_evolution_sends_its_instructions_in_the_alpaca_prompt_on_the_completions_route(tmp_path):
    cfg, paths = setup(str(TINY_PARAMS), tiny_overrides(
        tmp_path / "run", 'evol_instruct.backend="openai"', 'evol_instruct.seeds="arith:3"', "evol_instruct.rounds=1",
        "evol_instruct.cache=false", "evol_instruct.equality_judge=false", "evol_instruct.with_answers=false"),
        stage="01_evolve", report_dir=str(tmp_path / "reports"), workdir=str(ROOT))
    settings = tmp_path / "settings.json"
    with FakeOpenAIServer(responder=evolution_on_text) as server:
        settings.write_text(json.dumps({"api": {"base_url": server.base_url, "api_key_env": None,
                                                "mode": "completions"}, "models": {"evolve": "base-model"}}))
        result = run_evolve(cfg, paths, load_settings(settings), progress=False)
        sent = server.requests
    assert {r.path for r in sent} == {"/v1/completions"} and len(sent) == 3
    assert all(r.body["prompt"].startswith(ALPACA_HEADER + "### Instruction:\n") and
               r.body["prompt"].endswith("\n\n### Response:") for r in sent)
    decided = [r for name in ("evolved.jsonl", "eliminated.jsonl")
               for r in read_jsonl(paths.stage("01_evolve") / name)]
    assert result.failed == 0 and len(decided) == 3


def test_mode_chooser_labels():
    assert [ModeChooser(m).label() for m in ("chat", "completions", "auto")] == ["chat", "completions", "auto"]
