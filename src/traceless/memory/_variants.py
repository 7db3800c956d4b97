"""The compact form of a text that ``match="normalized"`` compares (forget and write gate).

Cluster by cluster (a base character with its combining marks, so an NFD copy composes):
NFKC, then casefold, then every separator is dropped: whitespace, dash punctuation
(Unicode category Pd: ``-``, U+2010 hyphen, U+2011 non-breaking hyphen, en/em dashes,
full-width ``－`` after NFKC), U+2212 minus, and format characters (category Cf: zero-width
space/joiners U+200B–U+200D, word joiner U+2060, BOM U+FEFF, soft hyphen U+00AD).
``XQ7-VIOLET-3829``, ``xq7 violet 3829``, ``ＸＱ７‑ＶＩＯＬＥＴ‑３８２９`` and
``XQ7-VIO\\u200bLET-3829`` all become ``xq7violet3829``.

Not covered (they survive normalised matching): homoglyphs from other scripts (Cyrillic
``Х`` for Latin ``X``), other punctuation used as a separator (``XQ7.VIOLET.3829``,
``XQ7_VIOLET_3829``), leetspeak or re-spelling (``violet`` → ``v1olet``), paraphrase, and a
copy split across more than two records.
"""

from __future__ import annotations

import re
import unicodedata

__all__ = ["compact", "compact_spans"]

_ASCII_SEP = re.compile(r"[\s\-]+")
"""The separators among ASCII characters: whitespace and the hyphen-minus (ASCII has no
other Pd or Cf character, and NFKC and casefold are ``lower()`` on it)."""


def _separator(c: str) -> bool:
    return c.isspace() or c == "\u2212" or unicodedata.category(c) in ("Pd", "Cf")


def _clusters(text: str) -> list[tuple[int, int]]:
    spans: list[tuple[int, int]] = []
    for i, c in enumerate(text):
        if spans and unicodedata.combining(c):
            spans[-1] = (spans[-1][0], i + 1)
        else:
            spans.append((i, i + 1))
    return spans


def compact_spans(text: str) -> tuple[str, list[tuple[int, int]]]:
    """The compact form of ``text`` and, per compact character, the span of ``text`` it came
    from (so a match found in compact form can be cut out of the original)."""
    if text.isascii():
        return _ascii_spans(text)
    out: list[str] = []
    where: list[tuple[int, int]] = []
    for a, b in _clusters(text):
        if b - a == 1 and text[a].isascii():  # NFKC is the identity, casefold is lower()
            if not _ASCII_SEP.match(text[a]):
                out.append(text[a].lower())
                where.append((a, b))
            continue
        for ch in unicodedata.normalize("NFKC", text[a:b]).casefold():
            if not _separator(ch):
                out.append(ch)
                where.append((a, b))
    return "".join(out), where


def _ascii_spans(text: str) -> tuple[str, list[tuple[int, int]]]:
    runs = list(_ASCII_WORD.finditer(text))
    where = [(i, i + 1) for m in runs for i in range(m.start(), m.end())]
    return "".join(m.group().lower() for m in runs), where


_ASCII_WORD = re.compile(r"[^\s\-]+")
_ASCII_DROP = {c: None for c in range(128) if _ASCII_SEP.match(chr(c))}


def compact(text: str) -> str:
    """NFKC + casefold, separators (whitespace, dashes, zero-width/format characters) dropped
    (``compact_spans(text)[0]`` without the per-character spans)."""
    if text.isascii():  # ``_ASCII_SEP.sub`` would hold one piece object per word of a big text
        return text.lower().translate(_ASCII_DROP)
    out: list[str] = []
    start = 0
    for i in range(1, len(text) + 1):  # cluster by cluster, as ``_clusters``, one at a time
        if i < len(text) and unicodedata.combining(text[i]):
            continue
        c = text[start:i]
        if len(c) == 1 and c.isascii():
            if not _ASCII_SEP.match(c):
                out.append(c.lower())
        else:
            out += [ch for ch in unicodedata.normalize("NFKC", c).casefold() if not _separator(ch)]
        start = i
    return "".join(out)
