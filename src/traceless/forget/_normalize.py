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
import unicodedata

from traceless.memory import compact, compact_spans

__all__ = ["normalize", "compact", "find_variants", "scrub_variants", "split_spans"]

_WS = re.compile(r"\s+")


def normalize(text: str) -> str:
    """NFKC + casefold + whitespace collapsed to one space, stripped."""
    return _WS.sub(" ", unicodedata.normalize("NFKC", text).casefold()).strip()


def _finds(hay: str, needle: str) -> list[int]:
    out: list[int] = []
    i = hay.find(needle)
    while needle and i >= 0:
        out.append(i)
        i = hay.find(needle, i + len(needle))
    return out


_CHUNK = 1 << 16  # characters of a text compacted at a time by ``_compact_holds``


def _compact_holds(text: str, target: str) -> bool:
    """``target in compact(text)``, a chunk at a time (cut between clusters, so each chunk's
    compact form is its share of the whole's)."""
    carry, start, keep = "", 0, len(target) - 1
    while start < len(text):
        end = min(start + _CHUNK, len(text))
        while end < len(text) and unicodedata.combining(text[end]):
            end += 1
        got = carry + compact(text[start:end])
        if target in got:
            return True
        carry, start = got[-keep:] if keep else "", end
    return False


def find_variants(text: str, literal: str) -> list[tuple[int, int]]:
    """Spans of ``text`` (original indices) whose compact form is the literal's."""
    target = compact(literal)
    if not target:
        return []
    if not _compact_holds(text, target):  # the usual case: no copy of a big text is built
        return []
    norm, where = compact_spans(text)
    hits = _finds(norm, target)
    return [(where[i][0], where[i + len(target) - 1][1]) for i in hits]


def split_spans(first: str, second: str, literal: str) -> list[tuple[int, int]]:
    """A copy of ``literal`` split across two consecutive records: for each compact match
    that starts in ``first`` and ends in ``second`` (neither holding it whole), the span of
    ``first`` from the match's start to its end and of ``second`` from its start to the
    match's end, as ``(start_in_first, end_in_second)``."""
    target = compact(literal)
    one, two = compact(first), compact(second)
    if not target or not one or not two:
        return []
    hits = [i for i in _finds(one + two, target) if i < len(one) < i + len(target)]
    if not hits:  # the usual case: no per-character spans of a big text are built
        return []
    w1, w2 = compact_spans(first)[1], compact_spans(second)[1]
    return [(w1[i][0], w2[i + len(target) - 1 - len(one)][1]) for i in hits]


def scrub_variants(text: str, literal: str, replacement: str = "") -> str:
    """``text`` with every near variant of ``literal`` replaced (right to left)."""
    out = text
    for a, b in reversed(find_variants(text, literal)):
        out = out[:a] + replacement + out[b:]
    return out
