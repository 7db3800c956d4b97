"""A forget mode declares the models it needs (issue #25.5); the CLI supplies what the mode
declares instead of deciding by the mode's name."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path

import pytest

from traceless.cli._forget import _writer_for
from traceless.forget import FORGET_MODES, ForgetMode, forget_mode
from traceless.memory import MemoryStore, MemoryWriter, Session, Turn, WriteConfig
from traceless.models import HashingEmbedder


@pytest.fixture
def declared() -> Iterator[tuple[str, str]]:
    """Two third-party-style modes: one declares an embedder, one declares none."""
    names = ("test_needs_embedder", "test_needs_nothing")
    forget_mode(names[0], help="test mode", needs_embedder=True)(lambda op: None)
    forget_mode(names[1], help="test mode", needs_embedder=False)(lambda op: None)
    yield names
    for n in names:
        FORGET_MODES._entries.pop(n)  # the registry keeps no test modes


def test_needs_are_declared_fields_not_derived_from_the_name() -> None:
    fields = {f.name for f in dataclasses.fields(ForgetMode)}
    assert {"needs_embedder", "needs_summarizer", "uses_recorded_summarizer"} <= fields
    # the built-ins declare what the old name rule gave them (behaviour unchanged)
    for name in FORGET_MODES.names():
        mode = FORGET_MODES.get(name)
        assert mode.needs_embedder == (name not in ("noop", "raw_only")), name
        assert mode.uses_recorded_summarizer == (name == "lineage_closure"), name


def test_the_cli_supplies_what_the_mode_declares(tmp_path: Path, declared: tuple[str, str]) -> None:
    with MemoryStore(tmp_path / "m.db") as store:
        MemoryWriter(store, embedder=HashingEmbedder(), config=WriteConfig(levels=())).write_sessions(
            [Session(user_id="u1", session_id="s1", turns=[Turn(role="user", content="I swim on Mondays")])])
        with_emb = _writer_for(store, FORGET_MODES.get(declared[0]), None, None)
        without = _writer_for(store, FORGET_MODES.get(declared[1]), None, None)
    assert isinstance(with_emb.embedder, HashingEmbedder) and with_emb.embedder.dim == 256
    assert without.embedder is None and without.summarizer is None
