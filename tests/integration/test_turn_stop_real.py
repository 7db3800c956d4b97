"""On a real llama.cpp server (smollm2 135M): a stop string keeps the plain greedy reply up to
it, token for token, and decodes fewer tokens; ``EngineOptions.turn_stop`` sends the chat
template's turn markers and leaves a reply that writes none unchanged (issue #27 item 2)."""

from __future__ import annotations

import pytest

from traceless.models import EngineOptions, load_backend
from traceless.models._base import ChatMessage, GenerationConfig

pytestmark = [pytest.mark.integration, pytest.mark.slow]

MODEL = "llamacpp:smollm2-135m-instruct"
ASK = [ChatMessage(role="user", content="Name the days of the week, one per line, then say which one you like.")]


def test_a_stop_keeps_the_plain_reply_before_it_and_turn_stop_changes_no_plain_reply() -> None:
    pytest.importorskip("xllamacpp")
    be = load_backend(MODEL, engine=EngineOptions(threads=1))
    try:
        plain = be.generate(ASK, GenerationConfig(max_new_tokens=48))
        assert len(plain.text) > 20 and plain.completion_tokens > 8
        at = len(plain.text) // 2
        stop = plain.text[at:at + 5]
        stopped = be.generate(ASK, GenerationConfig(max_new_tokens=48, stop=(stop,)))
    finally:
        be.close()
    assert stopped.text == plain.text[:plain.text.index(stop)]
    assert stopped.completion_tokens < plain.completion_tokens
    assert stopped.finish_reason == "stop"
    marked = load_backend(MODEL, engine=EngineOptions(threads=1, turn_stop=True))
    try:
        again = marked.generate(ASK, GenerationConfig(max_new_tokens=48))
        identity = marked.describe()["engine"]
    finally:
        marked.close()
    assert "<|im_end|>" in identity["stop"] and "<|im_start|>" in identity["stop"]
    assert "<|im_start|>" not in plain.text and "<|im_end|>" not in plain.text
    assert (again.text, again.completion_tokens) == (plain.text, plain.completion_tokens)
