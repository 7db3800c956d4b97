"""Helpers shared by CLI commands: building backends/embedders, parsing lists."""

from __future__ import annotations

import os

from traceless.models import Embedder, HashingEmbedder, ModelBackend

__all__ = ["backend", "embedder", "split_list"]


def backend(spec: str) -> ModelBackend:
    from traceless.models import load_backend  # heavy import only when a model is needed

    return load_backend(spec)


def embedder(name: str) -> Embedder:
    if name.startswith("hashing"):
        dim = name.split("-", 1)[1] if "-" in name else "256"
        return HashingEmbedder(int(dim) if dim.isdigit() else 256)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from traceless.models import load_embedder

    return load_embedder(name)


def split_list(value: str) -> list[str]:
    return [v.strip() for v in value.split(",") if v.strip()]
