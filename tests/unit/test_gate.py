"""Paper 001's sealed exact-literal write gate: exact bytes only, no normalisation."""

from __future__ import annotations

import json
import stat
import unicodedata
from pathlib import Path

import pytest
from _forget_helpers import CANARY, alice_sessions, make_writer, session

from traceless.errors import GateBlockedError
from traceless.forget import ForgetTarget, forget
from traceless.memory import MemoryStore, MemoryWriter, WriteConfig, WriteGate, load_key

pytestmark = pytest.mark.usefixtures("_home")  # TRACELESS_HOME in this test's tmp dir (conftest)


def _gated(where: str, *, enabled: bool = True, level: int = 1) -> tuple[MemoryStore, MemoryWriter]:
    store = MemoryStore(where)
    writer = make_writer(store, level, keep=True)
    writer.gate = WriteGate(enabled=enabled)
    writer.write_sessions(alice_sessions())
    r = forget(store, ForgetTarget.literal(CANARY, "alice", attribute="session token"), "full_purge",
               writer=writer, gate=WriteGate())
    assert r.gate_descriptors_added == 2
    return store, writer


def _count(store: MemoryStore) -> tuple[int, int]:
    n_art = len(store.artifacts())
    n_edges = sum(len(store.parents(a.id)) for a in store.artifacts())
    return n_art, n_edges


def test_key_created_on_first_use_0600(_home: Path) -> None:
    p = _home / "gate.key"
    assert not p.exists()
    g = WriteGate()
    assert p.exists() and stat.S_IMODE(p.stat().st_mode) == 0o600
    assert len(p.read_bytes()) == 32
    assert load_key() == p.read_bytes()
    # same key → same descriptors across instances; another key → different ones
    macs = [e.mac for e in g.descriptors("a", "b")]
    assert [e.mac for e in WriteGate().descriptors("a", "b")] == macs
    assert [e.mac for e in WriteGate(b"z" * 32).descriptors("a", "b")] != macs


def test_descriptors_never_hold_the_value(store_url: str) -> None:
    store, _ = _gated(store_url)
    stored = store.gate_descriptors("alice")
    assert len(stored) == 2
    blob = repr(sorted(stored))
    assert CANARY not in blob and CANARY.lower() not in blob


@pytest.mark.parametrize("text", [
    f"my private session token is {CANARY}",
    CANARY,
    f"prefix{CANARY}suffix",
])
def test_exact_literal_write_blocked_nothing_written(store_url: str, text: str) -> None:
    store, writer = _gated(store_url)
    before = _count(store)
    digests = {a.id: a.digest for a in store.artifacts()}
    sessions = [session("alice", "s9", ["harmless turn about the dog"]),
                session("alice", "s10", ["hello", text])]
    with pytest.raises(GateBlockedError, match="Nothing was written"):
        writer.write_sessions(sessions)
    assert _count(store) == before  # not even the harmless session before it
    assert {a.id: a.digest for a in store.artifacts()} == digests
    assert not store.containing(CANARY)


@pytest.mark.parametrize("variant", [
    CANARY.lower(),                                   # case
    CANARY.replace("-", " - "),                      # whitespace
    CANARY.replace("-", "  -", 1),                    # extra space
    "XQ7-VIOLET-3829".replace("X", "\uff38"),        # fullwidth X: NFKC-equal, bytes differ
    CANARY.replace("-", "\u2011"),                    # non-breaking hyphen
    "XQ7-VIOLET-382",                                 # prefix only
])
def test_variants_not_blocked(store_url: str, variant: str) -> None:
    store, writer = _gated(store_url)
    assert variant != CANARY
    if "\uff38" in variant:
        assert unicodedata.normalize("NFKC", variant) == CANARY
    before = len(store.artifacts())
    rep = writer.write_sessions([session("alice", "s9", [f"my token is {variant}"])])
    assert rep.raw and len(store.artifacts()) > before
    assert store.containing(variant)


def test_gate_is_per_owner(store_url: str) -> None:
    store, writer = _gated(store_url)
    rep = writer.write_sessions([session("bob", "b1", [f"bob's token {CANARY}"])])
    assert rep.raw


def test_gate_off_allows(store_url: str) -> None:
    store, writer = _gated(store_url, enabled=False)
    assert store.gate_descriptors("alice")  # descriptors were stored anyway
    rep = writer.write_sessions([session("alice", "s9", [f"token {CANARY}"])])
    assert rep.raw and store.containing(CANARY, owner="alice")
    # gate off never stops the deletion itself
    r = forget(store, ForgetTarget.literal(CANARY, "alice"), "full_purge", writer=writer,
               gate=WriteGate(enabled=False))
    assert r.verification.passed and not store.containing(CANARY)


def test_summary_chunk_carrying_literal_blocked(store_url: str) -> None:
    """The raw turns are clean, but the summarizer composes the literal: still refused,
    and nothing of the session is written."""
    store, writer = _gated(store_url)
    from traceless.models import ScriptedBackend

    writer.summarizer = ScriptedBackend(default=f"- token {CANARY}")
    before = _count(store)
    with pytest.raises(GateBlockedError):
        writer.write_sessions([session("alice", "s9", ["XQ7 VIOLET and 3829 are my favourite words"])])
    assert _count(store) == before


def test_consolidation_gated(store_url: Path) -> None:
    store = MemoryStore(store_url)
    writer = make_writer(store, 0, extractive=True)
    writer.write_sessions(alice_sessions())
    forget(store, ForgetTarget.literal(CANARY, "alice"), "full_purge", writer=writer, gate=WriteGate())
    with store.ungated("test: the user re-consented once"):  # the literal is back in a raw record
        MemoryWriter(store, embedder=writer.embedder, config=WriteConfig(levels=())).write_sessions(
            [session("alice", "s8", [CANARY])])
    n = len(store.artifacts())
    with pytest.raises(GateBlockedError):
        writer.consolidate("alice")
    assert len(store.artifacts()) == n


def test_consolidation_blocked_before_sessions_are_written(store_url: str) -> None:
    """With extractive consolidation on, a gated literal still in older raw records blocks
    the new consolidation: the new (clean) session must not be half-written first."""
    store = MemoryStore(store_url)
    writer = make_writer(store, 1, extractive=True)
    writer.write_sessions(alice_sessions())
    forget(store, ForgetTarget.literal(CANARY, "alice"), "full_purge", writer=writer, gate=WriteGate())
    with store.ungated("test: the user re-consented once"):  # the literal is back in a raw record
        MemoryWriter(store, embedder=writer.embedder, config=WriteConfig(levels=())).write_sessions(
            [session("alice", "s8", [CANARY])])
    before = _count(store)
    with pytest.raises(GateBlockedError):
        writer.write_sessions([session("alice", "s9", ["a perfectly clean turn about tea"])])
    assert _count(store) == before
    # another owner is unaffected
    assert writer.write_sessions([session("bob", "b1", ["clean"])]).raw


def test_structured_candidate_exact_pair() -> None:
    g = WriteGate(b"k" * 32)
    stored = set(g.descriptors("session token", CANARY))
    pair = json.dumps({"attribute": "session token", "value": CANARY})
    assert g.check_candidate(pair, stored)
    # escaped JSON is parsed strictly, then compared byte-exactly: still the same pair
    escaped = '{"attribute": "session token", "value": "XQ7\\u002dVIOLET-3829"}'
    assert CANARY not in escaped and g.check_candidate(escaped, stored)
    with pytest.raises(GateBlockedError):
        g.enforce("alice", pair, stored)
    # not the same pair: value differs by case / NFKC / whitespace
    for v in (CANARY.lower(), CANARY.replace("X", "\uff38"), f"{CANARY[:3]} {CANARY[3:]}"):
        assert not g.check_candidate(json.dumps({"attribute": "session token", "value": v}), stored)
    # attribute differs by case and the value differs: no match
    assert not g.check_candidate(json.dumps({"attribute": "Session Token", "value": CANARY.lower()}), stored)
    # pair check alone is exact on the attribute
    assert g.check_pair("session token", CANARY, stored)
    assert not g.check_pair("Session token", CANARY, stored)
    assert not g.check_pair("session token ", CANARY, stored)
    # disabled gate never raises
    WriteGate(b"k" * 32, enabled=False).enforce("alice", pair, stored)
    # nothing stored → nothing blocked
    assert not g.check_candidate(pair, set())


def test_unicode_literal_exact_bytes() -> None:
    g = WriteGate(b"k" * 32)
    lit = "café-Ω-٣"  # non-ASCII, multi-byte
    stored = set(g.descriptors("secret", lit))
    assert g.check_text(f"x {lit} y", stored)
    assert not g.check_text(unicodedata.normalize("NFD", lit), stored)
    assert not g.check_text("CAFÉ-Ω-٣", stored)
