"""What the agent sees, per memory view, and probing a view in one batch.

Views (used by ``traceless audit`` and the frontier study):

* ``agent`` at summarization level S: S=0 reads raw user turns; S=1 reads key-fact
  chunks; S=2 reads one-sentence session summaries (paper 000 §2.1).
* ``raw`` / ``summary``: the agent's context built only from that tier's surviving
  artifacts (summary = level-S summaries). FRS_t (paper 000 §2.4) is the extraction rate
  under the tier-t view after deletion; at S=0 there is no summary tier, so FRS_summary=0.
"""

from __future__ import annotations

from traceless.agent import Agent, AgentConfig, AgentReply
from traceless.memory import KIND_BY_LEVEL, MemoryStore, Tier
from traceless.models import Embedder, GenerationConfig, ModelBackend

__all__ = ["VIEWS", "view_config", "probe_view"]

VIEWS = ("agent", "raw", "summary")


def view_config(view: str, S: int, k: int, generation: GenerationConfig) -> AgentConfig | None:
    """AgentConfig for a view, or None when the view is empty by construction."""
    if view == "agent":
        view = "raw" if S == 0 else "summary"
    if view == "raw":
        return AgentConfig(k=k, tiers=(Tier.RAW,), kinds=("turn",), generation=generation)
    if view == "summary":
        if S == 0:
            return None
        return AgentConfig(k=k, tiers=(Tier.SUMMARY,), kinds=(KIND_BY_LEVEL[S],), generation=generation)
    raise ValueError(f"unknown view {view!r}; views: {', '.join(VIEWS)}")


def probe_view(
    model: ModelBackend, store: MemoryStore, embedder: Embedder, owner: str, config: AgentConfig,
    queries: list[str],
) -> list[AgentReply]:
    """Ask every query of one view; one backend batch so a shared memory prefix is reused."""
    agent = Agent(model, store, owner=owner, embedder=embedder, config=config)
    return agent.respond_batch(queries)
