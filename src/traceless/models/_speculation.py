"""Speculative decoding settings of the llama.cpp engine: the types its server knows and the
``TYPE[:DRAFT_MAX]`` parser. A leaf module, so the options (``_options``), the loader
(``_load``) and the server (``_llamacpp_server``) share it without importing each other."""
from __future__ import annotations

from traceless.errors import ConfigError

__all__ = ["SPECULATION_TYPES", "parse_speculation"]

SPECULATION_TYPES = ("none", "ngram-simple", "ngram-map-k", "ngram-map-k4v", "ngram-mod", "ngram-cache")


def parse_speculation(spec: str) -> tuple[str, int]:
    """``TYPE[:DRAFT_MAX]`` (e.g. ``ngram-map-k:16``, ``none``) as (type, draft length);
    a bad one raises ``ConfigError`` naming the choices."""
    kind, _, n = spec.strip().lower().partition(":")
    if kind not in SPECULATION_TYPES or (n and (not n.isdigit() or int(n) < 1)):
        raise ConfigError(f"speculation {spec!r}: use TYPE[:DRAFT_MAX] with TYPE one of "
                          f"{', '.join(SPECULATION_TYPES)} and DRAFT_MAX >= 1, e.g. ngram-map-k:16")
    return kind, int(n) if n else 16
