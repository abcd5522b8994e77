"""One cheap round trip per configured role, before a run spends hours on the API.

Why: a wrong model name, an unexported key or a dead tunnel otherwise surfaces deep inside a
stage, after the notebook has already burnt time (and money) on the roles that did work.  This
check fails fast and shows *every* role's status at once.

Every detail string passes through :func:`rleif_kit.core.api_keys.redact`, because servers quote the
rejected key back in 401 messages and these rows end up in notebook outputs. A failed row says what the server
said, as a failed request of a run does (``llm/errors.failure_reason``: ``http 400: Server is pinned to ...``), and
a 400 / 404 / 422 naming an unknown model adds what to check, with the server's model list where it gives one.
The round trip takes the route settings.json's ``mode`` names (``llm/api_mode.py``), and the row says which one
answered ("chat", "completions", "auto:completions" when "auto" found no chat template); a chat request refused for
want of a chat template says what to set.

It sits with the backends, below the stages, because stage 00 (``prepare.stage.run_prepare``), ``rleif check-api``
and ``rleif doctor`` all make this round trip, and no stage may import ``pipeline/``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Iterable

from rleif_kit.core.api_keys import known_secrets, make_async_client, read_api_key, redact
from rleif_kit.core.urls import redact_url
from rleif_kit.core.settings import ROLES, Endpoint, Settings, SettingsError
from rleif_kit.llm.api_mode import ModeChooser, chat_params, no_chat_template, no_template_advice, reply_choice
from rleif_kit.llm.base import run_sync
from rleif_kit.llm.errors import failure_reason, names_unknown_model, served_models, unknown_model_advice

__all__ = ["CheckRow", "check_api", "check_endpoint", "check_settings", "format_check_table"]

DETAIL_WIDTH = 60  # a reply is cut to this; an error never is: its fix comes at its end


@dataclass(frozen=True)
class CheckRow:
    """The outcome of one role's round trip.  ``latency_s`` is None when no request was sent; ``mode`` is the route
    it took (``ModeChooser.label``: "chat", "completions", "auto:chat", "auto:completions", "auto" undecided)."""

    role: str
    model: str
    base_url: str
    ok: bool
    latency_s: float | None
    detail: str
    mode: str = "chat"


def check_api(
    settings: Settings,
    roles: Iterable[str] | None = None,
    prompt: str = "Reply with the single word: ok",
    max_tokens: int = 16,
) -> list[CheckRow]:
    """Check ``roles`` (default: every configured role, in pipeline order); never raises for a
    role's failure, which becomes a row with ``ok=False``.  Unknown/unconfigured role names
    still raise :class:`SettingsError`, since that is a bug in the caller, not in the endpoint."""
    if roles is None:
        roles = [role for role in ROLES if role in settings.models]
    endpoints = [settings.endpoint(role) for role in roles]
    secrets = known_secrets(settings)
    return [check_endpoint(ep, prompt=prompt, max_tokens=max_tokens, secrets=secrets) for ep in endpoints]


def check_endpoint(
    endpoint: Endpoint, prompt: str = "Reply with the single word: ok", max_tokens: int = 16, secrets: Iterable[str] = ()
) -> CheckRow:
    """One completion with retries off, on the endpoint's route: the point is to see the first answer, not to hide
    it.

    The endpoint's own key is always redacted, on top of ``secrets``. The request goes through the client every
    run uses (``api_keys.make_async_client``): ``api.timeout`` bounds all of it, ``api.max_reply_bytes`` the reply.
    """
    secrets = list(secrets) + _own_key(endpoint)
    modes = ModeChooser(endpoint.mode)

    def row(ok: bool, latency: float | None, detail: str) -> CheckRow:
        clean = redact(" ".join(detail.split()), secrets)
        return CheckRow(endpoint.role, endpoint.name, redact(redact_url(endpoint.base_url), secrets), ok, latency,
                        clean, modes.label())

    try:
        client = make_async_client(endpoint, max_retries=0)
    except SettingsError as exc:  # missing key variable, a URL with credentials: a failed row, not a crash
        return row(False, None, str(exc))
    start = time.perf_counter()
    ok, detail = run_sync(_round_trip(client, endpoint, modes, prompt, max_tokens, secrets))
    return row(ok, time.perf_counter() - start, detail)


async def _round_trip(client, endpoint: Endpoint, modes: ModeChooser, prompt: str, max_tokens: int,
                      secrets: list[str]) -> tuple[bool, str]:
    try:
        _, reply = await modes.send(client, chat_params(endpoint.name, ({"role": "user", "content": prompt},),
                                                        temperature=0, top_p=1.0, max_tokens=max_tokens))
        return True, _reply_text(reply)
    except Exception as exc:  # any failure is the row's verdict
        return False, await _failure_detail(client, endpoint, modes, exc, secrets)
    finally:
        await client.close()


async def _failure_detail(client, endpoint: Endpoint, modes: ModeChooser, exc: Exception, secrets: list[str]) -> str:
    """The server's own words after the cause ("http 400: ..."); for an unknown model, what to check in
    settings.json and the models the server lists (one short GET /models, as a run's rejection has); for a chat
    request refused for want of a chat template, what mode to set."""
    detail = failure_reason(exc, secrets)
    if modes.configured == "chat" and no_chat_template(exc) == "named":
        return f"{detail.rstrip('.')}; {no_template_advice(endpoint.role)}"
    if names_unknown_model(exc, endpoint.name):
        advice = unknown_model_advice(endpoint.role, endpoint.name, await served_models(client, secrets))
        detail = f"{detail.rstrip('.')}; {advice}"
    return detail


def _own_key(endpoint: Endpoint) -> list[str]:
    if endpoint.api_key_env is None:
        return []  # the keyless placeholder is not a secret
    try:
        return [read_api_key(endpoint)]
    except SettingsError:
        return []


def _reply_text(reply) -> str:
    """The reply content, or a note saying why there is none (e.g. a reasoning model hit max_tokens)."""
    if not reply.choices:
        return "(no choices in reply)"
    text, finish_reason = reply_choice(reply)
    content = (text or "").strip()
    return content or f"(empty reply, finish_reason={finish_reason})"


def format_check_table(rows: Iterable[CheckRow]) -> str:
    """A fixed-width text table, one line per row, for printing in a notebook or a terminal. ``mode``: the route
    the round trip took. A model's reply is cut to DETAIL_WIDTH; a failed row's message is shown whole (a missing
    key's says which variable to export)."""
    header = ("role", "model", "status", "mode", "latency_ms", "detail")
    lines = [header] + [
        (
            r.role,
            r.model,
            "ok" if r.ok else "error",
            r.mode,
            "-" if r.latency_s is None else f"{r.latency_s * 1000:.0f}",
            _truncate(r.detail, DETAIL_WIDTH) if r.ok else r.detail,
        )
        for r in rows
    ]
    widths = [max(len(line[i]) for line in lines) for i in range(len(header) - 1)]
    out = []
    for line in lines:
        cells = [cell.rjust(w) if i == 4 else cell.ljust(w) for i, (cell, w) in enumerate(zip(line, widths))]
        out.append("  ".join(cells + [line[-1]]).rstrip())
    return "\n".join(out)


def _truncate(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 3] + "..."


def check_settings(settings: Settings | None) -> tuple[list[CheckRow], str]:
    """Check every role of the settings, with the table to print; without settings, say the run uses local
    backends only."""
    if settings is None:
        return [], "no settings.json given: local backends only, no endpoint to check"
    rows = check_api(settings)
    return rows, format_check_table(rows)
