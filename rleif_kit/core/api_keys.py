"""Keys, clients and redaction for the endpoints of ``settings.json`` (``rleif_kit.core.settings``).

The key is read from its environment variable at the moment a client is built (:func:`read_api_key`),
never stored; anything that may echo a key back (server error messages, reply texts) goes through :func:`redact`
with :func:`known_secrets` before it is printed. The ``openai`` package is imported lazily.
"""

from __future__ import annotations

import functools
import os
import re
from typing import TYPE_CHECKING, Any, Iterable
from urllib.parse import urlsplit

from rleif_kit.core.bounded_http import bounded_async_client, bounded_client
from rleif_kit.core.settings import Endpoint, Settings, SettingsError
from rleif_kit.core.urls import REDACTED, has_credentials, redact_url

if TYPE_CHECKING:  # pragma: no cover - typing only
    import openai

#: Sent as the key to keyless local servers (vLLM, llama.cpp ...): the openai client refuses an
#: empty key, and these servers ignore whatever is sent.
KEYLESS_PLACEHOLDER = "not-needed"

#: Keys that local servers' own docs tell people to send (vLLM's "EMPTY", llama.cpp's "sk-no-key-required",
#: Ollama's "ollama"...): not secrets, and redacting their pieces would cut words out of replies ("required").
PLACEHOLDER_KEYS = frozenset({KEYLESS_PLACEHOLDER, "empty", "sk-no-key-required", "no-key", "none", "ollama",
                              "lm-studio", "dummy"})


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
    """A synchronous ``openai.OpenAI`` for the endpoint; ``timeout``/``max_retries`` override it. Its reply body is
    bounded as the async client's is; its deadline is checked between reads (``core/bounded_http.BoundedClient``)."""
    import openai  # heavy: loaded on first use

    kwargs = _client_kwargs(endpoint, timeout, max_retries)
    http_client = bounded_client(kwargs["timeout"], endpoint.max_reply_bytes)
    return openai.OpenAI(**kwargs, http_client=http_client)


def make_async_client(
    endpoint: Endpoint, *, timeout: float | None = None, max_retries: int | None = None
) -> "openai.AsyncOpenAI":
    """An ``openai.AsyncOpenAI`` for the endpoint; ``timeout``/``max_retries`` override it.

    Every request of the kit goes through one of these: ``timeout`` is each attempt's total deadline (connect,
    headers and body) and a reply body is read up to ``endpoint.max_reply_bytes`` (``core/bounded_http.py``).
    """
    import openai  # heavy: loaded on first use

    kwargs = _client_kwargs(endpoint, timeout, max_retries)
    http_client = bounded_async_client(kwargs["timeout"], endpoint.max_reply_bytes)
    return openai.AsyncOpenAI(**kwargs, http_client=http_client)


def _client_kwargs(endpoint: Endpoint, timeout: float | None, max_retries: int | None) -> dict[str, Any]:
    refuse_credentials_in_url(endpoint.base_url, f"the base_url of role {endpoint.role!r}")
    kwargs: dict[str, Any] = {
        "api_key": read_api_key(endpoint),
        "base_url": endpoint.base_url,
        "timeout": endpoint.timeout if timeout is None else timeout,
        "max_retries": endpoint.max_retries if max_retries is None else max_retries,
    }
    if urlsplit(endpoint.base_url).hostname != OPENAI_HOST:
        kwargs["default_headers"] = _no_openai_account_headers()
    return kwargs


def refuse_credentials_in_url(url: str, where: str) -> None:
    """One :class:`SettingsError` line for a URL with ``user:password@`` in it (the URL shown redacted).

    Why refused rather than used: the HTTP client would send them as Basic auth in place of the Bearer key of
    ``api_key_env``, silently, and a URL is printed and written in many places; the key belongs in a variable.
    """
    if has_credentials(url):
        raise SettingsError([f"{where} = {redact_url(url)}: a URL with credentials (user:password@) is refused; "
                             "remove them and put the key in the environment variable named by api_key_env"])


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


#: A run of this many consecutive characters of a key, anywhere, is redacted: servers echo keys masked in every
#: style (``...`` + the last 6, stars + the last 6, the first 10 + stars + the last 6), and 6 random characters of
#: a key are already worth hiding. Shorter fragments are redacted only where they touch a mask (``sk-...wxyz``).
MIN_RUN = 6
_SHORT_RUN = 4
_QUAD, _STRIDE = 4, 3  # 3 + 4 - 1 = 6: every run of MIN_RUN holds a 4-gram at a multiple of 3
_MASK_AFTER = r"(?:(?<=\.\.\.)|(?<=…)|(?<=\*)|(?<=%2A))"
_MASK_BEFORE = r"(?=\.\.\.|…|\*|%2A)"


def redact(text: str, secrets: Iterable[str]) -> str:
    """Replace each secret, and every fragment of it a server may echo back, with ``[REDACTED]``.

    Redacted: any run of :data:`MIN_RUN` or more consecutive characters of a secret, in the forms the client could
    have sent it in or a server could quote it in (plain, URL-encoded, base64 at any of its three alignments, so
    the base64 of ``Bearer <key>`` or ``user:<key>`` too); and 4 or 5 of its first / last characters where they
    touch a mask (``...``, ``…``, ``*``). Overlapping finds of several secrets are merged into one ``[REDACTED]``.
    The placeholder keys of keyless local servers (:data:`PLACEHOLDER_KEYS`) are not secrets. Cost: one set
    lookup per character of ``text`` per secret.
    """
    secrets = sorted({s for s in secrets if s and s.lower() not in PLACEHOLDER_KEYS}, key=len, reverse=True)
    if not text or not secrets:
        return text
    spans: list[tuple[int, int]] = []
    for secret in secrets:
        if len(secret) < MIN_RUN:  # too short for fragments: only where it appears whole
            spans += [(m.start(), m.end()) for m in re.finditer(re.escape(secret), text)]
            continue
        for pattern in _fragment_patterns(secret):
            spans += [(m.start(), m.end()) for m in pattern.finditer(text)]
        spans += _runs(text, secret)
    if not spans:
        return text
    out, last = [], 0
    for start, end in _merged(spans):
        out += [text[last:start], REDACTED]
        last = end
    return "".join(out + [text[last:]])


def _merged(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    merged: list[list[int]] = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    return [(a, b) for a, b in merged]


def _runs(text: str, secret: str) -> list[tuple[int, int]]:
    """Spans of ``text`` that are runs of >= MIN_RUN characters of one of the secret's forms.

    Why the stride: a run of 6 covers a 4-character window starting at a multiple of 3, so looking up every
    third 4-gram finds each run (n/3 set lookups, ~0.1 ms for a 1,500-character reply); only there is each
    6-gram checked and extended along the form.
    """
    grams, quads = _grams(secret)
    spans, n, checked = [], len(text), -1
    for j in range(0, n - _QUAD + 1, _STRIDE):
        if text[j:j + _QUAD] not in quads:
            continue
        for i in range(max(j - (MIN_RUN - _QUAD), checked + 1), min(j, n - MIN_RUN) + 1):
            checked = i
            for form, k in grams.get(text[i:i + MIN_RUN], ()):  # extend along each place the 6-gram occurs
                length = MIN_RUN
                while i + length < n and k + length < len(form) and text[i + length] == form[k + length]:
                    length += 1
                spans.append((i, i + length))
    return spans


def _forms(secret: str) -> list[str]:
    """The secret as a client could have sent it or a server could quote it: plain, URL-encoded, and the part of
    its base64 (standard and URL-safe) that does not depend on what surrounds it, at each of the 3 alignments."""
    import base64
    from urllib.parse import quote, quote_plus

    raw, forms = secret.encode("utf-8"), [secret, quote(secret, safe=""), quote_plus(secret)]
    for pad in range(3):
        encoded = base64.b64encode(b"\0" * pad + raw).decode("ascii")
        inner = encoded[(8 * pad + 5) // 6: (8 * (pad + len(raw))) // 6]
        forms += [inner, inner.replace("+", "-").replace("/", "_")]
    return list(dict.fromkeys(f for f in forms if len(f) >= MIN_RUN))


@functools.lru_cache(maxsize=8)  # in this process's memory only, as the client holds the key anyway
def _grams(secret: str) -> tuple[dict[str, list[tuple[str, int]]], frozenset[str]]:
    """Every MIN_RUN-character window of every form -> where it occurs, and every 4-character window (the
    prefilter); built once per secret."""
    grams: dict[str, list[tuple[str, int]]] = {}
    for form in _forms(secret):
        for k in range(len(form) - MIN_RUN + 1):
            grams.setdefault(form[k:k + MIN_RUN], []).append((form, k))
    return grams, frozenset(g[i:i + _QUAD] for g in grams for i in range(MIN_RUN - _QUAD + 1))


@functools.lru_cache(maxsize=8)
def _fragment_patterns(secret: str) -> tuple[re.Pattern, re.Pattern]:
    """The secret's first / last 4-5 characters where they touch a mask (shorter than a run, so only there)."""
    heads = "|".join(re.escape(secret[:k]) for k in range(MIN_RUN - 1, _SHORT_RUN - 1, -1))
    tails = "|".join(re.escape(secret[-k:]) for k in range(MIN_RUN - 1, _SHORT_RUN - 1, -1))
    return re.compile(f"(?:{heads}){_MASK_BEFORE}"), re.compile(f"{_MASK_AFTER}(?:{tails})")
