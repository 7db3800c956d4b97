"""Embedders: the paper-000 sentence-transformers model and a dependency-free hashing
embedder for unit tests."""

from __future__ import annotations

import abc
import hashlib
import re

import numpy as np
import numpy.typing as npt

__all__ = ["Embedder", "HashingEmbedder"]

FloatArray = npt.NDArray[np.float32]


class Embedder(abc.ABC):
    """Texts in, L2-normalised float32 vectors out."""

    name: str = "embedder"
    dim: int = 0

    @abc.abstractmethod
    def embed(self, texts: list[str]) -> FloatArray:
        """Return an array of shape (len(texts), dim), rows L2-normalised."""

    def describe(self) -> dict[str, object]:
        return {"name": self.name, "dim": self.dim}


_WORD = re.compile(r"[A-Za-z0-9]+")
_MAX_WORDS = 1 << 20  # bound on the hashing embedder's word cache


class HashingEmbedder(Embedder):
    """Bag of lower-cased word hashes projected to ``dim`` signed buckets.

    Deterministic and instant; cosine similarity tracks word overlap. For unit tests
    and for users who want retrieval without torch.
    """

    def __init__(self, dim: int = 256) -> None:
        self.dim = dim
        self.name = f"hashing-{dim}"
        self._buckets: dict[str, tuple[int, float]] = {}  # word → (bucket, sign): a word is hashed once

    def _bucket(self, w: str) -> tuple[int, float]:
        hit = self._buckets.get(w)
        if hit is None:
            h = hashlib.blake2b(w.encode(), digest_size=8).digest()
            hit = (int.from_bytes(h[:4], "little") % self.dim, 1.0 if h[4] & 1 else -1.0)
            if len(self._buckets) >= _MAX_WORDS:
                self._buckets.clear()
            self._buckets[w] = hit
        return hit

    def embed(self, texts: list[str]) -> FloatArray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, t in enumerate(texts):
            acc: dict[int, float] = {}  # sums of ±1 are exact: the same as adding into the float32 row
            for w in _WORD.findall(t.lower()):
                idx, sign = self._bucket(w)
                acc[idx] = acc.get(idx, 0.0) + sign
            if acc:
                out[i, list(acc)] = list(acc.values())
            n = float(np.linalg.norm(out[i]))
            if n > 0:
                out[i] /= n
        return out
