"""Model backends behind one interface, the embedded-model catalog, and embedders.

Public surface: the message/config/result types, ``ModelBackend`` and the ``KVBackend``
extension, ``ScriptedBackend`` for tests, ``load_backend`` to build any backend by name,
and the embedders.
"""

from typing import TYPE_CHECKING

from traceless.models._base import (
    ChatMessage,
    Generation,
    GenerationConfig,
    KVBackend,
    KVState,
    ModelBackend,
    ServingCache,
    WrapperBackend,
    messages,
)
from traceless.models._cache import CachingBackend, call_key
from traceless.models._embedder import Embedder, FloatArray, HashingEmbedder
from traceless.models._options import ENGINE_ENV, Credentials, Endpoint, EngineOptions, ServerPreset
from traceless.models._scripted import ScriptedBackend

__all__ = [
    "CachingBackend",
    "call_key",
    "ChatMessage",
    "Generation",
    "GenerationConfig",
    "KVBackend",
    "KVState",
    "ModelBackend",
    "ServingCache",
    "WrapperBackend",
    "messages",
    "Embedder",
    "HashingEmbedder",
    "FloatArray",
    "ScriptedBackend",
    "ENGINE_ENV",
    "Credentials",
    "Endpoint",
    "EngineOptions",
    "ServerPreset",
]

# --- catalog, loaders and local backends (torch/transformers imported lazily) ---------------
from traceless.models._catalog import (  # noqa: E402
    DEFAULT_MODEL,
    KNOWN_MODELS,
    ModelSpec,
    ModelStatus,
    assemble,
    get_spec,
    hf_cache_path,
    install_packages,
    model_status,
    pull,
)
from traceless.models._load import (  # noqa: E402
    BACKENDS,
    EMBEDDERS,
    audit_backend,
    fast_spec,
    llamacpp_available,
    load_backend,
    load_embedder,
    parse_embedder_name,
    parse_speculation,
    served_slots,
)

__all__ += [
    "DEFAULT_MODEL",
    "KNOWN_MODELS",
    "ModelSpec",
    "ModelStatus",
    "model_status",
    "assemble",
    "get_spec",
    "hf_cache_path",
    "install_packages",
    "pull",
    "BACKENDS",
    "EMBEDDERS",
    "audit_backend",
    "fast_spec",
    "llamacpp_available",
    "load_backend",
    "served_slots",
    "parse_speculation",
    "load_embedder",
    "parse_embedder_name",
    "TransformersBackend",
    "SentenceTransformerEmbedder",
    "minilm_path",
]

if TYPE_CHECKING:
    from traceless.models._st_embedder import SentenceTransformerEmbedder, minilm_path
    from traceless.models._transformers import TransformersBackend

_LAZY = {
    "TransformersBackend": "traceless.models._transformers",
    "SentenceTransformerEmbedder": "traceless.models._st_embedder",
    "minilm_path": "traceless.models._st_embedder",
}


def __getattr__(name: str) -> object:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'traceless.models' has no attribute {name!r}")
