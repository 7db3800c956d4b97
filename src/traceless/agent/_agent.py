"""The agent: retrieve, render memory into the system prompt, generate."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from traceless import prompts
from traceless.memory import (
    Artifact,
    MemoryStore,
    Tier,
    memory_entries,
    render_ledger,
    render_lines,
)
from traceless.models import ChatMessage, Embedder, Generation, GenerationConfig, ModelBackend

__all__ = ["AgentConfig", "Agent", "AgentReply"]


class AgentConfig(BaseModel):
    """How the agent reads memory."""

    model_config = ConfigDict(frozen=True)

    read: Literal["retrieve", "full"] = "retrieve"
    """``retrieve``: cosine top-k (paper 000); ``full``: the whole ordered memory (paper 001)."""
    k: int = Field(3, ge=0)
    """Retrieval breadth (chunks injected) when ``read='retrieve'``."""
    tiers: tuple[Tier, ...] = (Tier.RAW,)
    """Tiers the agent reads from."""
    kinds: tuple[str, ...] | None = None
    """Artifact kinds it reads (e.g. ``("key_facts",)`` for S=1); None = all kinds in ``tiers``."""
    render: Literal["lines", "ledger"] = "lines"
    """Serialization of memory in the prompt: bullet lines or a JSON fact ledger."""
    generation: GenerationConfig = GenerationConfig(max_new_tokens=96)
    """Decoding settings for replies."""
    system_template: str = prompts.AGENT_SYSTEM
    """System prompt; ``{memory}`` is replaced by the rendered memory."""


class AgentReply(BaseModel):
    """A reply with the context that produced it."""

    text: str
    """The model's reply."""
    context_ids: list[str]
    """Artifact ids injected (evaluator-side; never shown to the model)."""
    messages: list[ChatMessage]
    """The exact prompt sent."""
    generation: Generation
    """Backend accounting (tokens, timing)."""


class Agent:
    """``Agent(model, memory, owner=..., embedder=...).respond(query)``."""

    def __init__(
        self,
        model: ModelBackend,
        memory: MemoryStore,
        *,
        owner: str,
        embedder: Embedder | None = None,
        config: AgentConfig | None = None,
    ) -> None:
        self.model = model
        self.memory = memory
        self.owner = owner
        self.embedder = embedder
        self.config = config or AgentConfig()
        if self.config.read == "retrieve" and self.config.k > 0 and embedder is None:
            raise ValueError("retrieval needs an embedder; pass embedder= or use AgentConfig(read='full')")

    def context(self, query: str) -> list[Artifact]:
        """The memory entries that would be injected for ``query``."""
        cfg = self.config
        if cfg.read == "full":
            return memory_entries(self.memory, self.owner, tiers=cfg.tiers, kinds=cfg.kinds)
        if cfg.k == 0:
            return []
        assert self.embedder is not None
        q = self.embedder.embed([query])[0]
        hits = self.memory.search(self.owner, q, cfg.k, tiers=cfg.tiers, kinds=cfg.kinds)
        return [h.artifact for h in hits if h.artifact.text and h.artifact.text.strip()]

    def build_messages(self, query: str, context: list[Artifact] | None = None,
                       history: list[ChatMessage] | None = None) -> tuple[list[ChatMessage], list[Artifact]]:
        ctx = self.context(query) if context is None else context
        rendered = render_ledger(ctx) if self.config.render == "ledger" else render_lines(ctx)
        system = self.config.system_template.format(memory=rendered or "(empty)")
        msgs = [ChatMessage(role="system", content=system), *(history or []),
                ChatMessage(role="user", content=query)]
        return msgs, ctx

    def respond(self, query: str, *, history: list[ChatMessage] | None = None) -> AgentReply:
        msgs, ctx = self.build_messages(query, history=history)
        gen = self.model.generate(msgs, self.config.generation)
        return AgentReply(text=gen.text, context_ids=[a.id for a in ctx], messages=msgs, generation=gen)

    def respond_batch(self, queries: list[str]) -> list[AgentReply]:
        """Answer several queries in one backend batch (shared memory prefix is reused)."""
        built = [self.build_messages(q) for q in queries]
        gens = self.model.generate_batch([m for m, _ in built], self.config.generation)
        return [
            AgentReply(text=g.text, context_ids=[a.id for a in c], messages=m, generation=g)
            for (m, c), g in zip(built, gens, strict=True)
        ]
