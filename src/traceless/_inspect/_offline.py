"""Offline tokenizer for inspect's ``mockllm/model``.

mockllm counts the tokens of its default reply with tiktoken's ``o200k_base``, which tiktoken
downloads on first use (``inspect eval traceless/canary_audit --model mockllm/model`` then
ends with status ``error`` on a machine without network). Several wheels ship that file
(litellm, which the ``test`` extra installs for it; llama-index-core): at task creation,
``seed_tiktoken_cache`` copies an installed copy, checked against tiktoken's own sha256,
into the cache dir tiktoken reads, exactly where a download would have put it. Nothing is
fetched and no setting is changed; a cache that already holds the file is left alone.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path

__all__ = ["O200K_CACHE_NAME", "O200K_SHA256", "bundled_o200k", "seed_tiktoken_cache", "tiktoken_cache_dir"]

O200K_URL = "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken"
O200K_CACHE_NAME = hashlib.sha1(O200K_URL.encode()).hexdigest()
"""tiktoken's cache file name for o200k_base (sha1 of its URL)."""
O200K_SHA256 = "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d"
"""The sha256 tiktoken checks the file against (tiktoken_ext.openai_public)."""
_BUNDLED = (("litellm", "litellm_core_utils/tokenizers"), ("llama_index.core", "_static/tiktoken_cache"))
"""Packages whose wheels ship tiktoken's cache files, and where (found without importing them)."""


def tiktoken_cache_dir(env: Mapping[str, str]) -> Path | None:
    """The dir tiktoken reads its cache from (its own rule), or None when caching is off."""
    d = env.get("TIKTOKEN_CACHE_DIR", env.get("DATA_GYM_CACHE_DIR"))
    if d is None:
        return Path(tempfile.gettempdir()) / "data-gym-cache"
    return Path(d) if d else None


def _sha256(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


def bundled_o200k() -> Path | None:
    """An installed wheel's copy of o200k_base with tiktoken's sha256, or None."""
    for pkg, sub in _BUNDLED:
        try:
            spec = importlib.util.find_spec(pkg)
        except (ImportError, ValueError):
            continue
        if spec is None or not spec.origin:
            continue
        p = Path(spec.origin).parent / sub / O200K_CACHE_NAME
        if p.is_file() and _sha256(p) == O200K_SHA256:
            return p
    return None


def seed_tiktoken_cache(env: Mapping[str, str]) -> Path | None:
    """Put o200k_base where tiktoken looks under ``env`` (the process environment, read by the
    task entry point); the cache file, or None when there is no cache dir or no installed copy."""
    d = tiktoken_cache_dir(env)
    if d is None:
        return None
    target = d / O200K_CACHE_NAME
    if target.is_file() and _sha256(target) == O200K_SHA256:
        return target
    src = bundled_o200k()
    if src is None:
        return None
    try:
        d.mkdir(parents=True, exist_ok=True)
        tmp = d / f".{O200K_CACHE_NAME}.{os.getpid()}.tmp"
        shutil.copyfile(src, tmp)
        os.replace(tmp, target)
    except OSError:
        return None
    return target
