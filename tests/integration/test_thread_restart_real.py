"""On a real llama.cpp server (smollm2 135M): a thread change during the run restarts the
server on the same port between requests, and the greedy reply after it is the one before it,
text and decoded tokens (issue #27 item 1; the CPU readings are injected)."""

from __future__ import annotations

import pytest

from traceless.models import load_backend
from traceless.models._base import ChatMessage, GenerationConfig
from traceless.models._cpu import ThreadAdapter

pytestmark = [pytest.mark.integration, pytest.mark.slow]

ASK = [ChatMessage(role="user", content="Name three colours and say which one you like best.")]


def test_a_thread_change_restarts_the_real_server_on_its_port_with_the_same_replies() -> None:
    pytest.importorskip("xllamacpp")
    be = load_backend("llamacpp:smollm2-135m-instruct", num_threads=1)
    server = be.server
    readings = iter([2.0, 1.0])  # 2 CPUs free, then 1
    server.adapter = ThreadAdapter(1, lambda: next(readings, None), max_threads=2, interval=0, persist=1,
                                   cooldown=0)
    cfg = GenerationConfig(max_new_tokens=32)
    try:
        url = server.address
        one = be.generate(ASK, cfg)  # 2 free: restarted with 2 before this request
        two = be.generate(ASK, cfg)  # 1 free: back to 1
        assert server.address == url and server.is_running()
    finally:
        be.close()
    assert [(o, n) for o, n, _ in server.thread_changes] == [(1, 2), (2, 1)]
    assert (one.text, one.completion_tokens) == (two.text, two.completion_tokens) and one.completion_tokens > 4
