"""Near-variant matching: what exact matching (paper 001's semantics, the default) misses.

``match="normalized"`` compares compact forms (``traceless.memory.compact``: NFKC,
casefold, whitespace, dashes and zero-width/format characters dropped), cluster by cluster,
so every compact character maps back to a span of the original text: a match found in
compact form can be scrubbed in the original. Lower-case, spaced, hyphen→space, full-width,
U+2011, zero-width-split and NFD variants of a literal all have the literal's compact form.
``split_spans`` finds a copy split across two consecutive records.
"""

from __future__ import annotations

import re

from traceless.memory import compact, compact_spans

__all__ = ["normalize", "compact", "find_variants", "scrub_variants", "split_spans"]

_WS = re.compile(r"\s+")


def normalize(text: str) -> str:
    """NFKC + casefold + whitespace collapsed to one space, stripped."""
    import unicodedata

    return _WS.sub(" ", unicodedata.normalize("NFKC", text).casefold()).strip()


def _finds(hay: str, needle: str) -> list[int]:
    out: list[int] = []
    i = hay.find(needle)
    while needle and i >= 0:
        out.append(i)
        i = hay.find(needle, i + len(needle))
    return out


def find_variants(text: str, literal: str) -> list[tuple[int, int]]:
    """Spans of ``text`` (original indices) whose compact form is the literal's."""
    target = compact(literal)
    if not target:
        return []
    norm, where = compact_spans(text)
    return [(where[i][0], where[i + len(target) - 1][1]) for i in _finds(norm, target)]


def split_spans(first: str, second: str, literal: str) -> list[tuple[int, int]]:
    """A copy of ``literal`` split across two consecutive records: for each compact match
    that starts in ``first`` and ends in ``second`` (neither holding it whole), the span of
    ``first`` from the match's start to its end and of ``second`` from its start to the
    match's end, as ``(start_in_first, end_in_second)``."""
    target = compact(literal)
    one, w1 = compact_spans(first)
    two, w2 = compact_spans(second)
    if not target or not one or not two:
        return []
    return [(w1[i][0], w2[i + len(target) - 1 - len(one)][1]) for i in _finds(one + two, target)
            if i < len(one) < i + len(target)]


def scrub_variants(text: str, literal: str, replacement: str = "") -> str:
    """``text`` with every near variant of ``literal`` replaced (right to left)."""
    out = text
    for a, b in reversed(find_variants(text, literal)):
        out = out[:a] + replacement + out[b:]
    return out
