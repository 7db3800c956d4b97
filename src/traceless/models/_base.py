"""The one model interface every backend implements, plus the KV-cache extension
that the local transformers backend adds for execution-state unlearning (paper 002).
"""

from __future__ import annotations

import abc
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field

if TYPE_CHECKING:
    from traceless.models._options import Endpoint

__all__ = [
    "ChatMessage",
    "GenerationConfig",
    "Generation",
    "ModelBackend",
    "ServingCache",
    "WrapperBackend",
    "KVState",
    "KVBackend",
    "messages",
]

Role = Literal["system", "user", "assistant", "tool"]


class ChatMessage(BaseModel):
    """One chat turn."""

    model_config = ConfigDict(frozen=True)

    role: Role
    """Who speaks: system, user, assistant or tool."""
    content: str
    """The text of the turn."""


def messages(*pairs: tuple[str, str]) -> list[ChatMessage]:
    """Shorthand: ``messages(("system", "..."), ("user", "..."))``."""
    return [ChatMessage(role=r, content=c) for r, c in pairs]


class GenerationConfig(BaseModel):
    """Decoding settings. Greedy when ``temperature == 0``; seeded sampling otherwise."""

    model_config = ConfigDict(frozen=True)

    max_new_tokens: int = Field(128, ge=1)
    """Upper bound on generated tokens."""
    temperature: float = Field(0.0, ge=0.0)
    """0 means greedy decoding."""
    top_p: float = Field(1.0, gt=0.0, le=1.0)
    """Nucleus sampling mass (only when sampling)."""
    seed: int | None = None
    """Seed for sampling; the same seed reproduces the same tokens on the same backend."""
    stop: tuple[str, ...] = ()
    """Extra stop strings; generation always stops at the end of the assistant turn."""

    def cache_key(self) -> str:
        return self.model_dump_json()


class Generation(BaseModel):
    """One model reply with its accounting."""

    text: str
    """The generated text (stop sequence and end-of-turn removed)."""
    prompt_tokens: int
    """Tokens in the prompt that the backend had to process (after any prefix cache hit)."""
    completion_tokens: int
    """Tokens generated."""
    prompt_seconds: float = 0.0
    """Wall time spent on the prompt (prefill), when the backend can tell."""
    decode_seconds: float = 0.0
    """Wall time spent decoding."""
    total_seconds: float = 0.0
    """Wall time for the whole call."""
    finish_reason: str = "stop"
    """'stop' (end of turn or stop string) or 'length'."""
    model: str = ""
    """Backend/model name that produced it."""
    cached_prompt_tokens: int = 0
    """Prompt tokens reused from a prefix cache instead of recomputed."""


class ServingCache(Protocol):
    """The prompt cache of a model server traceless started (a ``LlamaCppServer``): it keeps the
    KV of the prompts it served, in its slots and its host-memory prompt cache, whether or not
    requests asked to reuse it (issue 38.3: a later request with ``cache_prompt`` is served from
    it), until ``clear_prompt_cache`` drops it (a restart on the same port)."""

    @property
    def address(self) -> str:
        """``http://HOST:PORT`` of the running server."""
        ...

    @property
    def pid(self) -> int | None:
        """The server process (a clear starts a new one)."""
        ...

    cache_prompt: bool
    """The server's default for requests' ``cache_prompt`` (the opt-in, in the run's identity)."""

    def clear_prompt_cache(self) -> float:
        """Drop every prompt's KV the server keeps; the seconds it took."""
        ...


class ModelBackend(abc.ABC):
    """Chat messages in; text, token counts and timing out."""

    name: str = "backend"

    @abc.abstractmethod
    def generate(self, messages: list[ChatMessage], config: GenerationConfig | None = None) -> Generation:
        """Generate one reply."""

    def generate_batch(
        self, batch: list[list[ChatMessage]], config: GenerationConfig | None = None
    ) -> list[Generation]:
        """Generate a reply for each conversation. Backends override this to batch for real."""
        return [self.generate(m, config) for m in batch]

    def describe(self) -> dict[str, Any]:
        """Identity recorded in every result row (name, weights digest, backend kind)."""
        return {"name": self.name, "backend": type(self).__name__}

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release resources (servers, memory)."""

    # ------------------------------------------------------------------ capabilities
    # What callers need to know about the engine behind a backend. A wrapper (a generation
    # cache) forwards each one to the backend it wraps (``WrapperBackend``), so nobody has to
    # look inside a backend's attributes to find out.

    def concurrency(self) -> int:
        """Requests this backend serves at once (1 for a local model; an HTTP server's cap)."""
        return 1

    def slots(self) -> int | None:
        """Slots of the model server this backend owns (a llama.cpp server's ``parallel``);
        None when it owns none (a local model, a remote API)."""
        return None

    def endpoint(self) -> Endpoint | None:
        """Where the model answers over the OpenAI chat API, for a memory system that calls it
        over HTTP itself (mem0); None for a backend with no such endpoint (a local model)."""
        return None

    def serving_cache(self) -> ServingCache | None:
        """The prompt cache of the model server traceless started for this backend (a llama.cpp
        server: what an erasure clears); None when traceless serves no model (a local model, a
        remote API, whose caches are the provider's)."""
        return None

    def uncached(self) -> ModelBackend:
        """This backend without any generation cache in front of it (itself, unless a wrapper):
        for work that must see every reply generated, or needs the engine's own methods (KV)."""
        return self


class WrapperBackend(ModelBackend):
    """A backend in front of another (``inner``), as pydantic-ai's ``WrapperModel``: every call
    and every capability is forwarded explicitly; a subclass overrides what it changes."""

    def __init__(self, inner: ModelBackend) -> None:
        self.inner = inner
        self.name = inner.name

    def generate(self, messages: list[ChatMessage], config: GenerationConfig | None = None) -> Generation:
        return self.inner.generate(messages, config)

    def generate_batch(
        self, batch: list[list[ChatMessage]], config: GenerationConfig | None = None
    ) -> list[Generation]:
        return self.inner.generate_batch(batch, config)

    def describe(self) -> dict[str, Any]:
        return self.inner.describe()

    def concurrency(self) -> int:
        return self.inner.concurrency()

    def slots(self) -> int | None:
        return self.inner.slots()

    def endpoint(self) -> Endpoint | None:
        return self.inner.endpoint()

    def serving_cache(self) -> ServingCache | None:
        return self.inner.serving_cache()

    def uncached(self) -> ModelBackend:
        return self.inner.uncached()

    def close(self) -> None:
        self.inner.close()


class KVState(Protocol):
    """An opaque prefilled KV cache plus the token ids it covers."""

    @property
    def token_ids(self) -> list[int]: ...

    @property
    def length(self) -> int: ...


@runtime_checkable
class KVBackend(Protocol):
    """What the runtime of paper 002 needs from a local backend."""

    def chat_token_ids(self, messages: list[ChatMessage], add_generation_prompt: bool = True) -> list[int]:
        """Token ids of the chat template rendering."""
        ...

    def prefill(self, token_ids: list[int], state: KVState | None = None) -> KVState:
        """Extend ``state`` (or a fresh cache) by running ``token_ids`` through the model."""
        ...

    def decode(self, state: KVState, config: GenerationConfig) -> tuple[KVState, Generation]:
        """Continue from ``state``; the new tokens are appended to the returned state."""
        ...

    def crop(self, state: KVState, length: int) -> KVState:
        """Cut the cache back to its first ``length`` tokens; cropped keys/values are zeroed/freed."""
        ...

    def next_token_logits(self, state: KVState) -> Any:
        """Logits for the token after ``state`` (for scoring)."""
        ...
