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


class HashingEmbedder(Embedder):
    """Bag of lower-cased word hashes projected to ``dim`` signed buckets.

    Deterministic and instant; cosine similarity tracks word overlap. For unit tests
    and for users who want retrieval without torch.
    """

    def __init__(self, dim: int = 256) -> None:
        self.dim = dim
        self.name = f"hashing-{dim}"

    def embed(self, texts: list[str]) -> FloatArray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, t in enumerate(texts):
            for w in _WORD.findall(t.lower()):
                h = hashlib.blake2b(w.encode(), digest_size=8).digest()
                idx = int.from_bytes(h[:4], "little") % self.dim
                sign = 1.0 if h[4] & 1 else -1.0
                out[i, idx] += sign
            n = float(np.linalg.norm(out[i]))
            if n > 0:
                out[i] /= n
        return out
