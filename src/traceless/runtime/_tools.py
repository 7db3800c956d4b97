"""Tools of the runtime: a stateful environment with snapshots, a parser for tool calls in
replies, and shadow execution with call-id deduplication during replay (paper 002: consequential
tools are shadow-executed and deduplicated so side effects never repeat)."""

from __future__ import annotations

import copy
import hashlib
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from traceless.runtime._types import ToolCall

__all__ = ["ToolSpec", "ToolEnv", "parse_tool_calls", "call_id"]

ToolFn = Callable[[Any, str], str]


@dataclass(frozen=True)
class ToolSpec:
    """One tool: name, whether it has side effects, a one-line description, its function
    ``fn(state, args) -> result`` (it may mutate ``state``)."""

    name: str
    consequential: bool
    description: str
    fn: ToolFn


@dataclass
class ToolEnv:
    """Tools plus the mutable world they act on, and the log of committed calls."""

    tools: dict[str, ToolSpec]
    state: Any = None
    committed: list[ToolCall] = field(default_factory=list)
    shadow_log: list[ToolCall] = field(default_factory=list)

    @classmethod
    def of(cls, tools: list[ToolSpec], state: Any = None) -> ToolEnv:
        return cls({t.name: t for t in tools}, state)

    def snapshot(self) -> ToolEnv:
        """An independent copy of the world (for shadow execution and reference runs)."""
        return ToolEnv(dict(self.tools), copy.deepcopy(self.state), list(self.committed), [])

    def describe(self) -> str:
        return "\n".join(f"- {t.name}(...): {t.description}" for t in self.tools.values())

    def committed_ids(self) -> set[str]:
        return {c.call_id for c in self.committed}

    def execute(self, call: ToolCall, *, replay: bool, shadow_state: Any = None) -> ToolCall:
        """Run a call. Live: consequential calls are committed to ``committed``. Replay: a call
        whose id was already committed is deduplicated (recorded result, no side effect);
        any other consequential call runs on ``shadow_state`` (a snapshot) and is logged as
        shadow, never committed."""
        spec = self.tools[call.tool]
        if replay:
            prior = next((c for c in self.committed if c.call_id == call.call_id), None)
            if prior is not None:
                out = call.model_copy(update={"status": "deduplicated", "result": prior.result})
                self.shadow_log.append(out)
                return out
            if spec.consequential:
                target = shadow_state if shadow_state is not None else copy.deepcopy(self.state)
                out = call.model_copy(update={"status": "shadow", "result": _run(spec, target, call.args)})
                self.shadow_log.append(out)
                return out
            return call.model_copy(update={"status": "shadow", "result": _run(spec, copy.deepcopy(self.state), call.args)})
        result = _run(spec, self.state, call.args)
        out = call.model_copy(update={"status": "committed" if spec.consequential else "pending", "result": result})
        if spec.consequential:
            self.committed.append(out)
        return out


def _run(spec: ToolSpec, state: Any, args: str) -> str:
    try:
        return str(spec.fn(state, args))
    except Exception as e:  # noqa: BLE001 - a tool error is an observation, not a crash
        return f"error: {type(e).__name__}: {e}"


def call_id(episode_id: str, step: int, tool: str, args: str) -> str:
    """Deterministic call id: the same call at the same step of the same episode."""
    norm = " ".join(args.split())
    return hashlib.sha256(f"{episode_id}|{step}|{tool}|{norm}".encode()).hexdigest()[:16]


def parse_tool_calls(text: str, tools: dict[str, ToolSpec], *, episode_id: str, step: int) -> list[ToolCall]:
    """Every ``name(args)`` in ``text`` whose name is a known tool, in order."""
    if not tools:
        return []
    names = "|".join(re.escape(n) for n in sorted(tools, key=len, reverse=True))
    out: list[ToolCall] = []
    for m in re.finditer(rf"\b({names})\s*\(([^()]*)\)", text):
        name, args = m.group(1), m.group(2).strip()
        out.append(
            ToolCall(
                call_id=call_id(episode_id, step, name, args),
                tool=name,
                args=args,
                step=step,
                consequential=tools[name].consequential,
            )
        )
    return out
