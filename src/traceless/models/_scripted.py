"""Deterministic scripted backend for unit tests (in the spirit of inspect_ai's mockllm).

Replies come from a queue of strings, or from a function of the messages. Token counts
are whitespace word counts, so accounting is predictable in tests.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Iterable

from traceless.errors import BackendError
from traceless.models._base import ChatMessage, Generation, GenerationConfig, ModelBackend

__all__ = ["ScriptedBackend"]

ReplyFn = Callable[[list[ChatMessage], GenerationConfig], str]


class ScriptedBackend(ModelBackend):
    """Replies from a queue (consumed in order) or a function ``(messages, config) -> str``."""

    def __init__(
        self,
        replies: Iterable[str] | ReplyFn | None = None,
        *,
        name: str = "scripted",
        default: str | None = None,
    ) -> None:
        self.name = name
        self._fn: ReplyFn | None = replies if callable(replies) else None
        self._queue: deque[str] = deque() if callable(replies) or replies is None else deque(replies)
        self._default = default
        self.calls: list[list[ChatMessage]] = []

    def generate(self, messages: list[ChatMessage], config: GenerationConfig | None = None) -> Generation:
        cfg = config or GenerationConfig()
        t0 = time.perf_counter()
        self.calls.append(list(messages))
        if self._fn is not None:
            text = self._fn(messages, cfg)
        elif self._queue:
            text = self._queue.popleft()
        elif self._default is not None:
            text = self._default
        else:
            raise BackendError(
                "scripted backend ran out of replies; give it more replies, a default=, or a function"
            )
        for s in cfg.stop:
            if s and s in text:
                text = text[: text.index(s)]
        words = text.split()
        finish = "stop"
        if len(words) > cfg.max_new_tokens:
            text = " ".join(words[: cfg.max_new_tokens])
            finish = "length"
        prompt_tokens = sum(len(m.content.split()) for m in messages)
        dt = time.perf_counter() - t0
        return Generation(
            text=text,
            prompt_tokens=prompt_tokens,
            completion_tokens=min(len(words), cfg.max_new_tokens),
            total_seconds=dt,
            finish_reason=finish,
            model=self.name,
        )
