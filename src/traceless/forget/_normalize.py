"""Near-variant matching: what exact matching (paper 001's semantics, the default) misses.

A normalised form applies NFKC, casefolding and whitespace collapsing, cluster by cluster
(a base character with its combining marks), so every normalised character maps back to
a span of the original text: a match found in normalised form can be scrubbed in the
original. Lower-case, spaced, full-width and NFD variants of a literal all normalise to
the literal's own normal form.
"""

from __future__ import annotations

import functools
import re
import unicodedata

__all__ = ["normalize", "find_variants", "scrub_variants"]

_WS = re.compile(r"\s+")


def normalize(text: str) -> str:
    """NFKC + casefold + whitespace collapsed to one space, stripped."""
    return _WS.sub(" ", unicodedata.normalize("NFKC", text).casefold()).strip()


def _clusters(text: str) -> list[tuple[int, int]]:
    spans: list[tuple[int, int]] = []
    for i, c in enumerate(text):
        if spans and unicodedata.combining(c):
            spans[-1] = (spans[-1][0], i + 1)
        else:
            spans.append((i, i + 1))
    return spans


def _mapped(text: str) -> tuple[str, list[tuple[int, int]]]:
    """Normalised text and, per normalised character, the original span it came from."""
    out: list[str] = []
    where: list[tuple[int, int]] = []
    for a, b in _clusters(text):
        piece = unicodedata.normalize("NFKC", text[a:b]).casefold()
        if piece.isspace() or not piece:
            if piece and out and out[-1] != " ":
                out.append(" ")
                where.append((a, b))
            elif piece and out:
                where[-1] = (where[-1][0], b)
            continue
        for ch in piece:
            out.append(ch)
            where.append((a, b))
    return "".join(out), where


def _loose(literal: str) -> re.Pattern[str]:
    """The normalised literal with any whitespace between its characters optional (a
    secret written spaced out, 'XQ7 VIOLET 3829' or 'x q 7', still matches)."""
    chars = [c for c in normalize(literal) if not c.isspace()]
    return re.compile(r"\s?".join(re.escape(c) for c in chars))


def _ascii_variants(text: str, literal: str) -> list[tuple[int, int]]:
    """``find_variants`` on ASCII text, in one regex pass over the text itself (issue
    #22.8): NFKC leaves ASCII alone and casefolds it as ``lower``, one character for one,
    and a whitespace run normalises to one space, so ``\\s?`` there is ``\\s*`` here."""
    chars = [c for c in normalize(literal) if not c.isspace()]
    pat = re.compile(r"\s*".join(re.escape(c) for c in chars))
    return [m.span() for m in pat.finditer(text.lower())]


@functools.lru_cache(maxsize=1)
def _composers() -> re.Pattern[str]:
    """Characters of combining class 0 that compose with the one before them (Hangul vowel
    and final jamo, some Indic vowel signs): there, normalising cluster by cluster differs
    from normalising the whole text."""
    seconds = {0x1161 + i for i in range(21)} | {0x11A8 + i for i in range(27)}
    for cp in range(0x30000):
        d = unicodedata.decomposition(chr(cp)).split()
        if len(d) == 2 and not d[0].startswith("<") and unicodedata.combining(chr(int(d[1], 16))) == 0:
            seconds.add(int(d[1], 16))
    return re.compile("[" + "".join(re.escape(chr(c)) for c in sorted(seconds)) + "]")


def _maybe_variant(text: str, literal: str) -> bool:
    """False only when ``text`` cannot hold a near variant: the whole text normalised at C
    speed has none, and no character composes across clusters (where the whole text's
    form could differ from the cluster-by-cluster one ``find_variants`` matches in)."""
    return _loose(literal).search(normalize(text)) is not None or _composers().search(text) is not None


def find_variants(text: str, literal: str) -> list[tuple[int, int]]:
    """Spans of ``text`` (original indices) whose normalised form matches the literal's.
    Linear at C speed on ASCII text and on text without a variant; a non-ASCII text that
    holds one is mapped character by character."""
    if not literal.strip():
        return []
    if text.isascii():
        return _ascii_variants(text, literal)
    if not _maybe_variant(text, literal):
        return []
    norm, where = _mapped(text)
    return [(where[m.start()][0], where[m.end() - 1][1]) for m in _loose(literal).finditer(norm)]


def scrub_variants(text: str, literal: str, replacement: str = "") -> str:
    """``text`` with every near variant of ``literal`` replaced (right to left)."""
    out = text
    for a, b in reversed(find_variants(text, literal)):
        out = out[:a] + replacement + out[b:]
    return out
