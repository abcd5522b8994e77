"""Endpoint URLs safe to print or write: the one redaction every printer and writer of a URL uses.

Why one place: a ``base_url`` reaches ``rleif check-api``'s table, ``rleif doctor``, error lines and
``<benchmark>.meta.json``; credentials in it (``user:password@``) or a key in its query must reach none of them.
``core/settings.py`` refuses a URL with credentials (the HTTP client would send them as Basic auth in place of the
Bearer key) and shows it through :func:`redact_url`, whatever its scheme.

Where the credentials end is read as broadly as any parser could read it: an ``@`` anywhere before the path's first
``/`` (a password with a raw ``?`` or ``#`` in it still counts: ``http://u:p?w@host/v1``), or in the authority
``urllib`` finds. A URL whose authority does not parse (``http://u:p/w@host/v1``: the port would be "p") is hidden
up to its last ``@``. Query values are hidden where the parameter's name looks like a secret (``key``, ``token``,
``sig``, ...): the others (``api-version``) stay, so a URL's printed form still tells two endpoints apart.
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit

__all__ = ["REDACTED", "redact_url", "has_credentials", "valid_authority"]

REDACTED = "[REDACTED]"

_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://")
_SECRET_PARAM = re.compile(r"key|token|sig|secret|pass|auth|cred|session|code", re.I)


def _split(url: str) -> tuple[str, str]:
    """(``scheme://`` or "", the rest)."""
    m = _SCHEME.match(url)
    return (m.group(0), url[m.end():]) if m else ("", url)


def has_credentials(url: str) -> bool:
    """Does ``url`` carry a ``user[:password]@`` part, however a parser might find it?"""
    _, rest = _split(url)
    if "@" in rest.partition("/")[0]:
        return True
    try:
        return "@" in urlsplit(url).netloc
    except ValueError:
        return "@" in rest


def valid_authority(url: str) -> bool:
    """Does ``url`` have a host, and a port that is a number where one is given?"""
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError for a port that is not a number
    except ValueError:
        return False
    return bool(parts.hostname)


def redact_url(url: str) -> str:
    """``url`` with a ``user:password@`` part as ``[REDACTED]@`` and the values of secret-looking query parameters
    (``?key=...``, ``token``, ``sig``) as ``[REDACTED]``."""
    scheme, rest = _split(url)
    if "@" in rest and (has_credentials(url) or not valid_authority(url)):
        return f"{scheme}{REDACTED}@{_redact_query(rest.rpartition('@')[2])}"
    return scheme + _redact_query(rest)


def _redact_query(text: str) -> str:
    head, sep, query = text.partition("?")
    if not sep:
        return text
    params, hash_, fragment = query.partition("#")
    shown = [f"{p.partition('=')[0]}={REDACTED}" if "=" in p and _SECRET_PARAM.search(p.partition("=")[0]) else p
             for p in params.split("&")]
    return head + sep + "&".join(shown) + hash_ + fragment
