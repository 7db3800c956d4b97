"""An OpenAI-compatible backend that owns the llama.cpp server it talks to."""

from __future__ import annotations

import logging
from typing import Any

from traceless.errors import BackendError
from traceless.models._base import ChatMessage, Generation, GenerationConfig
from traceless.models._llamacpp_server import LlamaCppServer, turn_markers
from traceless.models._openai import OpenAIBackend
from traceless.models._options import Endpoint

__all__ = ["ServedBackend"]

log = logging.getLogger(__name__)


class ServedBackend(OpenAIBackend):
    """``OpenAIBackend`` on a ``LlamaCppServer`` it started; ``close()`` stops the server.

    Its identity names the weights (sha256), not the port, so result rows and the
    generation cache stay valid across runs.
    """

    def __init__(self, server: LlamaCppServer, *, weights_sha256: str = "", cache_prompt: bool | None = None,
                 context_set: bool = False, turn_stop: bool = False, **kw: Any) -> None:
        super().__init__(model=server.model, base_url=server.base_url, **kw)
        self.server = server
        self.context_set = context_set
        """Whether the slots' context was chosen by the caller (``EngineOptions.context``):
        then it is part of the identity (a prompt longer than it is cut or refused)."""
        self.weights_sha256 = weights_sha256
        self.cache_prompt = server.cache_prompt if cache_prompt is None else cache_prompt
        """Whether this backend's requests reuse the slot's cached prompt prefix (sent with
        every request, so it holds whatever the server's default: a server started with the
        cache for another client, e.g. mem0's extraction calls, still computes these requests
        alone when False)."""
        self.stop_markers = turn_markers(server.props()) if turn_stop else ()
        """Stop strings sent with every request (``EngineOptions.turn_stop``): the chat template's
        turn markers, where a reply that spells one out has ended its turn."""

    def _payload(self, messages: list[ChatMessage], cfg: GenerationConfig) -> dict[str, Any]:
        payload = {**super()._payload(messages, cfg), "cache_prompt": self.cache_prompt}
        if self.stop_markers:
            payload["stop"] = list(dict.fromkeys([*cfg.stop, *self.stop_markers]))
        return payload

    def generate(self, messages: list[ChatMessage], config: GenerationConfig | None = None) -> Generation:
        for _ in range(self.server.threads + 1):  # each cut lowers the threads: at most that many
            with self.server.serving() as restarts:  # the server may change its threads (same port)
                try:
                    return super().generate(messages, config)
                except BackendError:
                    if not self.server.aborted_since(restarts):
                        raise
            log.info("llama.cpp server restarted with %d threads mid-request: sending it again", self.server.threads)
        raise BackendError("the llama.cpp server was restarted under every try of this request; fix its threads "
                           "with --threads N ($TRACELESS_NUM_THREADS) to keep one server for the whole run")

    def endpoint(self) -> Endpoint:
        self.server.share()  # another client will call it over HTTP: never restarted under it
        return super().endpoint()

    def slots(self) -> int:
        return self.server.parallel

    def serving_cache(self) -> LlamaCppServer:
        return self.server

    def describe(self) -> dict[str, Any]:
        engine = {**self.server.engine(), "cache_prompt": self.cache_prompt}
        if self.context_set:
            engine["context"] = self.server.ctx
        if self.stop_markers:  # a reply that spells one out is cut there: part of the identity
            engine["stop"] = list(self.stop_markers)
        if self.server.cache_prompt != self.cache_prompt:
            engine["server_cache_prompt"] = self.server.cache_prompt
        d: dict[str, Any] = {"name": self.name, "backend": "llamacpp", "weights_sha256": self.weights_sha256,
                             "gguf": self.server.gguf_path.name, "engine": engine}
        if self.server.parallel > 1:  # batched slots can change replies: part of the identity
            d["parallel"] = self.server.parallel
        return d

    def close(self) -> None:
        try:
            super().close()
        finally:
            self.server.stop()
