"""Linear-time candidate windows for the exact-literal write gate (issue #22.8).

The gate stores no forgotten value, only keyed MACs, so a matcher over the values
themselves (Aho–Corasick) is not possible. Instead each value descriptor also seals a
short keyed *fingerprint* of the value: the top ``FP_BITS`` bits of a polynomial hash
``Σ (b_k + t)·r^(k+1) mod 2^32`` over its bytes (the offset ``t`` and the odd base ``r`` derive
from the gate key). Every window of the text gets the same fingerprint in one vectorised
pass per distinct value length — prefix sums of ``(b_j + t)·r^(j+1)``, each window's difference
multiplied by ``r^-i`` (``r`` is odd, so invertible mod 2^32, and uint32 arithmetic wraps
exactly there: no division anywhere) — and only windows whose fingerprint matches are
checked with the HMAC. The cost is linear in the text (a few numpy operations per 64 KiB
chunk and length) instead of one HMAC per byte and length.

What the fingerprint reveals: nothing without the gate key (it is sealed with the value's
length, AES-GCM); to the key's holder ``FP_BITS`` bits of a hash of the value, who can test
any candidate value against the HMAC anyway. A false match costs one HMAC; a window is a
false candidate with probability about ``2^-FP_BITS`` per value of that length.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Iterator
from functools import lru_cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

__all__ = ["FP_BITS", "WindowHash"]

FP_BITS = 24
_BITS = 32  # uint32: half the memory traffic of uint64, twice the SIMD lanes
_SHIFT = _BITS - FP_BITS
_MOD = 1 << _BITS
_M = _MOD - 1
_CHUNK = 1 << 16  # window starts per vectorised pass: bounds the arrays to a few MB


class WindowHash:
    """The keyed window fingerprint of one gate key."""

    def __init__(self, key: bytes) -> None:
        stream = hmac.new(key, b"traceless-gate-fp", hashlib.sha256).digest()
        self._t = int.from_bytes(stream[:4], "big")
        self._r = int.from_bytes(stream[4:8], "big") | 1

    def fingerprint(self, data: bytes) -> int:
        """The fingerprint of ``data`` (a value at forget time, a window at check time)."""
        h, pw = 0, self._r
        for b in data:
            h = (h + (b + self._t) * pw) & _M
            pw = pw * self._r & _M
        return h >> _SHIFT

    def candidates(self, data: bytes, wanted: dict[int, set[int]], *,
                   starts: int | None = None) -> Iterator[tuple[int, int]]:
        """``(i, n)`` for each window ``data[i:i+n]`` (``i < starts``, default: every
        window) whose fingerprint is in ``wanted[n]``; ``-1`` in ``wanted[n]`` asks for every
        window of length ``n`` (a descriptor made before fingerprints). Chunk by chunk, in
        increasing ``i`` per length."""
        import numpy as np

        lengths = [n for n in sorted(wanted) if 0 < n <= len(data)]
        end = len(data) if starts is None else min(starts, len(data))
        for n in [n for n in lengths if -1 in wanted[n]]:
            yield from ((i, n) for i in range(0, min(end, len(data) - n + 1)))
        lengths = [n for n in lengths if -1 not in wanted[n]]
        if not lengths:
            return
        top = max(lengths)
        t = np.uint32(self._t)
        pw, inv = _powers(self._r, _CHUNK + top, 1), _powers(pow(self._r, -1, _MOD), _CHUNK, 0)
        targets = {n: np.fromiter(wanted[n], dtype=np.uint32) for n in lengths}
        shift = np.uint32(_SHIFT)
        src = np.frombuffer(data, dtype=np.uint8)
        s = np.zeros(_CHUNK + top, dtype=np.uint32)
        for c in range(0, end, _CHUNK):
            piece = src[c: c + _CHUNK + top - 1]
            np.cumsum((piece.astype(np.uint32) + t) * pw[: len(piece)], out=s[1: len(piece) + 1])  # mod 2^32
            for n in lengths:
                count = min(_CHUNK, len(piece) - n + 1, end - c)
                if count <= 0:
                    continue
                h = (s[n: n + count] - s[:count]) * inv[:count] >> shift
                want = targets[n]
                hit = h == want[0] if len(want) == 1 else np.isin(h, want)
                for i in np.flatnonzero(hit).tolist():
                    yield c + i, n


@lru_cache(maxsize=8)
def _powers(r: int, n: int, first: int) -> npt.NDArray[np.uint32]:
    """``r^first … r^(first+n-1) mod 2^32`` (doubling: each step multiplies a block by ``r^len``)."""
    import numpy as np

    out = np.array([pow(r, first, _MOD)], dtype=np.uint32)
    while len(out) < n:
        out = np.concatenate([out, out * np.uint32(pow(r, len(out), _MOD))])
    out = out[:n]
    out.flags.writeable = False
    return out
