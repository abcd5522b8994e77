"""check_api against the loopback fake server: auth header, failures as rows in the server's own words, an unknown
model with the server's model list, redaction."""

from __future__ import annotations

import pytest

from rleif_kit.llm.check_api import CheckRow, check_api, check_endpoint, format_check_table
from rleif_kit.testing.fake_openai import FakeOpenAIServer
from rleif_kit.core.settings import SettingsError, parse_settings
from loopback import ScriptedErrorServer

FAKE_KEY = "sk-test-7d41c0a9e2b86f35Wq8Z"
ENV = "RLEIF_CHECK_TEST_KEY"


def settings_for(server: FakeOpenAIServer, models=None, api_key_env=ENV):
    return parse_settings({
        "api": {"base_url": server.base_url, "api_key_env": api_key_env, "timeout": 5, "max_retries": 3},
        "models": models or {"evolve": "evolver-model", "irm_judge": "judge-model"},
    })


def test_rows_ok_and_exact_bearer_header(monkeypatch):
    monkeypatch.setenv(ENV, FAKE_KEY)
    with FakeOpenAIServer(responder=lambda body: f"ok from {body['model']}") as server:
        rows = check_api(settings_for(server))
        received = server.requests
    assert [(r.role, r.model, r.ok) for r in rows] == [("evolve", "evolver-model", True), ("irm_judge", "judge-model", True)]
    assert rows[0].detail == "ok from evolver-model"
    assert all(r.latency_s is not None and r.latency_s >= 0 for r in rows)
    # positive control: the key really was sent, exactly once per role, as a bearer token
    assert len(received) == 2
    assert [req.headers["authorization"] for req in received] == [f"Bearer {FAKE_KEY}"] * 2
    body = received[0].body
    assert body["temperature"] == 0 and body["max_tokens"] <= 16 and body["model"] == "evolver-model"
    table = format_check_table(rows)
    assert FAKE_KEY not in table and FAKE_KEY[-4:] not in table
    assert "evolver-model" in table and "ok from evolver-model" in table


def test_401_detail_is_redacted(monkeypatch):
    monkeypatch.setenv(ENV, FAKE_KEY)
    with FakeOpenAIServer(require_key="sk-the-right-key-0000") as server:
        (row,) = check_api(settings_for(server), roles=["evolve"])
        assert server.counters["401"] == 1 and server.counters["requests"] == 1  # no retry on 401
    assert not row.ok and row.latency_s is not None
    assert row.detail.startswith("http 401: Incorrect API key provided: sk-...[REDACTED]")  # the server's words
    assert FAKE_KEY[-4:] not in row.detail and FAKE_KEY not in format_check_table([row])


def test_missing_env_var_gives_failed_row(monkeypatch):
    monkeypatch.delenv(ENV, raising=False)
    with FakeOpenAIServer() as server:
        rows = check_api(settings_for(server))
        assert server.requests == []
    assert [r.ok for r in rows] == [False, False]
    assert rows[0].latency_s is None
    assert rows[0].detail == (
        f"environment variable {ENV} is not set (settings.json: api.api_key_env); export it in the shell that runs rleif"
    )
    assert "-" in format_check_table(rows).splitlines()[1]


def test_keyless_endpoint_sends_placeholder():
    with FakeOpenAIServer() as server:
        (row,) = check_api(settings_for(server, models={"math_eval": "m"}, api_key_env=None))
        assert server.requests[0].headers["authorization"] == "Bearer not-needed"
    assert row.ok


def test_server_error_is_one_attempt_and_a_failed_row(monkeypatch):
    monkeypatch.setenv(ENV, FAKE_KEY)
    with FakeOpenAIServer(fail_rate=1.0, fail_modes=("500",)) as server:
        (row,) = check_api(settings_for(server), roles=["irm_judge"])
        assert server.counters["requests"] == 1  # ONE round trip: retries are off for the check
    assert not row.ok and row.detail.startswith("http 500: ")


def test_unknown_role_raises(monkeypatch):
    monkeypatch.setenv(ENV, FAKE_KEY)
    with FakeOpenAIServer() as server:
        with pytest.raises(SettingsError, match="did you mean 'evolve'"):
            check_api(settings_for(server), roles=["evolv"])


def test_format_check_table_layout():
    rows = [
        CheckRow("evolve", "gpt-4-level-chat", "https://x.test", True, 0.1234, "ok"),
        CheckRow("code_eval", "coder", "https://x.test", False, None, "E" * 100),
        CheckRow("irm_judge", "judge", "https://x.test", True, 0.2, "R" * 100),
    ]
    lines = format_check_table(rows).splitlines()
    assert lines[0].split() == ["role", "model", "status", "mode", "latency_ms", "detail"]
    assert lines[1].split() == ["evolve", "gpt-4-level-chat", "ok", "chat", "123", "ok"]
    assert lines[2].split()[:5] == ["code_eval", "coder", "error", "chat", "-"]
    assert lines[2].endswith(" " + "E" * 100)  # an error whole: its fix is at its end
    assert lines[3].endswith(" " + "R" * 57 + "...")  # a reply cut
    assert len({line.index(line.split()[2]) for line in lines}) == 1  # status column aligned


def test_check_endpoint_redacts_its_own_key_without_settings(monkeypatch):
    monkeypatch.setenv(ENV, FAKE_KEY)
    with FakeOpenAIServer(require_key="sk-the-right-key-0000") as server:
        row = check_endpoint(settings_for(server).endpoint("evolve"))
    assert not row.ok and "sk-...[REDACTED]" in row.detail and FAKE_KEY[-4:] not in row.detail


def test_an_unknown_model_row_shows_the_servers_words_and_its_model_list(monkeypatch):
    """Issue 30: the server said "Server is pinned to ..."; check-api showed `BadRequestError: Error code: 400`."""
    monkeypatch.setenv(ENV, FAKE_KEY)
    pinned = {"detail": "Server is pinned to 'pinned-7b'; requested 'gpt-4o'."}
    with ScriptedErrorServer(400, pinned) as server:
        (row,) = check_api(settings_for(server, models={"evolve": "gpt-4o"}), roles=["evolve"])
        paths = [r.path for r in server.requests]
    assert paths == ["/v1/chat/completions", "/v1/models"]  # one try, then the list for the advice
    assert not row.ok and row.detail == (
        "http 400: Server is pinned to 'pinned-7b'; requested 'gpt-4o'; check `model` in settings.json "
        "(models.evolve.name = 'gpt-4o') against the server's model list: pinned-7b, other-13b")
    assert row.detail in format_check_table([row])  # an error is shown whole


def test_a_400_about_something_else_is_the_servers_words_alone(monkeypatch):
    monkeypatch.setenv(ENV, FAKE_KEY)
    with ScriptedErrorServer(400, {"error": {"message": "max_tokens is too large", "code": None}}, models=None) as server:
        (row,) = check_api(settings_for(server), roles=["evolve"])
        assert [r.path for r in server.requests] == ["/v1/chat/completions"]  # no model list asked for
    assert row.detail == "http 400: max_tokens is too large"


def test_an_unknown_model_without_a_model_list_says_so(monkeypatch):
    monkeypatch.setenv(ENV, FAKE_KEY)
    body = {"object": "error", "message": "The model `gpt-4o` does not exist.", "type": "NotFoundError"}  # vLLM
    with ScriptedErrorServer(404, body, models=None) as server:
        (row,) = check_api(settings_for(server, models={"evolve": "gpt-4o"}), roles=["evolve"])
    assert row.detail.startswith("http 404: The model `gpt-4o` does not exist; check `model` in settings.json")
    assert row.detail.endswith("(GET /models gave none)")
