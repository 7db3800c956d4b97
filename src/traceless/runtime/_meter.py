"""What the model backend actually executed, counted below the operators.

An operator reports its own ``Cost``; a check that compares that self-report with the paper's
T−τ+1 bound can be satisfied by an operator that miscounts. The meter counts at the backend
instead: every ``prefill`` and ``decode`` call that reaches the model, the tokens it ran, and —
where the backend keeps its own counters (``counters()``, as the toy backend does) — the decode
calls and forward tokens the backend itself executed, including work it does internally.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

__all__ = ["Executed", "MeteredBackend"]


class Executed(BaseModel):
    """Model work executed by the backend (a difference of two readings is the work in between)."""

    decode_calls: int = 0
    """Generations the backend ran (one per decoded reply or summary)."""
    decoded_tokens: int = 0
    """Tokens the backend decoded."""
    prefill_tokens: int = 0
    """Tokens the backend ran as prompt (prefill calls plus prompt tokens a decode recomputed)."""
    native: bool = False
    """True when decode_calls and decoded_tokens come from the backend's own counters."""

    def minus(self, other: Executed) -> Executed:
        return Executed(decode_calls=self.decode_calls - other.decode_calls,
                        decoded_tokens=self.decoded_tokens - other.decoded_tokens,
                        prefill_tokens=self.prefill_tokens - other.prefill_tokens, native=self.native)


class MeteredBackend:
    """A transparent proxy of a KV backend that counts the model work passing through it."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self._decode_calls = 0
        self._decoded = 0
        self._prefill = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def prefill(self, token_ids: list[int], state: Any = None) -> Any:
        self._prefill += len(token_ids)
        return self.inner.prefill(token_ids, state)

    def decode(self, state: Any, config: Any = None) -> Any:
        n0 = state.length
        out = self.inner.decode(state, config)
        self._decode_calls += 1
        self._decoded += out[0].length - n0
        self._prefill += int(getattr(out[1], "prompt_tokens", 0) or 0)
        return out

    def executed(self) -> Executed:
        """The current reading: native counters when the backend has them, else the boundary's."""
        native = getattr(self.inner, "counters", None)
        if callable(native):
            c = native()
            return Executed(decode_calls=int(c["decode_calls"]), decoded_tokens=int(c["decoded_tokens"]),
                            prefill_tokens=self._prefill, native=True)
        return Executed(decode_calls=self._decode_calls, decoded_tokens=self._decoded, prefill_tokens=self._prefill)
