"""A tiny deterministic KV backend for unit tests of the runtime's logic.

It has the ``KVBackend`` surface of ``TransformersBackend`` (chat_token_ids, prefill, decode,
crop with scrubbing, fork, next_token_logits, encode, decode_tokens, kv_tensors) but no neural
network: tokens are words, each cached key/value is a vector computed from a running hash of
the token prefix (so later entries depend on earlier ones, as attention makes them), and a
reply comes from a function ``reply(messages, config, rng) -> str`` of the conversation the
cache holds. Sampling uses a numpy Generator seeded with ``config.seed``.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch

from traceless.errors import BackendError
from traceless.models import ChatMessage, Generation, GenerationConfig, ModelBackend

__all__ = ["ToyKVBackend", "ToyKVState"]

ReplyFn = Callable[[list[ChatMessage], GenerationConfig, np.random.Generator], str]

_SPECIAL = {"<s_system>": 1, "<s_user>": 2, "<s_assistant>": 3, "<eot>": 4, "<nl>": 5}
_ROLE = {v: k[3:-1] for k, v in _SPECIAL.items() if k.startswith("<s_")}
_EOT, _NL = 4, 5
_LAYERS, _DIM = 2, 4


class ToyKVState:
    """Layers of (keys, values) tensors [1, 1, L, D] plus the token ids they cover."""

    def __init__(self) -> None:
        self.layers: list[tuple[torch.Tensor, torch.Tensor]] = [
            (torch.zeros(1, 1, 0, _DIM), torch.zeros(1, 1, 0, _DIM)) for _ in range(_LAYERS)
        ]
        self.token_ids: list[int] = []

    @property
    def length(self) -> int:
        return len(self.token_ids)


class ToyKVBackend(ModelBackend):
    """Words as tokens; replies from a function of the cached conversation."""

    name = "toy-kv"

    def __init__(self, reply: ReplyFn | None = None, *, name: str = "toy-kv") -> None:
        self.name = name
        self._reply: ReplyFn = reply or (lambda msgs, cfg, rng: "ok")
        self._vocab: dict[str, int] = {}
        self._words: dict[int, str] = {}
        self.calls = 0
        self.decoded_tokens = 0
        """Tokens produced by decode (counted where they are fed, inside the backend)."""

    def generate(self, messages: list[ChatMessage], config: GenerationConfig | None = None) -> Generation:
        """The chat interface (``ModelBackend``): prefill the conversation, decode the reply."""
        return self.decode(self.prefill(self.chat_token_ids(messages)), config)[1]

    def counters(self) -> dict[str, int]:
        """What this backend executed so far: generations run and tokens decoded."""
        return {"decode_calls": self.calls, "decoded_tokens": self.decoded_tokens}

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "backend": "toy-kv", "weights_sha256": None}

    @property
    def stop_token_ids(self) -> frozenset[int]:
        return frozenset({_EOT})

    # ---- tokens

    def _id(self, word: str) -> int:
        if word not in self._vocab:
            h = int.from_bytes(hashlib.sha256(word.encode()).digest()[:4], "little") % 10_000_000 + 100
            while h in self._words and self._words[h] != word:
                h += 1
            self._vocab[word], self._words[h] = h, word
        return self._vocab[word]

    def encode(self, text: str) -> list[int]:
        return [self._id(w) for w in re.findall(r"\S+", text)]

    def decode_tokens(self, ids: Sequence[int], skip_special_tokens: bool = False) -> str:
        out: list[str] = []
        inv = {v: k for k, v in _SPECIAL.items()}
        for i in ids:
            if i in inv:
                if not skip_special_tokens:
                    out.append(inv[i])
            else:
                out.append(self._words.get(int(i), "<unk>"))
        return " ".join(out)

    def chat_token_ids(self, messages: list[ChatMessage], add_generation_prompt: bool = True) -> list[int]:
        ids: list[int] = []
        for m in messages:
            ids += [_SPECIAL[f"<s_{m.role if m.role != 'tool' else 'user'}>"], *self.encode(m.content), _EOT, _NL]
        if add_generation_prompt:
            ids.append(_SPECIAL["<s_assistant>"])
        return ids

    def _messages(self, ids: list[int]) -> list[ChatMessage]:
        msgs: list[ChatMessage] = []
        role: str | None = None
        words: list[str] = []
        for i in ids:
            if i in _ROLE:
                role, words = _ROLE[i], []
            elif i == _EOT:
                if role is not None:
                    msgs.append(ChatMessage(role=role, content=" ".join(words)))
                role = None
            elif i != _NL and role is not None:
                words.append(self._words.get(i, "<unk>"))
        return msgs

    # ---- KV

    @staticmethod
    def _vec(prefix_hash: bytes, layer: int, kind: int) -> torch.Tensor:
        h = hashlib.sha256(prefix_hash + bytes([layer, kind])).digest()
        return torch.tensor([b / 255.0 + 0.01 for b in h[:_DIM]], dtype=torch.float32)

    def _as_state(self, state: Any) -> ToyKVState:
        if not isinstance(state, ToyKVState):
            raise BackendError(f"expected a ToyKVState, got {type(state).__name__}")
        return state

    def prefill(self, token_ids: list[int], state: Any = None) -> ToyKVState:
        st = self._as_state(state) if state is not None else ToyKVState()
        for tok in token_ids:
            self._feed(st, int(tok))
        return st

    def _feed(self, st: ToyKVState, tok: int) -> None:
        st.token_ids.append(tok)
        ph = hashlib.sha256(",".join(map(str, st.token_ids)).encode()).digest()
        for li, (k, v) in enumerate(st.layers):
            k2 = torch.cat([k, self._vec(ph, li, 0).view(1, 1, 1, _DIM)], dim=2)
            v2 = torch.cat([v, self._vec(ph, li, 1).view(1, 1, 1, _DIM)], dim=2)
            st.layers[li] = (k2, v2)

    def decode(self, state: Any, config: GenerationConfig | None = None) -> tuple[ToyKVState, Generation]:
        cfg = config or GenerationConfig()
        st = self._as_state(state)
        self.calls += 1
        rng = np.random.default_rng(cfg.seed if cfg.seed is not None else 0)
        text = self._reply(self._messages(st.token_ids), cfg, rng)
        ids = self.encode(text)
        finish = "stop"
        if len(ids) >= cfg.max_new_tokens:
            ids, finish = ids[: cfg.max_new_tokens], "length"
        else:
            ids = ids + [_EOT]
        for t in ids:
            self._feed(st, t)
        self.decoded_tokens += len(ids)
        return st, Generation(text=self.decode_tokens([i for i in ids if i != _EOT]), prompt_tokens=0,
                              completion_tokens=len(ids), finish_reason=finish, model=self.name)

    def crop(self, state: Any, length: int) -> ToyKVState:
        st = self._as_state(state)
        if not 0 <= length <= st.length:
            raise BackendError(f"cannot crop a KV state of length {st.length} to {length}")
        for li, (k, v) in enumerate(st.layers):
            k2, v2 = k[..., :length, :].clone(), v[..., :length, :].clone()
            k.zero_()
            v.zero_()
            st.layers[li] = (k2, v2)
        del st.token_ids[length:]
        return st

    def excise(self, state: Any, start: int, end: int) -> ToyKVState:
        """Remove positions [start, end) from every layer (scrubbing the old storage)."""
        st = self._as_state(state)
        for li, (k, v) in enumerate(st.layers):
            k2 = torch.cat([k[..., :start, :], k[..., end:, :]], dim=2).clone()
            v2 = torch.cat([v[..., :start, :], v[..., end:, :]], dim=2).clone()
            k.zero_()
            v.zero_()
            st.layers[li] = (k2, v2)
        del st.token_ids[start:end]
        return st

    def fork(self, state: Any) -> ToyKVState:
        st = self._as_state(state)
        out = ToyKVState()
        out.layers = [(k.clone(), v.clone()) for k, v in st.layers]
        out.token_ids = list(st.token_ids)
        return out

    def next_token_logits(self, state: Any) -> torch.Tensor:
        """Scores: a large logit on the first token of the reply the function would give."""
        st = self._as_state(state)
        text = self._reply(self._messages(st.token_ids), GenerationConfig(), np.random.default_rng(0))
        ids = self.encode(text)
        size = max([*self._words, 200]) + 1
        logits = torch.zeros(size)
        if ids:
            logits[ids[0]] = 10.0
        return logits

    def kv_tensors(self, state: Any) -> list[tuple[torch.Tensor, torch.Tensor]]:
        return list(self._as_state(state).layers)
