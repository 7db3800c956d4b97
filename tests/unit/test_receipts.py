"""Signed forget receipts: signature, tamper evidence, no literal inside, nothing-matched."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest
from _forget_helpers import CANARY, alice_sessions, make_writer

from traceless.errors import NothingMatchedError, ReceiptError, UnknownNameError
from traceless.forget import (
    FORGET_MODES,
    ForgetTarget,
    Receipt,
    forget,
    load_receipt,
    receipt_key,
    sign,
    verify_signature,
    write_receipt,
)
from traceless.memory import MemoryStore, MemoryWriter, WriteGate

MODES = FORGET_MODES.names()


pytestmark = pytest.mark.usefixtures("_home")  # TRACELESS_HOME in this test's tmp dir (conftest)


@pytest.fixture
def built(store_url: str) -> tuple[MemoryStore, MemoryWriter]:
    store = MemoryStore(store_url)
    writer = make_writer(store, 1, keep=True, extractive=True)
    writer.write_sessions(alice_sessions())
    return store, writer


@pytest.mark.parametrize("mode", MODES)
def test_receipt_signed_and_free_of_literal(built: tuple[MemoryStore, MemoryWriter], mode: str,
                                            tmp_path: Path) -> None:
    store, writer = built
    r = forget(store, ForgetTarget.literal(CANARY, "alice"), mode, writer=writer, gate=WriteGate())
    assert r.signature and verify_signature(r)
    dumped = r.model_dump_json()
    assert CANARY not in dumped and CANARY.encode("unicode_escape").decode() not in dumped
    assert r.target.kind == "literal" and r.target.ref.startswith("hmac:")
    # the copy stored in the database: signed too, and literal-free
    ((rid, body),) = store.receipts()
    assert rid == r.receipt_id and CANARY not in body
    stored = Receipt.model_validate_json(body)
    assert verify_signature(stored)
    # file round trip
    path = write_receipt(r, tmp_path / "r.json")
    assert CANARY not in path.read_text(encoding="utf-8")
    loaded = load_receipt(path)
    assert verify_signature(loaded) and loaded == r


def test_receipt_of_record_target_has_no_literal(built: tuple[MemoryStore, MemoryWriter]) -> None:
    store, writer = built
    raw = [a for a in store.containing(CANARY, owner="alice") if a.tier.value == "raw"][0]
    r = forget(store, ForgetTarget.record(raw.id), "lineage_closure", writer=writer)
    assert r.matched and r.target.ref == raw.id
    assert CANARY not in r.model_dump_json()


def test_tampering_flips_signature(built: tuple[MemoryStore, MemoryWriter]) -> None:
    store, writer = built
    r = forget(store, ForgetTarget.literal(CANARY, "alice"), "full_purge", writer=writer)
    assert verify_signature(r)
    assert not verify_signature(r.model_copy(update={"matched": False}))
    assert not verify_signature(r.model_copy(update={"mode": "noop"}))
    tiers = {k: v.model_copy(update={"removed": [*v.removed, "r-99999999"]}) for k, v in r.tiers.items()}
    assert not verify_signature(r.model_copy(update={"tiers": tiers}))
    v = r.verification.model_copy(update={"passed": not r.verification.passed})
    assert not verify_signature(r.model_copy(update={"verification": v}))
    assert not verify_signature(r.model_copy(update={"signature": "0" * 64}))
    # another key does not verify it; re-signing with the right key does
    assert not verify_signature(r, b"k" * 32)
    assert verify_signature(sign(r.model_copy(update={"mode": "noop"})))


def test_tampered_file_does_not_verify(built: tuple[MemoryStore, MemoryWriter], tmp_path: Path) -> None:
    store, writer = built
    r = forget(store, ForgetTarget.literal(CANARY, "alice"), "tombstone", writer=writer)
    p = write_receipt(r, tmp_path / "r.json")
    d = json.loads(p.read_text())
    d["verification"]["passed"] = False
    p.write_text(json.dumps(d))
    assert not verify_signature(load_receipt(p))
    p.write_text("{not json")
    with pytest.raises(ReceiptError):
        load_receipt(p)


def test_nothing_matched(built: tuple[MemoryStore, MemoryWriter]) -> None:
    store, writer = built
    before = {a.id: a.digest for a in store.artifacts()}
    r = forget(store, ForgetTarget.literal("NOT-IN-MEMORY-0000", "alice"), "full_purge", writer=writer)
    assert r.matched is False and verify_signature(r)
    assert {a.id: a.digest for a in store.artifacts()} == before
    assert [i for i, _ in store.receipts()] == [r.receipt_id]
    # another owner's data never matches
    r2 = forget(store, ForgetTarget.literal(CANARY, "mallory"), "full_purge", writer=writer)
    assert r2.matched is False
    assert {a.id: a.digest for a in store.artifacts()} == before
    r3 = forget(store, ForgetTarget.record("r-77777777"), "exact", writer=writer)
    assert r3.matched is False


def test_strict_nothing_matched_raises_after_storing_receipt(built: tuple[MemoryStore, MemoryWriter]) -> None:
    store, writer = built
    n = len(store.receipts())
    with pytest.raises(NothingMatchedError, match="receipt rcpt-"):
        forget(store, ForgetTarget.session("no-such-session", "alice"), "exact", writer=writer, strict=True)
    assert len(store.receipts()) == n + 1
    stored = Receipt.model_validate_json(store.receipts()[-1][1])
    assert stored.matched is False and verify_signature(stored)


def test_unknown_mode_lists_modes(built: tuple[MemoryStore, MemoryWriter]) -> None:
    store, writer = built
    before = {a.id: a.digest for a in store.artifacts()}
    with pytest.raises(UnknownNameError) as ei:
        forget(store, ForgetTarget.literal(CANARY, "alice"), "shred", writer=writer)
    msg = str(ei.value)
    assert "'shred'" in msg
    for m in MODES:
        assert m in msg
    assert {a.id: a.digest for a in store.artifacts()} == before and store.receipts() == []


def test_receipt_key_created_0600(_home: Path) -> None:
    assert not (_home / "receipt.key").exists()
    k = receipt_key()
    p = _home / "receipt.key"
    assert len(k) == 32 and stat.S_IMODE(p.stat().st_mode) == 0o600
    assert receipt_key() == k  # stable


def test_receipt_digests_are_keyed(built: tuple[MemoryStore, MemoryWriter]) -> None:
    """Tier digests in receipts are HMACs: the plain digest of the before-state (an oracle
    for guessing the forgotten text) does not appear."""
    store, writer = built
    from traceless.memory import Tier

    plain = store.tier_digest("alice", Tier.RAW)
    r = forget(store, ForgetTarget.literal(CANARY, "alice"), "full_purge", writer=writer)
    assert r.tiers["raw"].digest_before != plain
    assert r.tiers["raw"].digest_before != r.tiers["raw"].digest_after
    assert r.tiers["cache"].digest_before == r.tiers["cache"].digest_after


def test_truncated_or_open_key_refused(_home: Path) -> None:
    from traceless.errors import ConfigError

    _home.mkdir(parents=True, exist_ok=True)
    p = _home / "receipt.key"
    p.write_bytes(b"short")
    p.chmod(0o600)
    with pytest.raises(ConfigError, match="truncated"):
        receipt_key()
    p.write_bytes(b"x" * 32)
    p.chmod(0o644)
    with pytest.raises(ConfigError, match="chmod 600"):
        receipt_key()
