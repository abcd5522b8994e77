"""Endpoint settings for the API-driven stages, read from ``settings.json``.

Why a separate file from the run TOML: the run parameters (``params/<run>.toml``) are committed
and describe *what* an experiment does; ``settings.json`` is git-ignored and describes *where* the
models live on this machine (which server, which model name, which environment variable holds
the key).  Swapping a provider must not change an experiment's identity, and a key must never end
up in git, a notebook output, or a log line.

Three rules follow from that:

* The API key is never stored on any object here.  Settings only name an environment variable;
  :func:`rleif_kit.core.api_keys.read_api_key` reads it at the moment a client is built.
* A broken file is reported all at once (:class:`SettingsError`, one line per problem, each naming
  the file and the key path), because fixing one typo per run is a slow loop in a notebook.
* Anything that may echo a key back (server error messages) goes through
  :func:`rleif_kit.core.api_keys.redact` before it is printed.
"""

from __future__ import annotations

import difflib
import json
import math
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from rleif_kit.core.urls import has_credentials, redact_url, valid_authority
from rleif_kit.core.user_files import UserFileError, parse_json, read_user_text

__all__ = [
    "API_MODES",
    "ROLES",
    "SettingsError",
    "ApiConfig",
    "Endpoint",
    "Price",
    "EvalDefaults",
    "Settings",
    "load_settings",
    "parse_settings",
]

#: The model roles the pipeline knows about; ``models`` keys must be one of these.
ROLES = ("evolve", "irm_judge", "prm_judge", "code_eval", "math_eval")

_TOP_KEYS = ("api", "models", "eval", "prices")
_API_KEYS = ("base_url", "api_key_env", "timeout", "max_retries", "max_reply_bytes", "mode")

#: How a prompt goes to the server (``api.mode``, or a model entry's ``mode``): "chat" as one user message on
#: ``/v1/chat/completions`` (the server wraps it in the model's chat template), "completions" as the exact text on
#: ``/v1/completions`` (no template: a base model's published prompt as it is), "auto" chat until the server says
#: the model has no chat template, then completions (``llm/api_mode.py``).
API_MODES = ("chat", "completions", "auto")

#: Bounds of the numeric settings. ``timeout`` is each attempt's total deadline (connect, headers and body): an hour
#: is far past any chat reply, and a larger value is a typo, not a wait anyone means. ``max_retries``: the client
#: backs off up to 8 s between tries, so 20 retries is minutes of a server that keeps failing. ``max_reply_bytes``:
#: 4 MiB by default, 30 times the largest reply the kit asks for (a 32k-token answer is about 130 KB of JSON) and
#: small enough that 16 requests in flight hold under 64 MiB; from 64 KiB to 1 GiB.
MAX_TIMEOUT_S = 3600.0
MAX_RETRIES = 20
DEFAULT_MAX_REPLY_BYTES = 4 * 1024 * 1024
REPLY_BYTES_RANGE = (64 * 1024, 1024 * 1024 * 1024)
MAX_TEMPERATURE = 2.0  # the OpenAI API's own upper bound
MAX_NEW_TOKENS = 1_000_000
MAX_PRICE_PER_MILLION = 100_000.0  # USD per million tokens: a thousand times today's dearest model
_MODEL_KEYS = ("name",) + _API_KEYS
_EVAL_PATH_KEYS = ("gsm8k_path", "math_path", "humaneval_path", "humanevalplus_path", "mbpp_path", "mbppplus_path",
                   "arith_path")
_EVAL_KEYS = _EVAL_PATH_KEYS + ("cot", "temperature", "max_new_tokens")
_PRICE_KEYS = ("input_per_million", "output_per_million")
# Keys people reach for when they try to paste the key itself into the file.
_SECRET_LOOKING_KEYS = {"api_key", "apikey", "key", "token", "secret", "authorization", "bearer"}
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


class SettingsError(ValueError):
    """Invalid or incomplete settings; ``str(err)`` has one line per problem.

    ``problems`` keeps the lines as a list so callers (and tests) can count or filter them.
    """

    def __init__(self, problems: Iterable[str]):
        self.problems = list(problems)
        super().__init__("\n".join(self.problems))


@dataclass(frozen=True)
class ApiConfig:
    """The ``api`` section: defaults every model entry inherits unless it overrides them."""

    base_url: str | None = None
    api_key_env: str | None = None
    timeout: float = 120.0
    max_retries: int = 3
    max_reply_bytes: int = DEFAULT_MAX_REPLY_BYTES
    mode: str = "chat"


@dataclass(frozen=True)
class Endpoint:
    """Everything needed to call one role's model, except the key (see :func:`read_api_key`).

    ``key_origin`` says where ``api_key_env`` was set (``"settings.json: api.api_key_env"``) so
    a missing variable can be traced back to the line to edit; it is not part of equality.
    """

    role: str
    name: str
    base_url: str
    api_key_env: str | None
    timeout: float
    max_retries: int
    max_reply_bytes: int = DEFAULT_MAX_REPLY_BYTES
    mode: str = "chat"  # one of API_MODES
    key_origin: str = field(default="", compare=False, repr=False)


@dataclass(frozen=True)
class Price:
    """USD per million tokens, used for cost reports; optional because local servers are free."""

    input_per_million: float
    output_per_million: float

    def cost(self, prompt_tokens: int, completion_tokens: int) -> float:
        """Dollar cost of one call (or of summed token counts)."""
        return (prompt_tokens * self.input_per_million + completion_tokens * self.output_per_million) / 1e6


@dataclass(frozen=True)
class EvalDefaults:
    """The ``eval`` section.  Paths are kept exactly as written (relative paths are the caller's
    to resolve), so that the same file works from the repo root and from ``notebooks/``."""

    gsm8k_path: str | None = None
    math_path: str | None = None
    humaneval_path: str | None = None
    humanevalplus_path: str | None = None
    mbpp_path: str | None = None
    mbppplus_path: str | None = None
    arith_path: str | None = None
    cot: bool = True
    temperature: float = 0.0
    max_new_tokens: int = 512


@dataclass(frozen=True)
class Settings:
    """A validated ``settings.json``.  Holds no secrets, so it is safe to print or log."""

    api: ApiConfig
    models: dict[str, Endpoint]
    eval: EvalDefaults
    prices: dict[str, Price]
    path: Path | None = None

    def endpoint(self, role: str) -> Endpoint:
        """The endpoint for ``role``; the error names the role and the roles that are configured."""
        if role in self.models:
            return self.models[role]
        where = str(self.path) if self.path is not None else "settings"
        configured = ", ".join(self.models) or "none"
        if role not in ROLES:
            raise SettingsError(
                [f"{where}: unknown role {role!r}{_did_you_mean(role, ROLES)}; known roles: {', '.join(ROLES)}"]
            )
        raise SettingsError(
            [f"{where}: no model configured for role {role!r} (set models.{role}); configured roles: {configured}"]
        )

    def price(self, model: str) -> Price | None:
        """The price entry for a model name, or None when the file gives none."""
        return self.prices.get(model)


# --------------------------------------------------------------------------------------------
# Loading and validation
# --------------------------------------------------------------------------------------------


def load_settings(path: str | os.PathLike[str] = "settings.json") -> Settings:
    """Read and validate a settings file; raises :class:`SettingsError` listing every problem."""
    path = Path(path)
    try:
        text = read_user_text(path, kind="a settings file (JSON)")  # a regular file, bounded (core/user_files.py)
    except UserFileError as exc:
        missing = str(exc).startswith("file not found")
        raise SettingsError([f"{path}: file not found; copy params/settings.example.json to {path} and edit it"
                             if missing else str(exc)]) from None
    duplicates: list[str] = []
    try:
        data = parse_json(text, str(path), object_pairs_hook=lambda pairs: _no_duplicates(pairs, duplicates))
    except UserFileError as exc:
        raise SettingsError([str(exc)]) from None
    except json.JSONDecodeError as exc:
        raise SettingsError(
            [f"{path}:{exc.lineno}:{exc.colno}: invalid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})"]
        ) from None
    extra = [f"{path}: duplicate key {key!r} (JSON keeps only the last one)" for key in duplicates]
    return parse_settings(data, source=str(path), path=path, extra_problems=extra)


def parse_settings(
    data: Any,
    source: str = "settings.json",
    path: Path | None = None,
    extra_problems: Iterable[str] = (),
) -> Settings:
    """Validate an already-parsed settings object (``source`` labels the error lines)."""
    v = _Validator(source, extra_problems)
    top = v.section(data, "", _TOP_KEYS, "a JSON object with keys " + ", ".join(_TOP_KEYS))
    api = _parse_api(v, top.get("api", {}))
    models = _parse_models(v, top.get("models", {}), api)
    eval_defaults = _parse_eval(v, top.get("eval", {}))
    prices = _parse_prices(v, top.get("prices", {}))
    if v.problems:
        raise SettingsError(v.problems)
    return Settings(api=api, models=models, eval=eval_defaults, prices=prices, path=path)


def _no_duplicates(pairs: list[tuple[str, Any]], duplicates: list[str]) -> dict[str, Any]:
    """json object hook that remembers duplicated keys instead of silently dropping one."""
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            duplicates.append(key)
        out[key] = value
    return out


def _parse_api(v: _Validator, raw: Any) -> ApiConfig:
    sec = v.section(raw, "api", _API_KEYS, "an object with keys " + ", ".join(_API_KEYS))
    d = ApiConfig()
    return ApiConfig(
        base_url=v.url(sec, "base_url", "api", None),
        api_key_env=v.env_name(sec, "api_key_env", "api", None),
        timeout=v.number(sec, "timeout", "api", d.timeout, minimum=0.0, strict=True, maximum=MAX_TIMEOUT_S,
                         unit=" (seconds)"),
        max_retries=v.integer(sec, "max_retries", "api", d.max_retries, minimum=0, maximum=MAX_RETRIES),
        max_reply_bytes=v.integer(sec, "max_reply_bytes", "api", d.max_reply_bytes, minimum=REPLY_BYTES_RANGE[0],
                                  maximum=REPLY_BYTES_RANGE[1]),
        mode=v.choice(sec, "mode", "api", d.mode, API_MODES),
    )


def _parse_models(v: _Validator, raw: Any, api: ApiConfig) -> dict[str, Endpoint]:
    sec = v.section(raw, "models", ROLES, "an object mapping roles to model names", noun="role")
    return {role: ep for role, entry in sec.items() if (ep := _parse_model(v, role, entry, api))}


def _parse_model(v: _Validator, role: str, entry: Any, api: ApiConfig) -> Endpoint | None:
    """A model entry is a bare name (inherits everything from ``api``) or an object overriding it."""
    kp = f"models.{role}"
    if isinstance(entry, str):
        entry = {"name": entry}
    elif not isinstance(entry, dict):
        v.bad(kp, entry, 'a model name string or an object {"name": ..., "base_url": ..., ...}')
        return None
    sec = v.section(entry, kp, _MODEL_KEYS, "")
    name = v.string(sec, "name", kp, None)
    if "name" not in sec:
        v.problem(f"{kp}.name", "missing; expected the model name the server knows")
    base_url = v.url(sec, "base_url", kp, api.base_url)
    if base_url is None and "base_url" not in sec and not v.has_problem("api.base_url"):
        v.problem(f"{kp}.base_url", f"missing; set api.base_url or {kp}.base_url")
    if "api_key_env" in sec:  # explicit null means "keyless server", even if api names a variable
        key_env, origin = v.env_name(sec, "api_key_env", kp, None), f"{v.source}: {kp}.api_key_env"
    else:
        key_env, origin = api.api_key_env, f"{v.source}: api.api_key_env"
    timeout = v.number(sec, "timeout", kp, api.timeout, minimum=0.0, strict=True, maximum=MAX_TIMEOUT_S,
                       unit=" (seconds)")
    retries = v.integer(sec, "max_retries", kp, api.max_retries, minimum=0, maximum=MAX_RETRIES)
    reply_bytes = v.integer(sec, "max_reply_bytes", kp, api.max_reply_bytes, minimum=REPLY_BYTES_RANGE[0],
                            maximum=REPLY_BYTES_RANGE[1])
    mode = v.choice(sec, "mode", kp, api.mode, API_MODES)
    if not name or base_url is None:
        return None
    return Endpoint(role, name, base_url.rstrip("/"), key_env, timeout, retries, reply_bytes, mode=mode,
                    key_origin=origin)


def _parse_eval(v: _Validator, raw: Any) -> EvalDefaults:
    sec = v.section(raw, "eval", _EVAL_KEYS, "an object with keys " + ", ".join(_EVAL_KEYS))
    d = EvalDefaults()
    paths = {key: v.string(sec, key, "eval", None) for key in _EVAL_PATH_KEYS}
    return EvalDefaults(
        **paths,
        cot=v.boolean(sec, "cot", "eval", d.cot),
        temperature=v.number(sec, "temperature", "eval", d.temperature, minimum=0.0, maximum=MAX_TEMPERATURE),
        max_new_tokens=v.integer(sec, "max_new_tokens", "eval", d.max_new_tokens, minimum=1, maximum=MAX_NEW_TOKENS),
    )


def _parse_prices(v: _Validator, raw: Any) -> dict[str, Price]:
    sec = v.section(raw, "prices", None, "an object mapping model names to prices", noun="model")
    prices = {}
    for model, entry in sec.items():
        kp = f"prices.{model}"
        item = v.section(entry, kp, _PRICE_KEYS, "an object with keys " + ", ".join(_PRICE_KEYS))
        for key in _PRICE_KEYS:
            if isinstance(entry, dict) and key not in item:
                v.problem(f"{kp}.{key}", "missing; expected a number >= 0 (USD per million tokens)")
        values = [v.number(item, key, kp, 0.0, minimum=0.0, maximum=MAX_PRICE_PER_MILLION) for key in _PRICE_KEYS]
        prices[model] = Price(*values)
    return prices


def _did_you_mean(word: str, choices: Iterable[str]) -> str:
    match = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return f" (did you mean {match[0]!r}?)" if match else ""


def _show(value: Any) -> str:
    """A short JSON rendering of a bad value for an error line."""
    text = json.dumps(value, default=str)
    return text if len(text) <= 60 else text[:57] + "..."


def _is_number(value: Any) -> bool:
    # bool is an int subclass, but `"timeout": true` is a mistake, not 1 second.
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


class _Validator:
    """Collects problems instead of raising, so one run reports everything wrong with a file.

    Each getter returns a usable fallback on error so parsing can carry on.
    """

    def __init__(self, source: str, extra_problems: Iterable[str] = ()):
        self.source = source
        self.problems: list[str] = list(extra_problems)
        self._paths: set[str] = set()

    def problem(self, keypath: str, message: str) -> None:
        self._paths.add(keypath)
        self.problems.append(f"{self.source}: {keypath or '<top level>'}: {message}")

    def bad(self, keypath: str, value: Any, expected: str) -> None:
        self._paths.add(keypath)
        self.problems.append(f"{self.source}: {keypath or '<top level>'} = {_show(value)}: expected {expected}")

    def has_problem(self, keypath: str) -> bool:
        return keypath in self._paths

    def section(self, raw: Any, kp: str, allowed: Iterable[str] | None, expected: str, noun: str = "key") -> dict:
        """Check that ``raw`` is an object and report unknown keys (``allowed=None``: any key)."""
        if not isinstance(raw, dict):
            self.bad(kp, raw, expected or "an object")
            return {}
        allowed = tuple(allowed) if allowed is not None else None
        for key in raw:
            if allowed is None or key in allowed:
                continue
            sub = f"{kp}.{key}" if kp else key
            message = f"unknown {noun}{_did_you_mean(key, allowed)}; allowed: {', '.join(allowed)}"
            if key.lower() in _SECRET_LOOKING_KEYS:
                message += (
                    " (value not shown). Never put API keys in settings.json: put the NAME of an"
                    " environment variable in api_key_env and export the key in your shell"
                )
            self.problem(sub, message)
        return {key: raw[key] for key in raw if allowed is None or key in allowed}

    def number(self, sec: dict, key: str, kp: str, default: float, *, minimum: float, maximum: float,
               strict: bool = False, unit: str = "") -> float:
        """A finite number (not a bool) in ``[minimum, maximum]`` (``(minimum, maximum]`` when ``strict``)."""
        if key not in sec:
            return default
        value, op = sec[key], ">" if strict else ">="
        if not _is_number(value) or value < minimum or (strict and value == minimum) or value > maximum:
            self.bad(f"{kp}.{key}", value, f"a number {op} {minimum:g} and <= {maximum:g}{unit}")
            return default
        return float(value)

    def integer(self, sec: dict, key: str, kp: str, default: int, *, minimum: int, maximum: int) -> int:
        """A whole number (not a bool, not 3.0) in ``[minimum, maximum]``."""
        if key not in sec:
            return default
        value = sec[key]
        if not isinstance(value, int) or isinstance(value, bool) or not minimum <= value <= maximum:
            self.bad(f"{kp}.{key}", value, f"an integer >= {minimum} and <= {maximum}")
            return default
        return value

    def boolean(self, sec: dict, key: str, kp: str, default: bool) -> bool:
        if key not in sec:
            return default
        if not isinstance(sec[key], bool):
            self.bad(f"{kp}.{key}", sec[key], "true or false")
            return default
        return sec[key]

    def choice(self, sec: dict, key: str, kp: str, default: str, choices: tuple[str, ...]) -> str:
        """One of ``choices``, exactly; a near miss is named ("did you mean 'completions'?")."""
        if key not in sec:
            return default
        value = sec[key]
        if value not in choices:
            near = _did_you_mean(value, choices) if isinstance(value, str) else ""
            self.bad(f"{kp}.{key}", value, f"one of {', '.join(choices)}{near}")
            return default
        return value

    def string(self, sec: dict, key: str, kp: str, default: str | None) -> str | None:
        if key not in sec:
            return default
        value = sec[key]
        if not isinstance(value, str) or not value.strip():
            self.bad(f"{kp}.{key}", value, "a non-empty string")
            return default
        return value

    def url(self, sec: dict, key: str, kp: str, default: str | None) -> str | None:
        """An http(s) URL without credentials; shown only redacted (``core/urls.redact_url``), whatever its scheme."""
        if key not in sec:
            return default
        value = sec[key]
        if isinstance(value, str) and value.strip():
            if has_credentials(value):
                self.problem(f"{kp}.{key}", f"{_show(redact_url(value))}: a URL with credentials (user:password@) is"
                             " refused; remove them and put the key in the environment variable named by api_key_env")
                return default
            if not value.startswith(("http://", "https://")):
                self.bad(f"{kp}.{key}", redact_url(value), "a URL starting with http:// or https://")
                return default
            if not valid_authority(value):
                self.bad(f"{kp}.{key}", redact_url(value), "a URL with a host (and a numeric port, if any)")
                return default
        return self.string(sec, key, kp, default)

    def env_name(self, sec: dict, key: str, kp: str, default: str | None) -> str | None:
        """An environment variable NAME.  A bad value is not echoed: it is often the key itself."""
        if key not in sec or sec[key] is None:
            return default
        value = sec[key]
        if not isinstance(value, str):
            self.bad(f"{kp}.{key}", value, "the name of an environment variable, or null for a keyless server")
            return default
        if not _ENV_NAME.match(value):
            self.problem(
                f"{kp}.{key}",
                "expected the NAME of an environment variable such as TAOTOKEN_API_KEY, not the key itself"
                " (value not shown: it is not a valid variable name and may be a secret)",
            )
            return default
        return value
