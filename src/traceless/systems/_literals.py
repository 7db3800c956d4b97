"""The literal rules of every live erasure, shared by all adapters: the own store's rule
(``ForgetTarget``'s: at least ``MIN_LITERAL_CHARS`` characters, valid text), checked by
the driver before any plan is made or any byte is changed."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

from traceless.errors import ConfigError
from traceless.forget import ForgetTarget, find_variants

__all__ = ["Match", "check_literals", "matched_literals"]


Match = Literal["exact", "normalized"]
"""``exact``: the literal byte for byte (in every encoding the byte scan knows); ``normalized``:
also its near variants, as the own store's ``--match normalized`` (``find_variants``)."""

_JSON_ESCAPE = re.compile(r"\\u([0-9a-fA-F]{4})")


def check_literals(literals: Sequence[str], match: Match = "exact") -> None:
    """Refuse (``ConfigError``, nothing changed) a literal the own store would refuse."""
    if match not in ("exact", "normalized"):
        raise ConfigError(f"--match must be exact or normalized, not {match!r}")
    for literal in literals:
        ForgetTarget(kind="literal", value=literal, owner="-", match=match)  # raises ConfigError naming the fix


def matched_literals(files: Sequence[Path], literals: Sequence[str], match: Match) -> list[str]:
    """The literals an erasure or scan looks for: with ``normalized``, the literals and every other
    spelling of them that the instance's files hold (lower case, spaced, U+2011, full-width, split
    by zero-width characters: the own store's compact form), each then matched exactly by the one
    match rule; so the plan, the scope rules, the byte scan and the receipt treat each spelling as
    a literal. The files are read as text (UTF-8, JSON ``\\uXXXX`` escapes decoded), each once."""
    check_literals(literals, match)
    if match == "exact":
        return list(literals)
    found = dict.fromkeys(literals)
    for path in files:
        try:
            data = path.read_bytes()
        except OSError:
            continue
        text = _JSON_ESCAPE.sub(_unescape, data.decode("utf-8", "ignore"))
        for literal in literals:
            for a, b in find_variants(text, literal):
                found.setdefault(text[a:b].strip(), None)
    return [v for v in found if v]


def _unescape(m: re.Match[str]) -> str:
    code = int(m.group(1), 16)
    return m.group(0) if 0xD800 <= code <= 0xDFFF else chr(code)
