"""``EngineOptions.turn_stop``: a llama.cpp reply is stopped where it spells out a turn marker of
its chat template (issue #27 item 2). Off by default (no stop sent, identity as before); on,
the template's markers are sent as stop strings and recorded in the identity. No model: the
server child is the loopback stub of tests/unit/_stub_llamacpp.py, which echoes the stop list."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from tests.unit._stub_llamacpp import STUB_CHILD

from traceless.models import EngineOptions
from traceless.models import _llamacpp_server as srv_mod
from traceless.models._base import ChatMessage, GenerationConfig


def test_turn_markers_come_from_the_template_and_the_eos_token() -> None:
    from traceless.models._llamacpp_server import turn_markers

    chatml = "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
    assert turn_markers({"chat_template": chatml, "eos_token": "<|endoftext|>"}) == (
        "<|endoftext|>", "<|im_end|>", "<|im_start|>")
    gemma = "<start_of_turn>user\n{{ m }}<end_of_turn>\n"
    assert turn_markers({"chat_template": gemma, "bos_token": "<bos>"}) == ("<end_of_turn>", "<start_of_turn>")
    assert turn_markers({}) == ()


def _backend(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, **engine: Any) -> Any:
    from traceless.models import _load

    monkeypatch.setattr(srv_mod, "_CHILD", STUB_CHILD)
    gguf = tmp_path / "w.gguf"
    gguf.write_bytes(b"GGUF")
    return _load.load_backend(f"llamacpp:{gguf}", engine=EngineOptions(threads=1, **engine))


def _stop_sent(be: Any, *stop: str) -> Any:
    g = be.generate([ChatMessage(role="user", content="hi")], GenerationConfig(max_new_tokens=8, stop=stop))
    return json.loads(g.text.split("stop=", 1)[1])


def test_turn_stop_sends_the_markers_and_records_them(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    be = _backend(monkeypatch, tmp_path, turn_stop=True)
    try:
        assert _stop_sent(be) == ["<|im_end|>", "<|im_start|>"]
        assert _stop_sent(be, "\n\n") == ["\n\n", "<|im_end|>", "<|im_start|>"]
        assert be.describe()["engine"]["stop"] == ["<|im_end|>", "<|im_start|>"]
    finally:
        be.close()


def test_off_by_default_nothing_sent_and_the_identity_as_before(monkeypatch: pytest.MonkeyPatch,
                                                                tmp_path: Path) -> None:
    be = _backend(monkeypatch, tmp_path)
    try:
        assert _stop_sent(be) is None
        assert "stop" not in be.describe()["engine"]
    finally:
        be.close()
