"""Model backends behind one interface, the embedded-model catalog, and embedders.

Public surface: the message/config/result types, ``ModelBackend`` and the ``KVBackend``
extension, ``ScriptedBackend`` for tests, ``load_backend`` to build any backend by name,
and the embedders.
"""

from traceless.models._base import (
    ChatMessage,
    Generation,
    GenerationConfig,
    KVBackend,
    KVState,
    ModelBackend,
    messages,
)
from traceless.models._cache import CachingBackend, call_key
from traceless.models._embedder import Embedder, HashingEmbedder
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
    "messages",
    "Embedder",
    "HashingEmbedder",
    "ScriptedBackend",
]
