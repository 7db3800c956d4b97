"""Canary redaction that also catches near copies.

A model that half-remembers a canary writes a near copy (``AM6-AMBER-3941`` for
``HV6-AMBER-3941``: 12 of 14 characters). ``redact_canaries`` replaces every span of a
text within Levenshtein distance ``max_distance`` (default 2, case ignored) of a canary
by ``[CANARY]``, exact copies included.

How: a span within distance k of a canary split into k + 1 pieces contains at least one
piece verbatim (pigeonhole), so each piece's occurrences are found with ``str.find`` and
only the window around each is aligned (Sellers' approximate-substring DP, which gives
the best span ending at each position). Per window: among the spans at the smallest
distance, the longest is redacted. Canaries shorter than ``MIN_FUZZY`` characters are
replaced only verbatim (a near match of a short string is too often ordinary text).
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["MASK", "MAX_DISTANCE", "MIN_FUZZY", "near_spans", "redact_canaries"]

MASK = "[CANARY]"
"""What a redacted span becomes."""
MAX_DISTANCE = 2
"""Edit distance (insertions, deletions, substitutions; case ignored) up to which a span is a canary copy."""
MIN_FUZZY = 8
"""Shortest canary matched approximately (shorter ones: verbatim only)."""


def _fold(text: str) -> str:
    """Lower case, one character for one (so positions in the folded text are the text's)."""
    return "".join(c if len(low := c.lower()) != 1 else low for c in text)


def _best_span(window: str, pattern: str, k: int) -> tuple[int, int, int] | None:
    """(distance, start, end) in ``window`` of its closest substring to ``pattern`` (longest on
    ties), or None when none is within ``k``."""
    m = len(pattern)
    # column per window position: cost[i] = distance of pattern[:i] to the best substring
    # ending here, start[i] = where that substring starts (earliest on ties)
    cost, start = list(range(m + 1)), [0] * (m + 1)
    best: tuple[int, int, int] | None = None
    for j, ch in enumerate(window, start=1):
        nc, ns = [0] * (m + 1), [j] * (m + 1)
        for i in range(1, m + 1):
            c, s = cost[i - 1] + (pattern[i - 1] != ch), start[i - 1]  # match / substitute
            if cost[i] + 1 < c or (cost[i] + 1 == c and start[i] < s):  # window char inserted
                c, s = cost[i] + 1, start[i]
            if nc[i - 1] + 1 < c or (nc[i - 1] + 1 == c and ns[i - 1] < s):  # pattern char deleted
                c, s = nc[i - 1] + 1, ns[i - 1]
            nc[i], ns[i] = c, s
        cost, start = nc, ns
        if cost[m] <= k and (best is None or (cost[m], start[m] - j) < (best[0], best[1] - best[2])):
            best = (cost[m], start[m], j)
    return best


def _word(ch: str) -> bool:
    return ch.isalnum() or ch == "-"


def _widen(low: str, s: int, e: int, k: int) -> tuple[int, int]:
    """A near copy's span without punctuation at its ends, then grown by up to ``k`` word
    characters each side (it is one token: ``HV6-AMBER-3914`` aligns best as
    ``HV6-AMBER-391``; its ``4`` goes too)."""
    while s < e and not _word(low[s]):  # punctuation the alignment took for a substitution
        s += 1
    while e > s and not _word(low[e - 1]):
        e -= 1
    lo, hi = s, e
    while lo > max(0, s - k) and _word(low[lo - 1]):
        lo -= 1
    while hi < min(len(low), e + k) and _word(low[hi]):
        hi += 1
    return lo, hi


def near_spans(text: str, canary: str, max_distance: int = MAX_DISTANCE) -> list[tuple[int, int]]:
    """Spans ``(start, end)`` of ``text`` within ``max_distance`` edits of ``canary`` (case
    ignored), non-overlapping, in order."""
    low, pat = _fold(text), _fold(canary)
    m = len(pat)
    if m < MIN_FUZZY or max_distance <= 0:
        exact, i = [], low.find(pat) if pat else -1
        while i >= 0:
            exact.append((i, i + m))
            i = low.find(pat, i + m)
        return exact
    k = max_distance
    cuts = [round(m * t / (k + 1)) for t in range(k + 2)]
    windows: list[tuple[int, int]] = []
    for a, b in zip(cuts, cuts[1:], strict=False):
        piece, i = pat[a:b], low.find(pat[a:b])
        while i >= 0:  # the canary would start near i - a: align a window around that
            windows.append((max(0, i - a - k), min(len(low), i - a + m + k)))
            i = low.find(piece, i + 1)
    spans: list[tuple[int, int]] = []
    for lo, hi in sorted(set(windows)):
        hit = _best_span(low[lo:hi], pat, k)
        if hit is not None:
            d, a, b = hit
            spans.append((lo + a, lo + b) if d == 0 else _widen(low, lo + a, lo + b, k))
    return _merge(spans)


def _merge(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for s, e in sorted(spans):
        if out and s <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], e))
        else:
            out.append((s, e))
    return out


def redact_canaries(text: str, canaries: Sequence[str], max_distance: int = MAX_DISTANCE) -> str:
    """``text`` with every exact or near copy of each canary replaced by ``[CANARY]``."""
    spans = _merge([sp for c in canaries if c for sp in near_spans(text, c, max_distance)])
    if not spans:
        return text
    parts, pos = [], 0
    for s, e in spans:
        parts += [text[pos:s], MASK]
        pos = e
    parts.append(text[pos:])
    return "".join(parts)
