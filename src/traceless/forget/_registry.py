"""The registry of forget modes: ``@forget_mode(...)`` and ``FORGET_MODES``.

Kept apart from ``forget()`` and the store so that listing the modes (``traceless forget
modes``, ``--help``) imports neither numpy nor the memory store (issue #13.4). The built-in
modes are a default plug-in (``DEFAULT_MODES``): ``traceless.forget._modes`` registers them
with the public ``@forget_mode``, as a third-party package does, and the registry imports it
the first time it is used, before the entry points (``traceless.registry``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from traceless.memory import Tier
from traceless.registry import ENTRY_POINT_GROUPS, Registry

if TYPE_CHECKING:
    from traceless.forget._forget import ForgetOp

__all__ = ["ForgetMode", "FORGET_MODES", "forget_mode"]


@dataclass(frozen=True)
class ForgetMode:
    """A registered mode: its function, the tiers it claims to clear, and what it needs."""

    name: str
    fn: Callable[[ForgetOp], None]
    claims: tuple[Tier, ...]
    help: str
    needs_summarizer: bool = False
    """Always re-summarizes: the caller must supply a summarizer model."""
    needs_embedder: bool = False
    """Re-embeds what it rewrites: the caller supplies the store's embedder (when it holds vectors)."""
    uses_recorded_summarizer: bool = False
    """Rebuilds LLM summaries with the summarizer recorded in the store's lineage, when there is one."""
    closure: bool = False  # claims: no descendant of a removed source survives
    gates: bool = True  # stores write-gate descriptors for a literal (the noop control does not)

    @property
    def erases_everywhere(self) -> bool:
        """Claims every text tier: the literal must be gone from the live files too."""
        return Tier.SUMMARY in self.claims and Tier.RAW in self.claims


DEFAULT_MODES = ("traceless.forget._modes",)
"""The modules that register the built-in modes (loaded like plug-ins, in this order)."""

FORGET_MODES: Registry[ForgetMode] = Registry("forget mode", hint="list them with `traceless forget modes`",
                                               entry_points=ENTRY_POINT_GROUPS["forget mode"],
                                               defaults=DEFAULT_MODES)


def forget_mode(
    name: str, *, claims: Iterable[Tier] = (), help: str, needs_summarizer: bool = False,
    needs_embedder: bool = False, uses_recorded_summarizer: bool = False, closure: bool = False, gates: bool = True,
) -> Callable[[Callable[[ForgetOp], None]], Callable[[ForgetOp], None]]:
    """Register a forget mode: ``@forget_mode("x", claims=(Tier.RAW,), help="...")``; a mode
    declares the models it needs (``needs_embedder``, ``needs_summarizer``,
    ``uses_recorded_summarizer``) and callers supply exactly those."""

    def deco(fn: Callable[[ForgetOp], None]) -> Callable[[ForgetOp], None]:
        FORGET_MODES.register(name, help=help, module=fn.__module__)(
            ForgetMode(name, fn, tuple(claims), help, needs_summarizer=needs_summarizer,
                       needs_embedder=needs_embedder, uses_recorded_summarizer=uses_recorded_summarizer,
                       closure=closure, gates=gates)
        )
        return fn

    return deco

