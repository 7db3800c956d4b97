"""The literal rules of every live erasure, shared by all adapters: the own store's rule
(``ForgetTarget``'s: at least ``MIN_LITERAL_CHARS`` characters, valid text), checked by
the driver before any plan is made or any byte is changed."""

from __future__ import annotations

from collections.abc import Sequence

from traceless.forget import ForgetTarget

__all__ = ["check_literals"]


def check_literals(literals: Sequence[str]) -> None:
    """Refuse (``ConfigError``, nothing changed) a literal the own store would refuse."""
    for literal in literals:
        ForgetTarget(kind="literal", value=literal, owner="-")  # raises ConfigError naming the fix
