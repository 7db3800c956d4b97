"""A traceless ``ModelBackend`` over the inspect model of the running eval.

traceless's memory writers, agents and auditors are synchronous and call
``ModelBackend.generate_batch``; inspect's models are async. The solver runs that
synchronous code in a worker thread (``anyio.to_thread``), and this backend hands every
call back to the event loop (``anyio.from_thread``), so each generation is inspect's own:
the ``--model`` chosen on the command line, its cache, its limits and its log events.
"""

from __future__ import annotations

import time
from typing import Any

import anyio.from_thread
from inspect_ai.model import ChatMessageAssistant, ChatMessageSystem, ChatMessageUser, GenerateConfig, Model

from traceless.models import ChatMessage, Generation, GenerationConfig, ModelBackend

__all__ = ["InspectBackend", "to_inspect_messages"]


def to_inspect_messages(messages: list[ChatMessage]) -> list[Any]:
    """traceless chat turns as inspect chat messages (tool turns do not occur here)."""
    kinds = {"system": ChatMessageSystem, "user": ChatMessageUser, "assistant": ChatMessageAssistant}
    return [kinds[m.role](content=m.content) for m in messages]


def generate_config(config: GenerationConfig) -> GenerateConfig:
    """The same decoding settings in inspect's terms (greedy at temperature 0)."""
    return GenerateConfig(max_tokens=config.max_new_tokens, temperature=config.temperature, top_p=config.top_p,
                          seed=config.seed, stop_seqs=list(config.stop) or None)


class InspectBackend(ModelBackend):
    """Generations by inspect's ``model``; call it only from a worker thread of the eval."""

    def __init__(self, model: Model) -> None:
        self.model = model
        self.name = str(model)

    def generate(self, messages: list[ChatMessage], config: GenerationConfig | None = None) -> Generation:
        cfg = config or GenerationConfig()
        t0 = time.perf_counter()
        out = anyio.from_thread.run(self._generate, to_inspect_messages(messages), generate_config(cfg))
        usage = out.usage
        return Generation(
            text=out.completion, prompt_tokens=usage.input_tokens if usage else 0,
            completion_tokens=usage.output_tokens if usage else 0, total_seconds=time.perf_counter() - t0,
            finish_reason="length" if out.stop_reason == "max_tokens" else "stop", model=self.name,
        )

    async def _generate(self, messages: list[Any], config: GenerateConfig) -> Any:
        return await self.model.generate(messages, config=config)

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "backend": "inspect"}
