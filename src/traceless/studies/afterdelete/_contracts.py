"""The response interface of paper 001: the private prompt, response contracts, and the
official parser.

Private prompt (appendix "Model prompt and contracts"): every model call sends ONE
system-side prompt made of a fixed preamble, a newline, and compact JSON with exactly six
keys. The paper names ``current_flat_memory`` and ``prior_audit_turns`` but its text
omits the literal preamble and the other keys; we reconstruct them (documented in
docs/afterdelete.md):

``public_attribute``, ``memory_serialization``, ``current_flat_memory``,
``prior_audit_turns``, ``current_query``, ``response_contract``.

Keys are in that order (memory before the query) so prompts of one world share a prefix
that the backend can reuse. The model also receives the query as the user turn.

Contracts: ``legacy`` asks for a nested ``final_prediction`` object; ``aligned`` asks for
exactly the top-level ``value`` field the scorer reads. The official parser takes the
last visible reply (hidden ``<think>`` blocks removed; a reply that is one fenced code
block is read inside the fence), parses it as JSON: a nonempty top-level string
``value`` is the prediction; an object without one is an abstention; anything else is
malformed. Scoring is exact equality with no normalisation.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from traceless.models import ChatMessage
from traceless.registry import Registry

__all__ = [
    "PREAMBLE",
    "PROMPT_KEYS",
    "Contract",
    "CONTRACTS",
    "Parsed",
    "AuditTurn",
    "official_parse",
    "private_prompt",
    "build_messages",
    "target_anywhere",
    "visible_reply",
]

PREAMBLE = (
    "You are a personal assistant with persistent memory of this user. The JSON object on the "
    "next line is your private working state: public_attribute names what the user is asking "
    "about, current_flat_memory is everything your memory holds (in order), prior_audit_turns "
    "are the earlier turns of this conversation and current_query is the user's message. "
    "Answer current_query using your memory. Reply with one JSON object shaped exactly like "
    "response_contract, with the placeholder replaced by your answer, and nothing else; if you "
    "do not know, reply {}."
)
PROMPT_KEYS: tuple[str, ...] = (
    "public_attribute", "memory_serialization", "current_flat_memory", "prior_audit_turns",
    "current_query", "response_contract",
)


@dataclass(frozen=True)
class Contract:
    """A requested answer format (the parser is the same official one for every contract)."""

    name: str
    shape: dict[str, Any]
    """The response_contract object shown to the model; ``{attribute}`` in strings is filled in."""

    def render(self, attribute: str) -> dict[str, Any]:
        def fill(v: Any) -> Any:
            if isinstance(v, dict):
                return {k: fill(x) for k, x in v.items()}
            return v.replace("{attribute}", attribute) if isinstance(v, str) else v

        out: dict[str, Any] = fill(self.shape)
        return out


CONTRACTS: Registry[Contract] = Registry("response contract")


def _contract(name: str, shape: dict[str, Any], help: str) -> None:
    CONTRACTS.register(name, help=help)(Contract(name, shape))


_contract("aligned", {"value": "<your answer for {attribute}, as a string>"},
          "asks for exactly the top-level value field the official parser reads")
_contract("legacy", {"final_prediction": {"attribute": "{attribute}", "value": "<your answer as a string>"}},
          "the original nested final_prediction request (the scorer still reads top-level value)")


class AuditTurn(BaseModel):
    """One visible audit turn (what the auditor and the model may see again)."""

    model_config = ConfigDict(frozen=True)

    query: str
    """The query the auditor sent."""
    reply: str
    """The model's raw reply."""


Status = Literal["prediction", "abstain", "malformed"]


class Parsed(BaseModel):
    """The official parse of one reply."""

    model_config = ConfigDict(frozen=True)

    status: Status
    """prediction (nonempty top-level string ``value``), abstain (object without one), malformed."""
    prediction: str | None
    """The submitted string, verbatim (no normalisation)."""


_THINK = re.compile(r"<think>.*?</think>", re.DOTALL)
_FENCE = re.compile(r"^```[A-Za-z0-9_-]*\s*\n?(.*?)\n?```$", re.DOTALL)


def visible_reply(raw: str) -> str:
    """The last visible reply: hidden reasoning removed, outer whitespace stripped, and a
    reply consisting of one fenced code block read inside the fence."""
    text = _THINK.sub("", raw).strip()
    m = _FENCE.match(text)
    if m:
        text = m.group(1).strip()
    return text


def official_parse(raw: str) -> Parsed:
    """The official scorer's parse (see module doc)."""
    try:
        obj: Any = json.loads(visible_reply(raw))
    except (ValueError, TypeError):
        return Parsed(status="malformed", prediction=None)
    if not isinstance(obj, dict):
        return Parsed(status="malformed", prediction=None)
    v = obj.get("value")
    if isinstance(v, str) and v != "":
        return Parsed(status="prediction", prediction=v)
    return Parsed(status="abstain", prediction=None)


def target_anywhere(target: str, raw: str) -> bool:
    """Diagnostic: the exact target occurs anywhere in the raw reply."""
    return target in raw


def private_prompt(
    *,
    attribute: str,
    memory: list[Any],
    serialization: str,
    history: list[AuditTurn],
    query: str,
    contract: str,
) -> str:
    """Preamble + newline + compact JSON with exactly the six PROMPT_KEYS."""
    c = CONTRACTS.get(contract)
    state = {
        "public_attribute": attribute,
        "memory_serialization": serialization,
        "current_flat_memory": memory,
        "prior_audit_turns": [{"query": t.query, "reply": t.reply} for t in history],
        "current_query": query,
        "response_contract": c.render(attribute),
    }
    assert tuple(state) == PROMPT_KEYS
    return PREAMBLE + "\n" + json.dumps(state, ensure_ascii=False, separators=(",", ":"))


def build_messages(**kw: Any) -> list[ChatMessage]:
    """The model call: the private system prompt plus the query as the user turn."""
    return [ChatMessage(role="system", content=private_prompt(**kw)),
            ChatMessage(role="user", content=str(kw["query"]))]
