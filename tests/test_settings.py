"""settings.json loading, validation messages, key handling and redaction."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from rleif_kit.core.api_keys import KEYLESS_PLACEHOLDER, known_secrets, make_async_client, make_client, read_api_key, redact
from rleif_kit.core.settings import ROLES, Endpoint, SettingsError, load_settings, parse_settings

EXAMPLE = Path(__file__).resolve().parents[1] / "params" / "settings.example.json"
FAKE_KEY = "sk-test-4f9c2b7e1d3a8c6b5e0fQz9X"


def write(tmp_path: Path, data) -> Path:
    path = tmp_path / "settings.json"
    path.write_text(data if isinstance(data, str) else json.dumps(data, indent=2))
    return path


def base(**overrides) -> dict:
    data = {
        "api": {"base_url": "https://api.example.test/v1", "api_key_env": "RLEIF_TEST_KEY", "timeout": 30, "max_retries": 2},
        "models": {"evolve": "chat-model"},
    }
    data.update(overrides)
    return data


# ------------------------------------------------------------------ happy paths


def test_example_file_loads():
    s = load_settings(EXAMPLE)
    assert set(s.models) == set(ROLES)
    ev = s.endpoint("evolve")
    assert (ev.name, ev.base_url, ev.api_key_env, ev.timeout, ev.max_retries) == (
        "gpt-4-level-chat", "https://taotoken.net/api", "TAOTOKEN_API_KEY", 120.0, 3)
    assert s.endpoint("math_eval").name == "wizardmath-level"
    assert s.eval.gsm8k_path == "./data/gsm8k_test.jsonl" and s.eval.cot is True and s.eval.temperature == 0.0
    assert s.eval.math_path is None
    price = s.price("gpt-4-level-chat")
    assert price is not None and price.cost(1_000_000, 1_000_000) == pytest.approx(12.5)
    assert s.path == EXAMPLE


def test_string_and_object_entries_inherit_from_api(tmp_path):
    data = base(models={
        "evolve": "chat-model",
        "code_eval": {"name": "coder", "base_url": "http://127.0.0.1:8000/v1/", "api_key_env": None, "timeout": 600},
        "math_eval": {"name": "mather", "max_retries": 0, "api_key_env": "OTHER_KEY"},
    })
    s = load_settings(write(tmp_path, data))
    ev, code, math_ = s.endpoint("evolve"), s.endpoint("code_eval"), s.endpoint("math_eval")
    assert ev == Endpoint("evolve", "chat-model", "https://api.example.test/v1", "RLEIF_TEST_KEY", 30.0, 2)
    # overrides win, the rest is inherited; trailing slash is dropped; explicit null = keyless
    assert code == Endpoint("code_eval", "coder", "http://127.0.0.1:8000/v1", None, 600.0, 2)
    assert read_api_key(code) == KEYLESS_PLACEHOLDER
    assert math_ == Endpoint("math_eval", "mather", "https://api.example.test/v1", "OTHER_KEY", 30.0, 0)


def test_minimal_file_uses_defaults():
    s = parse_settings({"models": {"evolve": {"name": "m", "base_url": "http://localhost:1/v1"}}})
    ep = s.endpoint("evolve")
    assert ep.api_key_env is None and ep.timeout == 120.0 and ep.max_retries == 3
    assert s.eval.max_new_tokens == 512 and s.prices == {}


def test_endpoint_lookup_errors_name_roles():
    s = parse_settings(base())
    with pytest.raises(SettingsError, match=r"no model configured for role 'prm_judge'.*configured roles: evolve"):
        s.endpoint("prm_judge")
    with pytest.raises(SettingsError, match=r"unknown role 'evolv' \(did you mean 'evolve'\?\)"):
        s.endpoint("evolv")


# ------------------------------------------------------------------ bad files


BAD_FILES = [
    ("api-timeout-zero", base(api={"base_url": "https://x.test", "timeout": 0}), "api.timeout = 0: expected a number > 0"),
    ("model-timeout-string", base(models={"evolve": {"name": "m", "timeout": "fast"}}), 'models.evolve.timeout = "fast"'),
    ("retries-negative", base(api={"base_url": "https://x.test", "max_retries": -1}), "api.max_retries = -1: expected an integer >= 0"),
    ("retries-float", base(models={"code_eval": {"name": "m", "max_retries": 1.5}}), "models.code_eval.max_retries = 1.5"),
    ("retries-bool", base(api={"base_url": "https://x.test", "max_retries": True}), "api.max_retries = true"),
    ("url-no-scheme", base(api={"base_url": "taotoken.net/api"}), 'api.base_url = "taotoken.net/api": expected a URL starting with http://'),
    ("model-url", base(models={"evolve": {"name": "m", "base_url": "ftp://x"}}), "models.evolve.base_url"),
    ("unknown-role", base(models={"evolv": "m"}), "models.evolv: unknown role (did you mean 'evolve'?)"),
    ("unknown-top-key", {**base(), "modles": {}}, "modles: unknown key (did you mean 'models'?)"),
    ("unknown-model-key", base(models={"evolve": {"name": "m", "timout": 5}}), "models.evolve.timout: unknown key (did you mean 'timeout'?)"),
    ("model-wrong-type", base(models={"math_eval": 42}), "models.math_eval = 42: expected a model name string or an object"),
    ("model-missing-name", base(models={"prm_judge": {"timeout": 5}}), "models.prm_judge.name: missing"),
    ("model-empty-name", base(models={"evolve": ""}), 'models.evolve.name = ""'),
    ("no-base-url", {"models": {"evolve": "m"}}, "models.evolve.base_url: missing; set api.base_url or models.evolve.base_url"),
    ("eval-cot", base(eval={"cot": "yes"}), 'eval.cot = "yes": expected true or false'),
    ("eval-temperature-bool", base(eval={"temperature": True}), "eval.temperature = true"),
    ("eval-max-new-tokens", base(eval={"max_new_tokens": 0}), "eval.max_new_tokens = 0: expected an integer >= 1"),
    ("eval-unknown", base(eval={"gsm8k": "x.jsonl"}), "eval.gsm8k: unknown key (did you mean 'gsm8k_path'?)"),
    ("price-missing", base(prices={"m": {"input_per_million": 1.0}}), "prices.m.output_per_million: missing"),
    ("price-negative", base(prices={"m": {"input_per_million": -1, "output_per_million": 1}}), "prices.m.input_per_million = -1"),
    ("models-not-object", base(models=["evolve"]), 'models = ["evolve"]: expected an object'),
    ("top-not-object", [1, 2], "<top level> = [1, 2]: expected a JSON object"),
]


@pytest.mark.parametrize("data,expected", [(d, e) for _, d, e in BAD_FILES], ids=[i for i, _, _ in BAD_FILES])
def test_bad_file_message_names_file_and_key_path(tmp_path, data, expected):
    path = write(tmp_path, data)
    with pytest.raises(SettingsError) as info:
        load_settings(path)
    assert len(info.value.problems) == 1, info.value.problems
    assert isinstance(info.value, ValueError)
    assert str(info.value).startswith(f"{path}: {expected}")


def test_invalid_json_reports_line_and_column(tmp_path):
    path = write(tmp_path, '{\n  "api": {"timeout": 5,}\n}\n')
    with pytest.raises(SettingsError) as info:
        load_settings(path)
    msg = str(info.value)
    assert msg.startswith(f"{path}:2:") and "invalid JSON" in msg and "line 2, column" in msg


def test_missing_file_says_how_to_create_it(tmp_path):
    with pytest.raises(SettingsError, match="file not found; copy params/settings.example.json"):
        load_settings(tmp_path / "settings.json")


def test_duplicate_key_is_reported(tmp_path):
    path = write(tmp_path, '{"api": {"base_url": "https://x.test", "timeout": 5, "timeout": 6}, "models": {}}')
    with pytest.raises(SettingsError, match="duplicate key 'timeout'"):
        load_settings(path)


def test_all_errors_reported_at_once(tmp_path):
    data = {
        "api": {"base_url": "nope", "timeout": -1},
        "models": {"evolve": {"name": "m", "max_retries": "3"}, "judge": "x"},
        "eval": {"cot": 1},
    }
    path = write(tmp_path, data)
    with pytest.raises(SettingsError) as info:
        load_settings(path)
    lines = str(info.value).splitlines()
    assert lines == info.value.problems and len(lines) == 5
    assert all(line.startswith(f"{path}: ") for line in lines)
    for keypath in ("api.base_url", "api.timeout", "models.evolve.max_retries", "models.judge", "eval.cot"):
        assert sum(keypath in line for line in lines) == 1, keypath


def test_key_pasted_into_file_is_never_echoed(tmp_path):
    data = base(api={"base_url": "https://x.test", "api_key_env": FAKE_KEY, "api_key": FAKE_KEY})
    with pytest.raises(SettingsError) as info:
        load_settings(write(tmp_path, data))
    msg = str(info.value)
    assert FAKE_KEY not in msg and FAKE_KEY[-4:] not in msg
    assert "api.api_key_env: expected the NAME of an environment variable" in msg
    assert "api.api_key: unknown key (did you mean 'api_key_env'?)" in msg and "Never put API keys" in msg


# ------------------------------------------------------------------ keys


def test_missing_env_var_message_names_variable(monkeypatch, tmp_path):
    monkeypatch.delenv("RLEIF_TEST_KEY", raising=False)
    path = write(tmp_path, base())
    ep = load_settings(path).endpoint("evolve")
    with pytest.raises(SettingsError) as info:
        read_api_key(ep)
    assert str(info.value) == (
        f"environment variable RLEIF_TEST_KEY is not set ({path}: api.api_key_env); "
        "export it in the shell that runs rleif"
    )
    with pytest.raises(SettingsError):
        make_client(ep)
    monkeypatch.setenv("RLEIF_TEST_KEY", "   ")
    with pytest.raises(SettingsError, match=r"^environment variable RLEIF_TEST_KEY is empty"):
        read_api_key(ep)


def test_missing_env_var_points_at_model_override(monkeypatch):
    monkeypatch.delenv("RLEIF_CODE_KEY", raising=False)
    s = parse_settings(base(models={"code_eval": {"name": "c", "api_key_env": "RLEIF_CODE_KEY"}}))
    with pytest.raises(SettingsError, match=r"RLEIF_CODE_KEY is not set \(settings.json: models.code_eval.api_key_env\)"):
        read_api_key(s.endpoint("code_eval"))


def test_key_is_read_at_call_time_and_never_stored(monkeypatch, tmp_path):
    monkeypatch.setenv("RLEIF_TEST_KEY", FAKE_KEY)
    s = load_settings(write(tmp_path, base(models={r: "m" for r in ROLES})))
    ep = s.endpoint("evolve")
    assert read_api_key(ep) == FAKE_KEY
    monkeypatch.setenv("RLEIF_TEST_KEY", FAKE_KEY + "-rotated")
    assert read_api_key(ep) == FAKE_KEY + "-rotated"  # not cached
    assert FAKE_KEY not in repr(s) and FAKE_KEY not in str(ep) and FAKE_KEY not in repr(ep)
    for value in _all_field_values(s):
        assert FAKE_KEY not in str(value)


def _all_field_values(obj):
    if dataclasses.is_dataclass(obj):
        for f in dataclasses.fields(obj):
            yield from _all_field_values(getattr(obj, f.name))
    elif isinstance(obj, dict):
        for k, v in obj.items():
            yield k
            yield from _all_field_values(v)
    else:
        yield obj


def test_make_clients_use_endpoint_values(monkeypatch):
    monkeypatch.setenv("RLEIF_TEST_KEY", FAKE_KEY)
    ep = parse_settings(base()).endpoint("evolve")
    client = make_client(ep)
    assert str(client.base_url).rstrip("/") == ep.base_url
    assert (client.timeout, client.max_retries, client.api_key) == (30.0, 2, FAKE_KEY)
    assert make_client(ep, max_retries=0, timeout=5).max_retries == 0
    aclient = make_async_client(ep)
    assert (aclient.timeout, aclient.max_retries, aclient.api_key) == (30.0, 2, FAKE_KEY)
    client.close()


def test_known_secrets_lists_current_values(monkeypatch):
    monkeypatch.setenv("RLEIF_TEST_KEY", FAKE_KEY)
    monkeypatch.setenv("RLEIF_EMPTY_KEY", "")
    s = parse_settings(base(models={"evolve": "m", "code_eval": {"name": "c", "api_key_env": "RLEIF_EMPTY_KEY"}}))
    assert known_secrets(s) == [FAKE_KEY]


# ------------------------------------------------------------------ redaction


def test_redact_openai_style_401_message():
    message = (
        "Error code: 401 - {'error': {'message': 'Incorrect API key provided: "
        f"sk-...{FAKE_KEY[-4:]}. You can find your API key at https://platform.openai.com/account/api-keys.', "
        "'type': 'invalid_request_error', 'param': None, 'code': 'invalid_api_key'}}"
    )
    out = redact(message, [FAKE_KEY])
    assert FAKE_KEY[-4:] not in out
    assert "Incorrect API key provided: sk-...[REDACTED]." in out and "invalid_api_key" in out


@pytest.mark.parametrize(
    "text,expected",
    [
        (f"Bearer {FAKE_KEY}", "Bearer [REDACTED]"),
        (f"key {FAKE_KEY[:8]}****{FAKE_KEY[-4:]} rejected", "key [REDACTED]****[REDACTED] rejected"),
        (f"key {FAKE_KEY[:8]}...{FAKE_KEY[-4:]}", "key [REDACTED]...[REDACTED]"),
        (f"key {FAKE_KEY[:8]}…", "key [REDACTED]…"),
        ("nothing secret here... at all", "nothing secret here... at all"),
        (f"word {FAKE_KEY[-4:]} alone stays", f"word {FAKE_KEY[-4:]} alone stays"),
    ],
)
def test_redact_fragments(text, expected):
    assert redact(text, [FAKE_KEY, ""]) == expected


def test_redact_longest_secret_first():
    assert redact("a=sk-abcdefgh12345678", ["sk-abcd", "sk-abcdefgh12345678"]) == "a=[REDACTED]"


# ------------------------------------------------------------------ issue 42: bounds of every numeric setting

OUT_OF_BOUNDS = [  # (where, key, value): each alone in a file must be refused with one line naming it
    ("api", "timeout", 1e308), ("api", "timeout", 3601), ("api", "timeout", -1),
    ("api", "max_retries", 1_000_000_000), ("api", "max_retries", 21), ("api", "max_retries", 3.0),
    ("api", "max_reply_bytes", 1), ("api", "max_reply_bytes", 2 << 30), ("api", "max_reply_bytes", True),
    ("models.evolve", "timeout", 1e308), ("models.evolve", "max_retries", 1_000_000_000),
    ("models.evolve", "max_reply_bytes", 10 ** 30),
    ("eval", "temperature", 1e300), ("eval", "max_new_tokens", 10 ** 12),
    ("prices.m", "input_per_million", 1e300),
]


@pytest.mark.parametrize("where,key,value", OUT_OF_BOUNDS, ids=[f"{w}.{k}={v!r}" for w, k, v in OUT_OF_BOUNDS])
def test_every_numeric_setting_has_bounds(tmp_path, where, key, value):
    data = base(models={"evolve": {"name": "chat-model"}}, prices={"m": {"input_per_million": 1,
                                                                          "output_per_million": 1}})
    section = data
    for part in where.split("."):
        section = section.setdefault(part, {})
    section[key] = value
    path = write(tmp_path, data)
    with pytest.raises(SettingsError) as info:
        load_settings(path)
    (line,) = info.value.problems
    assert line.startswith(f"{path}: {where}.{key} = ") and "expected a" in line and "and <= " in line


def test_max_reply_bytes_is_inherited_and_overridden(tmp_path):
    data = base(models={"evolve": "chat-model", "irm_judge": {"name": "j", "max_reply_bytes": 65536}})
    data["api"]["max_reply_bytes"] = 8 << 20
    s = load_settings(write(tmp_path, data))
    assert s.endpoint("evolve").max_reply_bytes == 8 << 20 and s.endpoint("irm_judge").max_reply_bytes == 65536
    assert load_settings(write(tmp_path, base())).endpoint("evolve").max_reply_bytes == 4 << 20
