"""Endpoint URLs safe to print or write: the one redaction every printer and writer of a URL uses.

Why one place: a ``base_url`` reaches ``rleif check-api``'s table, ``rleif doctor``, error lines and
``<benchmark>.meta.json``; credentials in it (``user:password@``) or a key in its query must reach none of them.
``core/settings.py`` refuses a URL with credentials (the HTTP client would send them as Basic auth in place of the
Bearer key) and shows it through :func:`redact_url`, whatever its scheme.
"""

from __future__ import annotations

import re

__all__ = ["REDACTED", "redact_url", "has_credentials"]

REDACTED = "[REDACTED]"

_USERINFO = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*://)?(.*)@", re.S)


def redact_url(url: str) -> str:
    """``url`` with a ``user:password@`` part as ``[REDACTED]@`` and the value of every query parameter
    (``?key=...``) as ``[REDACTED]``.

    The credentials are everything between the scheme (or the start) and the last ``@`` before any ``?``: wider
    than the URL grammar, so a password with a raw ``/`` or a URL without a scheme is hidden whole too.
    """
    head, sep, query = url.partition("?")
    match = _USERINFO.match(head)
    if match:
        head = f"{match.group(1) or ''}{REDACTED}@{head[match.end():]}"
    if sep:
        params, hash_, fragment = query.partition("#")
        query = "&".join(f"{p.partition('=')[0]}={REDACTED}" if "=" in p else p for p in params.split("&"))
        query += hash_ + fragment
    return head + sep + query


def has_credentials(url: str) -> bool:
    """Does ``url`` carry a ``user[:password]@`` part (as :func:`redact_url` finds it)?"""
    return _USERINFO.match(url.partition("?")[0].partition("#")[0]) is not None
