"""Secrets of the user redacted from whatever traceless writes (issue 40 item 7).

``redact_secrets`` takes a JSON-shaped value (a system config, a study config dump) and
returns a copy where every secret is ``[REDACTED]``: a value under a key whose name says it
is a secret (``api_key``, ``password``, ``token``, ``Authorization``, ...), and, anywhere, a
value shaped like one (the password of ``scheme://user:PASS@host``, ``sk-...`` keys, bearer
tokens). The live config is never changed: only what is written or printed goes through this.
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["REDACTED", "redact_secrets", "redact_text"]

REDACTED = "[REDACTED]"
"""What a secret is replaced with."""

_SECRET_WORDS = frozenset({"password", "passwd", "pwd", "pass", "secret", "secrets", "token",
                           "auth", "authorization", "credential", "credentials", "apikey", "cookie",
                           "signature", "passphrase", "dsn"})
_SECRET_PAIRS = frozenset({("api", "key"), ("private", "key"), ("access", "key"), ("secret", "key"),
                           ("session", "key"), ("access", "token"), ("refresh", "token"), ("id", "token")})
_URL_PASSWORD = re.compile(r"(?P<head>[a-z][a-z0-9+.\-]*://[^/\s:@]*:)(?P<pw>[^@\s/]+)(?=@)", re.IGNORECASE)
_URL_QUERY = re.compile(r"(?P<head>[?&;](?:password|passwd|pwd|token|api[_-]?key|secret|key|sig)=)"
                        r"(?P<pw>[^&;\s]+)", re.IGNORECASE)
_KV_PASSWORD = re.compile(r"(?P<head>\b(?:password|passwd|pwd)\s*=\s*)(?P<pw>'[^']*'|\"[^\"]*\"|[^\s;]+)",
                          re.IGNORECASE)
_BEARER = re.compile(r"(?P<head>\b(?:bearer|basic|token)\s+)(?P<pw>[A-Za-z0-9._~+/=\-]{8,})", re.IGNORECASE)
_KEY_SHAPE = re.compile(r"\b(?:sk|pk|rk)-[A-Za-z0-9_\-]{8,}|\b(?:ghp|gho|ghs|github_pat|xox[bpas]|hf)_"
                        r"[A-Za-z0-9_]{8,}|\bAKIA[0-9A-Z]{16}\b|\bAIza[0-9A-Za-z_\-]{20,}")


def _is_secret_key(key: object) -> bool:
    """``api_key``, ``apiKey``, ``password``, ``x-auth-token``, ``Authorization``: a secret's
    name (whole words of the key, so ``author`` or ``max_tokens`` are not)."""
    if not isinstance(key, str):
        return False
    words = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", key).lower()
    parts = [w for w in re.split(r"[^a-z0-9]+", words) if w]
    return any(w in _SECRET_WORDS for w in parts) or any(p in _SECRET_PAIRS for p in zip(parts, parts[1:], strict=False))


def redact_text(text: str) -> str:
    """``text`` with every secret-shaped part replaced (URL passwords, ``password=...``,
    bearer/basic tokens, ``sk-...``-style keys); the rest kept."""
    for pat in (_URL_PASSWORD, _URL_QUERY, _KV_PASSWORD, _BEARER):
        text = pat.sub(lambda m: m.group("head") + REDACTED, text)
    return _KEY_SHAPE.sub(REDACTED, text)


def _redact_item(value: Any) -> Any:
    """The value of a secret-named key: a mapping is walked (its own keys decide), anything
    else that is set becomes ``[REDACTED]`` (empty and ``None`` stay, so a reader sees it unset)."""
    if isinstance(value, dict):
        return redact_secrets(value)
    if value is None or value == "" or isinstance(value, bool):
        return value
    return REDACTED


def redact_secrets(value: Any) -> Any:
    """A copy of ``value`` (dicts, lists, tuples, strings, scalars) with secrets redacted: a
    non-empty value under a secret-named key becomes ``[REDACTED]`` whole, and every string
    has secret-shaped parts replaced (``redact_text``)."""
    if isinstance(value, dict):
        return {k: _redact_item(v) if _is_secret_key(k) else redact_secrets(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(redact_secrets(v) for v in value)
    if isinstance(value, str):
        return redact_text(value)
    return value
