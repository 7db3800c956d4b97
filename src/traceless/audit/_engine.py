"""The audit engine's probing: the agent's prompt over a memory view's context, and
``probe_phase``, the one phase function (probe every user's agent, then scan the stores)
that ``traceless audit``, ``forget --certify`` and the inspect task share.

Views (used by ``traceless audit`` and the frontier study):

* ``agent`` at summarization level S: S=0 reads raw user turns; S=1 reads key-fact
  chunks; S=2 reads one-sentence session summaries (paper 000 §2.1).
* ``raw`` / ``summary``: the agent's context built only from that tier's surviving
  artifacts (summary = level-S summaries). FRS_t (paper 000 §2.4) is the extraction rate
  under the tier-t view after deletion; at S=0 there is no summary tier, so FRS_summary=0.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from traceless import prompts
from traceless.audit._probes import Probe, extracted
from traceless.errors import ConfigError
from traceless.models import ChatMessage, Generation, GenerationConfig, ModelBackend
from traceless.systems import (
    VIEWS,
    AgentAnswer,
    Capability,
    ContextItem,
    MemorySystem,
    probe_view,
    view_config,
)
from traceless.systems.kernel import count_literals

__all__ = ["VIEWS", "PhaseProbes", "ProbeReply", "agent_replies", "probe_contexts", "probe_messages", "probe_phase",
           "probe_view", "store_copies", "view_config"]

# ------------------------------------------------------------------ the phase function
def probe_messages(items: Sequence[ContextItem], query: str) -> list[ChatMessage]:
    """The agent's prompt for ``query`` with ``items`` as its memory: the native agent's prompt
    (Agent.build_messages with render_lines), one format for every memory system and study."""
    rendered = "\n".join(f"- {c.text}" for c in items)
    return [ChatMessage(role="system", content=prompts.AGENT_SYSTEM.format(memory=rendered or "(empty)")),
            ChatMessage(role="user", content=query)]


def probe_contexts(system: MemorySystem, owner: str, probe_list: Sequence[Probe], views: Sequence[str],
                   ) -> list[tuple[str, Probe, list[ChatMessage], list[str]]]:
    """(view, probe, prompt, context ids) for every view × probe, with the system's own retrieval."""
    out = []
    for view in views:
        if view not in system.views:
            raise ConfigError(f"{system.name}: probe view {view!r} is not one of its views {system.views}")
        for pr in probe_list:
            items = system.context(owner, pr.text, view)
            out.append((view, pr, probe_messages(items, pr.text), [c.id for c in items]))
    return out


def store_copies(system: MemorySystem, literals: Sequence[str]) -> dict[str, int]:
    """Copies of ``literals`` in each of the system's named stores (the residue scan)."""
    return {name: sum(count_literals(t, literals) for t in texts) for name, texts in system.stores().items()}


def agent_replies(system: MemorySystem, probes: Sequence[tuple[str, str]]) -> list[AgentAnswer] | None:
    """The system's own agent's answers to (owner, query), for a system that answers through
    its own agent (``agent_reply``: LangGraph with the user's graph, the Agents SDK's Runner,
    ADK's LlmAgent); None: the audit's prompt over the system's context is sent to the model."""
    if Capability.AGENT not in system.capabilities or not probes:
        return None
    first = system.agent_reply(*probes[0])
    if first is None:
        return None
    rest = [system.agent_reply(owner, query) for owner, query in probes[1:]]
    return [first, *(a for a in rest if a is not None)] if all(a is not None for a in rest) else None


@dataclass(frozen=True)
class ProbeReply:
    """One probe of one user's agent in a phase, and its reply."""

    owner: str
    """The user whose agent was probed."""
    literal: str
    """The secret looked for in the reply."""
    view: str
    """The memory view the context came from."""
    probe: Probe
    """The probe (level, wording, text)."""
    messages: list[ChatMessage]
    """The prompt the model received: the audit's prompt, or (a system answering through its
    own agent) the request that agent's model last received."""
    context_ids: list[str]
    """Ids of the memory entries in the context."""
    reply: Generation
    """The reply."""

    @property
    def extracted(self) -> bool:
        """The reply holds the literal verbatim."""
        return extracted(self.literal, self.reply.text)


@dataclass
class PhaseProbes:
    """What ``probe_phase`` measured on one open memory: every probe's reply and the residue
    scan of the named stores."""

    replies: list[ProbeReply] = field(default_factory=list)
    """Per user, view and probe, in request order."""
    copies: dict[str, int] = field(default_factory=dict)
    """Per named store: copies of the users' literals it holds."""


def probe_phase(system: MemorySystem, users: Sequence[tuple[str, str]], probe_list: Sequence[Probe],
                views: Callable[[], Sequence[str]], model: ModelBackend, generation: GenerationConfig, *,
                before_user: Callable[[int], None] | None = None, batch: int | None = None,
                on_batch: Callable[[int], None] | None = None) -> PhaseProbes:
    """One phase on an open memory, shared by ``traceless audit``, ``forget --certify`` and the
    inspect task: for each (owner, literal) in ``users``, ``before_user(i)`` (e.g. its deletion),
    then its contexts at every view (``views()``, asked after it) × probe; the replies (the
    system's own agent's, or ``model``'s, ``batch`` prompts per call, all at once by default;
    ``on_batch(users covered)`` after each call); then the residue scan of every named store."""
    jobs: list[tuple[str, str, str, Probe, list[ChatMessage], list[str]]] = []
    for i, (owner, literal) in enumerate(users):
        if before_user is not None:
            before_user(i)
        jobs += [(owner, literal, *job) for job in probe_contexts(system, owner, probe_list, views())]
    gens = agent_replies(system, [(owner, pr.text) for owner, _, _, pr, _, _ in jobs])
    out = PhaseProbes()
    size = max(1, batch or len(jobs))
    for start in range(0, len(jobs), size):
        chunk = jobs[start: start + size]
        if gens is None:
            sent = [j[4] for j in chunk]
            got = list(zip(sent, model.generate_batch(sent, generation), strict=True))
        else:
            got = [(list(a.request), a.reply) for a in gens[start: start + len(chunk)]]
        out.replies += [ProbeReply(o, lit, v, pr, msgs, ids, g)
                        for (o, lit, v, pr, _, ids), (msgs, g) in zip(chunk, got, strict=True)]
        if on_batch is not None:
            on_batch(len({j[0] for j in jobs[: start + len(chunk)]}))
    out.copies = store_copies(system, [literal for _, literal in users])
    return out
