"""Keys, clients and redaction for the endpoints of ``settings.json`` (``rleif_kit.core.settings``).

The key is read from its environment variable at the moment a client is built (:func:`read_api_key`),
never stored; anything that may echo a key back (server error messages) goes through :func:`redact`
with :func:`known_secrets` before it is printed. The ``openai`` package is imported lazily.
"""

from __future__ import annotations

import os
import re
from typing import TYPE_CHECKING, Any, Iterable
from urllib.parse import urlsplit

from rleif_kit.core.settings import Endpoint, Settings, SettingsError

if TYPE_CHECKING:  # pragma: no cover - typing only
    import openai

#: Sent as the key to keyless local servers (vLLM, llama.cpp ...): the openai client refuses an
#: empty key, and these servers ignore whatever is sent.
KEYLESS_PLACEHOLDER = "not-needed"

REDACTED = "[REDACTED]"

#: The one host that may receive the OpenAI-Organization / OpenAI-Project headers.
OPENAI_HOST = "api.openai.com"


def read_api_key(endpoint: Endpoint) -> str:
    """Read the endpoint's key from the environment *now* (never cached, never stored).

    Keyless endpoints (``api_key_env`` null) get :data:`KEYLESS_PLACEHOLDER`.  A missing or empty
    variable raises a one-line :class:`SettingsError` naming the variable and where it was set.
    """
    name = endpoint.api_key_env
    if name is None:
        return KEYLESS_PLACEHOLDER
    value = os.environ.get(name, "").strip()
    if value:
        return value
    state = "is empty" if name in os.environ else "is not set"
    origin = endpoint.key_origin or f"api_key_env of role {endpoint.role!r}"
    raise SettingsError([f"environment variable {name} {state} ({origin}); export it in the shell that runs rleif"])


def make_client(endpoint: Endpoint, *, timeout: float | None = None, max_retries: int | None = None) -> "openai.OpenAI":
    """A synchronous ``openai.OpenAI`` for the endpoint; ``timeout``/``max_retries`` override it."""
    import openai  # heavy: loaded on first use

    return openai.OpenAI(**_client_kwargs(endpoint, timeout, max_retries))


def make_async_client(
    endpoint: Endpoint, *, timeout: float | None = None, max_retries: int | None = None
) -> "openai.AsyncOpenAI":
    """An ``openai.AsyncOpenAI`` for the endpoint; ``timeout``/``max_retries`` override it."""
    import openai  # heavy: loaded on first use

    return openai.AsyncOpenAI(**_client_kwargs(endpoint, timeout, max_retries))


def _client_kwargs(endpoint: Endpoint, timeout: float | None, max_retries: int | None) -> dict[str, Any]:
    kwargs: dict[str, Any] = {
        "api_key": read_api_key(endpoint),
        "base_url": endpoint.base_url,
        "timeout": endpoint.timeout if timeout is None else timeout,
        "max_retries": endpoint.max_retries if max_retries is None else max_retries,
    }
    if urlsplit(endpoint.base_url).hostname != OPENAI_HOST:
        kwargs["default_headers"] = _no_openai_account_headers()
    return kwargs


def _no_openai_account_headers() -> dict[str, Any]:
    """Headers that stop the client sending ``OPENAI_ORG_ID`` / ``OPENAI_PROJECT_ID`` elsewhere.

    Why: the openai client reads both variables from the environment whenever ``organization`` /
    ``project`` are None (passing None does not switch that off) and sends them as headers to
    whatever ``base_url`` says.  An ``Omit()`` default header removes them from every request,
    so a third-party server never learns which OpenAI account the person also has.
    """
    import openai  # heavy: loaded on first use

    return {"OpenAI-Organization": openai.Omit(), "OpenAI-Project": openai.Omit()}


def known_secrets(settings: Settings) -> list[str]:
    """Current values of every key variable the settings name, for :func:`redact` only."""
    names = [settings.api.api_key_env] + [ep.api_key_env for ep in settings.models.values()]
    values = (os.environ.get(name, "").strip() for name in dict.fromkeys(n for n in names if n))
    return list(dict.fromkeys(v for v in values if v))


def redact(text: str, secrets: Iterable[str]) -> str:
    """Replace each secret, and the fragments servers echo back, with ``[REDACTED]``.

    Servers quote keys in error messages abbreviated, e.g. ``sk-abc123...wxyz`` or
    ``sk-abc12****wxyz``; so besides the full secret, its first 8 and last 4 characters are
    removed where they touch ``...``, ``…`` or ``*``.  Longest secrets go first so one secret
    that contains another is removed whole.
    """
    for secret in sorted({s for s in secrets if s}, key=len, reverse=True):
        text = text.replace(secret, REDACTED)
        head, tail = re.escape(secret[:8]), re.escape(secret[-4:])
        text = re.sub(head + r"(?=\.\.\.|…|\*)", REDACTED, text)
        text = re.sub(r"(?:(?<=\.\.\.)|(?<=…)|(?<=\*))" + tail, REDACTED, text)
    return text
