"""What a failed request says, in the server's own words: the short, redacted error string every failed
:class:`~rleif_kit.llm.base.ChatResult` carries, and whether the server said the model is unknown.

The error string starts with its cause, because the failure checks classify by prefix (``checks/verdicts.py``
``FAILURE_CAUSES``, ``checks/stage_failures.py``): ``timeout``, ``rate limited (429)``, ``connection error``,
``http <status>``, ``empty response``, ``reply too large`` (a body past ``api.max_reply_bytes``, never retried); then `` after N retries`` where the client retried; then ``: `` and the
server's own text (``detail``, ``error.message``, ``message``, else the raw body), e.g.
``http 400: Server is pinned to 'x'; requested 'gpt-4o'``. Redacted before it is cut to 300 characters, so a key
cut in half is still found.
"""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any, Iterable

from rleif_kit.core.api_keys import redact
from rleif_kit.core.bounded_http import is_reply_too_large

__all__ = ["FATAL_STATUSES", "MAX_ERROR_CHARS", "failure_reason", "server_message", "names_unknown_model",
           "served_models", "unknown_model_advice"]

#: Statuses that mean the endpoint configuration is wrong, not that this one request failed.
FATAL_STATUSES = (401, 403, 404)
#: Statuses with which servers say "no such model" (vLLM 404, LiteLLM / pinned servers 400, TGI 422).
MODEL_STATUSES = (400, 404, 422)
MAX_ERROR_CHARS = 300
#: Of an error body, only this much is parsed or scanned for the server's words: the body itself is already capped
#: by ``api.max_reply_bytes`` (``core/bounded_http.py``), and the words that matter come first.
MAX_SCANNED_CHARS = 64 * 1024
MODELS_TIMEOUT_S = 5.0  # the one GET /models after an unknown-model answer: short, and never fatal
MAX_MODELS_SHOWN = 20

_MODEL_CODES = {"model_not_found", "model_not_available", "invalid_model", "unknown_model", "model_not_supported"}
# "unknown model 'x'", "invalid model name", "no such model"
_ADJECTIVE = re.compile(r"\b(?:unknown|invalid|unsupported|unrecognized|no such)\s+model\b", re.I)
# "The model `x` does not exist", "model 'x' not found", "Model x is not available on this server"
_MODEL_THEN = re.compile(r"\bmodel\b.{0,80}?(?:not found|does not exist|doesn't exist|not exist|is not served|"
                         r"not available|not loaded)", re.I | re.S)
# with the requested name in the text: "Server is pinned to 'a'; requested 'b'", "'b' not found"
_NAMED = re.compile(r"pinned|not found|does not exist|doesn't exist|unknown|no such|not served|only serves", re.I)


def failure_reason(exc: BaseException, secrets: Iterable[str]) -> str:
    """"timeout after 3 retries", "http 400: <the server's text>", ...: redacted, then cut to 300 characters."""
    import openai  # heavy: loaded on first use

    retries = retries_taken(exc)
    after = f" after {retries} retries" if retries else ""
    if is_reply_too_large(exc):  # "reply too large: ... over api.max_reply_bytes ...", never retried
        reason = str(exc)
    elif isinstance(exc, openai.APITimeoutError):
        reason = f"timeout{after}"
    elif isinstance(exc, openai.RateLimitError):
        reason = f"rate limited (429){after}" + _said(exc)
    elif isinstance(exc, openai.APIStatusError):
        reason = f"http {exc.status_code}{after}" + _said(exc)
    elif isinstance(exc, openai.APIConnectionError):
        reason = f"connection error{after}: {exc.__cause__ or exc}"
    else:
        reason = f"{type(exc).__name__}: {exc}"
    return cut(redact(" ".join(reason.split()), secrets))  # redact before the cut: a key cut in half is not found


def cut(text: str, limit: int = MAX_ERROR_CHARS) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _said(exc: BaseException) -> str:
    text = server_message(exc)
    return f": {text}" if text else ""


def server_message(exc: BaseException) -> str:
    """The server's own words: ``error.message``, ``detail`` (FastAPI), ``message`` or ``msg``, else the raw body
    (an HTML page's text), else the client's message; one line."""
    body = getattr(exc, "body", None)
    text = _body_text(body)
    if not text:
        try:
            text = _body_text(getattr(exc, "response").text)
        except Exception:  # no response, or its body was never read
            text = ""
    if not text:
        text = str(getattr(exc, "message", "") or "")[:MAX_SCANNED_CHARS]
        text = "" if re.fullmatch(r"Error code: \d+", text) else text
    return " ".join(text[:MAX_SCANNED_CHARS].split())


def _body_text(body: Any) -> str:
    """The server's words in a parsed or raw body; a raw one is read to its first MAX_SCANNED_CHARS only."""
    if isinstance(body, str):
        body = body[:MAX_SCANNED_CHARS].strip()
        try:
            return _body_text(json.loads(body)) if body[:1] in "{[" else _html_text(body)
        except ValueError:
            return _html_text(body)
    if isinstance(body, dict):
        error = body.get("error")
        if isinstance(error, dict) and error.get("message"):
            return _body_text(error["message"]) if not isinstance(error["message"], str) else error["message"]
        if isinstance(error, str) and error.strip():
            return error
        for key in ("detail", "message", "msg", "error_message", "errors"):
            value = body.get(key)
            if isinstance(value, str) and value.strip():
                return value
            if isinstance(value, (list, dict)) and value:
                return _body_text(value)
        return _dumped(body) if body else ""
    if isinstance(body, list):  # FastAPI validation errors: [{"loc": [...], "msg": "..."}]
        msgs = [str(item.get("msg")) for item in body if isinstance(item, dict) and item.get("msg")]
        return "; ".join(msgs[:MAX_MODELS_SHOWN])[:MAX_SCANNED_CHARS] if msgs else _dumped(body)
    return ""


def _dumped(body: Any) -> str:
    """A parsed body as JSON text, cut to MAX_SCANNED_CHARS."""
    return json.dumps(body, ensure_ascii=False)[:MAX_SCANNED_CHARS]


def _html_text(text: str) -> str:
    if "<" in text and ">" in text and re.search(r"<(?:html|body|h1|title|p|pre)\b", text, re.I):
        text = re.sub(r"<(script|style)\b.*?</\1>", " ", text, flags=re.I | re.S)
        text = re.sub(r"<[^>]+>", " ", text)
    return text


def error_code(exc: BaseException) -> str | None:
    """The error's ``code`` (OpenAI style ``{"error": {"code": ...}}`` or a top-level ``code``), if any."""
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        error = body.get("error")
        code = error.get("code") if isinstance(error, dict) else body.get("code")
        return str(code) if code not in (None, "") else None
    return None


def names_unknown_model(exc: BaseException, model: str) -> bool:
    """Does this 400 / 404 / 422 say the requested model is not one the server serves?

    General, not one server's wording: the code ``model_not_found`` (and its kin); "unknown / invalid / no such
    model"; "model ... not found / does not exist / not available"; or the requested name in the text with "not
    found", "does not exist", "pinned", "unknown", "no such", "only serves".
    """
    if getattr(exc, "status_code", None) not in MODEL_STATUSES:
        return False
    if (error_code(exc) or "").lower() in _MODEL_CODES:
        return True
    text = server_message(exc)
    if _ADJECTIVE.search(text) or _MODEL_THEN.search(text):
        return True
    return bool(model) and model.lower() in text.lower() and bool(_NAMED.search(text))


async def served_models(client: Any, secrets: Iterable[str], timeout: float = MODELS_TIMEOUT_S) -> list[str] | None:
    """The model ids of the server's ``GET /models`` (one try, a short timeout), redacted; None when it has no
    such list or the listing failed: the listing is advice, never a reason to fail."""
    try:
        quick = client.with_options(timeout=timeout, max_retries=0)
        page = await asyncio.wait_for(quick.models.list(), timeout + 1.0)
        ids = [str(getattr(m, "id", "")) for m in getattr(page, "data", [])]
        return [redact(i, secrets) for i in ids if i] or None
    except Exception:  # noqa: BLE001 - whatever went wrong, the rejection is reported without the list
        return None


def unknown_model_advice(role: str, model: str, models: list[str] | None) -> str:
    """What to do about an unknown model, with the server's list where it gave one."""
    advice = f"check `model` in settings.json (models.{role}.name = {model!r}) against the server's model list"
    if not models:
        return advice + " (GET /models gave none)"
    shown = ", ".join(models[:MAX_MODELS_SHOWN])
    more = f" and {len(models) - MAX_MODELS_SHOWN} more" if len(models) > MAX_MODELS_SHOWN else ""
    return f"{advice}: {shown}{more}"


def retries_taken(exc: BaseException) -> int:
    """Retries the client made before giving up: the last attempt's ``x-stainless-retry-count``."""
    request = getattr(exc, "request", None)
    try:
        return int(request.headers.get("x-stainless-retry-count", 0)) if request is not None else 0
    except (TypeError, ValueError):
        return 0
