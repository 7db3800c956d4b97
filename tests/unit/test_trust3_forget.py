"""Issue #22 (trust, round 3), items 2, 5, 9, 10, 13, 15 and 16: the forget side.

Each test names the item it covers; each failed on the code before the fix.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
from _cli import cli
from _forget_helpers import CANARY, CANARY_TURN, alice_sessions, bob_sessions, make_writer

from traceless import Memory
from traceless.errors import ConfigError, GateBlockedError
from traceless.forget import (
    MIN_LITERAL_CHARS,
    ForgetTarget,
    Receipt,
    forget,
    load_receipt,
    pseudonym,
    scan_files,
    sign,
)
from traceless.memory import MemoryStore, MemoryWriter, Session, Tier, WriteConfig, compact
from traceless.models import HashingEmbedder

NOT_ERASED_EXIT = 12


@pytest.fixture(autouse=True)
def _home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home"
    monkeypatch.setenv("TRACELESS_HOME", str(home))
    monkeypatch.chdir(tmp_path)  # a forget that names no --receipt writes it here, not in the checkout
    return home


def _jsonl(path: Path, sessions: list[dict[str, object]]) -> Path:
    path.write_text("".join(json.dumps(s) + "\n" for s in sessions), encoding="utf-8")
    return path


def _sess(user: str, sid: str, *texts: str) -> dict[str, object]:
    return {"user_id": user, "session_id": sid, "date": "2024/01/01",
            "turns": [{"role": "user", "content": t} for t in texts]}


def _cli_store(tmp_path: Path, sessions: list[dict[str, object]]) -> Path:
    db = tmp_path / "m.db"
    assert cli("memory", "add", str(_jsonl(tmp_path / "in.jsonl", sessions)), "--db", str(db),
               "--embedder", "hashing") == 0
    return db


def _digest(db: Path) -> str:
    """Checksum of every file of a SQLite store (main, WAL, shm)."""
    h = hashlib.sha256()
    for p in sorted(db.parent.glob(db.name + "*")):
        h.update(p.name.encode() + p.read_bytes())
    return h.hexdigest()


def _turns(user: str, sid: str, *texts: str) -> Session:
    """A session of consecutive user turns (no assistant reply in between)."""
    return Session.model_validate({"user_id": user, "session_id": sid, "date": "2024/01/01",
                                   "turns": [{"role": "user", "content": t} for t in texts]})


# ------------------------------------------------------------------- item 2: the API arms the gate
def test_api_forget_arms_the_gate_like_the_cli(tmp_path: Path) -> None:
    """22.2: ``Memory.forget`` of a literal stores the gate descriptors and the key id, so a
    later ``mem.add`` of a text carrying the literal is refused (before: gate=None, accepted)."""
    with Memory(tmp_path / "m.db", embedder="hashing") as mem:
        mem.add(f"my token is {CANARY}", user="alice")
        r = mem.forget(CANARY, user="alice")
        assert r.gate_descriptors_added > 0 and mem.store.get_meta("gate_key_id")
        before = len(mem.store.artifacts())
        with pytest.raises(GateBlockedError):
            mem.add(f"again: {CANARY}", user="alice")
        assert len(mem.store.artifacts()) == before  # nothing written
        mem.add("harmless text", user="alice")  # the gate refuses only the literal


def test_api_gate_opt_out_is_recorded(tmp_path: Path) -> None:
    """22.2: ``gate=False`` is an explicit opt-out, recorded in the store's event log."""
    with Memory(tmp_path / "m.db", embedder="hashing") as mem:
        mem.add(f"my token is {CANARY}", user="alice")
        r = mem.forget(CANARY, user="alice", gate=False)
        assert r.gate_descriptors_added == 0
        kinds = [k for _, k, _ in mem.store.events()]
        assert "gate_opt_out" in kinds
        assert all("alice" not in d and CANARY not in d for _, _, d in mem.store.events())
        mem.add(f"again: {CANARY}", user="alice")  # not refused: the user opted out


# --------------------------------------------------- items 5, 9: no cross-tenant oracle, shared literals
_GUESS = "hunter2-Correct-Horse"


def _mallory_receipt(tmp_path: Path, name: str, *, bob_holds: bool, mode: str, mallory_holds: bool) -> Receipt:
    """Mallory's own receipt for a guessed value, in a store where bob does or does not hold it."""
    d = tmp_path / name
    d.mkdir()
    store = MemoryStore(d / "m.db")
    w = MemoryWriter(store, embedder=HashingEmbedder(64), config=WriteConfig(levels=()))
    w.write_sessions([_turns("bob", "b1", f"my bank password is {_GUESS}" if bob_holds else "my bank is fine"),
                      _turns("mallory", "m1", f"test {_GUESS}" if mallory_holds else "nothing here", "more")])
    try:
        return forget(store, ForgetTarget.literal(_GUESS, "mallory"), mode, writer=w)
    finally:
        store.close()


def _public(r: Receipt) -> dict[str, Any]:
    """What a receipt tells its reader, less what differs between any two runs."""
    d = r.model_dump(mode="json")
    for k in ("receipt_id", "created_at", "seconds", "signature", "store_id"):
        d.pop(k)
    # sealed under a fresh nonce each run: only its length can tell a reader anything
    d["erased_material"] = len(d.get("erased_material") or "")
    d["verification"]["disk_scan"] = {Path(k).name: n for k, n in d["verification"]["disk_scan"].items()}
    return d


@pytest.mark.parametrize(("mode", "mallory_holds"), [("full_purge", True), ("raw_only", True), ("full_purge", False)],
                         ids=["erasing", "non-erasing", "nothing-matched"])
def test_receipt_is_no_cross_tenant_oracle(tmp_path: Path, mode: str, mallory_holds: bool) -> None:
    """22.5: mallory's receipt for a guessed password reads the same whether or not bob's
    data holds it (before: ``disk_scan`` counted bob's copies, 3 vs 0)."""
    with_bob = _mallory_receipt(tmp_path, "with", bob_holds=True, mode=mode, mallory_holds=mallory_holds)
    without = _mallory_receipt(tmp_path, "without", bob_holds=False, mode=mode, mallory_holds=mallory_holds)
    assert _public(with_bob) == _public(without)
    assert with_bob.verification.disk_scan == {}  # no whole-file count leaves the process
    if mallory_holds:
        assert with_bob.verification.disk_scope == "owner" and with_bob.verification.disk_checked


def test_shared_literal_gives_the_requester_a_passing_receipt(tmp_path: Path) -> None:
    """22.9: alice and bob hold the same literal; alice's forget passes (exit 0, erased), bob's
    copy is out of scope and untouched, and her receipt names neither bob nor his pseudonym
    (before: bob's copy failed her disk scan, exit 11 every time)."""
    db = _cli_store(tmp_path, [_sess("alice", "a1", f"my token is {CANARY}", "I like tea"),
                               _sess("bob", "b1", f"bob's token is {CANARY}")])
    out = tmp_path / "r.json"
    assert cli("forget", "--db", str(db), "--mode", "full_purge", "--literal", CANARY, "--owner", "alice",
               "--receipt", str(out)) == 0
    r = load_receipt(out)
    assert r.verification.passed and r.erased is True and r.verification.disk_held is False
    body = out.read_text(encoding="utf-8")
    assert "bob" not in body and pseudonym("bob") not in body and CANARY not in body
    assert any("out of scope" in line for line in r.summary_lines())
    store = MemoryStore(db)
    assert [a.owner for a in store.containing(CANARY)] == ["bob"] * len(store.containing(CANARY))
    assert store.containing(CANARY)  # bob's copy: not alice's to forget
    store.close()


def test_requester_copy_behind_a_foreign_copy_still_fails(tmp_path: Path) -> None:
    """22.9: bob's copy does not hide alice's own: a mode that leaves alice's summary copy
    reports ``disk_held`` for her, whether or not bob holds the literal."""
    store = MemoryStore(tmp_path / "m.db")
    w = make_writer(store, 1, keep=True)
    w.write_sessions(alice_sessions() + bob_sessions(with_canary=True))
    r = forget(store, ForgetTarget.literal(CANARY, "alice"), "raw_only", writer=w)
    assert r.verification.disk_held is True and r.erased is False
    store.close()


# ------------------------------------------------------------ item 10: no raw record id of an erased user
def test_user_erasure_receipt_lists_no_record_id_in_clear(tmp_path: Path) -> None:
    """22.10: ``verification.sources_removed`` (and every tier list) of a user erasure holds
    keyed pseudonyms only (before: the raw record ids in clear)."""
    store = MemoryStore(tmp_path / "m.db")
    w = make_writer(store, 1, keep=True)
    w.write_sessions(alice_sessions())
    ids = [a.id for a in store.artifacts(owner="alice")]
    r = forget(store, ForgetTarget.user("alice"), "full_purge", writer=w)
    body = r.model_dump_json()
    assert r.verification.sources_removed and all(i.startswith("p:") for i in r.verification.sources_removed)
    assert not [i for i in ids if f'"{i}"' in body]
    store.close()


# ------------------------------------------------------------ item 13: foot-guns and owner identity
@pytest.mark.parametrize("literal", ["in", "the", " a b "])
def test_too_short_literal_refused_before_anything_changes(tmp_path: Path, literal: str) -> None:
    """22.13: a literal shorter than ``MIN_LITERAL_CHARS`` is refused with the threshold and
    its reason, and the store is byte-identical (before: ``in`` committed, then the gate refused
    every text containing 'in')."""
    db = _cli_store(tmp_path, [_sess("alice", "a1", "print the line in the file")])
    before = _digest(db)
    assert cli("forget", "--db", str(db), "--mode", "full_purge", "--literal", literal, "--owner", "alice",
               "--receipt", str(tmp_path / "r.json")) == ConfigError.exit_code
    assert _digest(db) == before and not (tmp_path / "r.json").exists()
    with pytest.raises(ConfigError, match=f"fewer than {MIN_LITERAL_CHARS} characters.*ordinary words"):
        ForgetTarget.literal(literal, "alice")


def test_four_digit_pin_is_long_enough() -> None:
    assert MIN_LITERAL_CHARS == 4
    assert ForgetTarget.literal("4312", "alice").value == "4312"


def test_user_and_owner_contradiction_refused(tmp_path: Path) -> None:
    """22.13: ``--user alice --owner bob`` is an error and changes nothing (before: accepted)."""
    db = _cli_store(tmp_path, [_sess("alice", "a1", "alice text here"), _sess("bob", "b1", "bob text here")])
    before = _digest(db)
    assert cli("forget", "--db", str(db), "--mode", "full_purge", "--user", "alice", "--owner",
               "bob") == ConfigError.exit_code
    assert _digest(db) == before


def test_record_target_needs_its_owner(tmp_path: Path) -> None:
    """22.13: ``--record`` without ``--owner`` is refused and another owner's record is never
    deleted (before: bob's record was deleted by a forget that named no owner)."""
    db = _cli_store(tmp_path, [_sess("alice", "a1", "alice text here"), _sess("bob", "b1", "bob text here")])
    store = MemoryStore(db)
    (bob_raw,) = store.artifacts(owner="bob", tier=Tier.RAW)
    store.close()
    before = _digest(db)
    assert cli("forget", "--db", str(db), "--mode", "full_purge", "--record", bob_raw.id) == ConfigError.exit_code
    assert _digest(db) == before
    # alice naming bob's record matches nothing of hers (exit 7) and leaves it
    assert cli("forget", "--db", str(db), "--mode", "full_purge", "--record", bob_raw.id, "--owner", "alice",
               "--receipt", str(tmp_path / "r1.json")) == 7
    store = MemoryStore(db)
    assert store.exists(bob_raw.id)
    store.close()
    assert cli("forget", "--db", str(db), "--mode", "full_purge", "--record", bob_raw.id, "--owner", "bob",
               "--receipt", str(tmp_path / "r2.json")) == 0
    store = MemoryStore(db)
    assert not store.exists(bob_raw.id)
    store.close()


def test_api_user_contradicting_the_target_owner_refused(tmp_path: Path) -> None:
    with Memory(tmp_path / "m.db", embedder="hashing") as mem:
        mem.add("alice text here", user="alice")
        with pytest.raises(ConfigError, match="contradicts"):
            mem.forget(ForgetTarget.user("alice"), user="bob")


# ------------------------------------------------------------ item 15: near variants under normalized
VARIANTS = {
    "lower": CANARY.lower(),
    "hyphen-to-space": CANARY.replace("-", " "),
    "full-width": "".join(chr(ord(c) + 0xFEE0) if "!" <= c <= "~" else c for c in CANARY),
    "U+2011": CANARY.replace("-", "\u2011"),
    "ZWSP": CANARY[:6] + "\u200b" + CANARY[6:],
    "ZWJ": CANARY[:6] + "\u200d" + CANARY[6:],
    "en-dash": CANARY.replace("-", "\u2013"),
}


def test_compact_form_of_every_variant_is_the_literals() -> None:
    assert {n: compact(v) for n, v in VARIANTS.items()} == dict.fromkeys(VARIANTS, compact(CANARY))
    assert compact("Cafe\u0301") == compact("Café")  # NFD composes


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_normalized_forget_erases_near_variants(tmp_path: Path, name: str) -> None:
    """22.15: ``--match normalized`` erases hyphen→space, U+2011, ZWSP/ZWJ, en-dash, full-width
    and case variants (before: hyphen→space, U+2011, ZWSP, ZWJ and en-dash survived)."""
    store = MemoryStore(tmp_path / "m.db")
    w = MemoryWriter(store, embedder=HashingEmbedder(64), config=WriteConfig(levels=()))
    w.write_sessions([_turns("alice", "a1", f"my token is {VARIANTS[name]} ok", "I like tea")])
    t = ForgetTarget(kind="literal", value=CANARY, owner="alice", match="normalized")
    r = forget(store, t, "full_purge", writer=w)
    texts = [a.text or "" for a in store.artifacts(owner="alice")]
    assert not any(compact(CANARY) in compact(x) for x in texts), texts
    assert "I like tea" in texts
    assert r.verification.passed and r.erased is True
    store.close()


def test_normalized_forget_erases_a_copy_split_across_two_records(store_url: str) -> None:
    """22.15: the two-record split check: a literal split across consecutive turns is cut from
    both (before: left, only counted in ``split_copies``)."""
    store = MemoryStore(store_url)
    w = MemoryWriter(store, embedder=HashingEmbedder(64), config=WriteConfig(levels=()))
    w.write_sessions([_turns("alice", "a1", "hello there", "my token is XQ7-VIO", "LET-3829 and that is all")])
    t = ForgetTarget(kind="literal", value=CANARY, owner="alice", match="normalized")
    r = forget(store, t, "full_purge", writer=w)
    raws = sorted(store.artifacts(owner="alice", tier=Tier.RAW), key=lambda a: a.seq)
    joined = compact("".join(a.text or "" for a in raws))
    assert compact(CANARY) not in joined
    assert [a.text for a in raws] == ["hello there", "my token is", "and that is all"]
    assert r.verification.split_copies == 0 and r.verification.checks["split_clean"] and r.erased is True
    store.close()


def _gated_store(url: str, match: str) -> tuple[MemoryStore, MemoryWriter]:
    store = MemoryStore(url)
    w = MemoryWriter(store, embedder=HashingEmbedder(64), config=WriteConfig(levels=()))
    w.write_sessions([_turns("alice", "a1", CANARY_TURN)])
    t = ForgetTarget(kind="literal", value=CANARY, owner="alice", match=match)  # type: ignore[arg-type]
    forget(store, t, "full_purge", writer=w, gate=True)
    return store, w


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_normalized_gate_refuses_near_variants(store_url: str, name: str) -> None:
    """22.15: a value forgotten with ``match="normalized"`` is refused by the gate in any of
    these variants (before: the gate accepted 8 of 8 near variants)."""
    store, w = _gated_store(store_url, "normalized")
    n = len(store.artifacts())
    with pytest.raises(GateBlockedError):
        w.write_sessions([_turns("alice", "a2", f"note {VARIANTS[name]}")])
    assert len(store.artifacts()) == n
    w.write_sessions([_turns("alice", "a3", "XQ7 is a model number; violet is a colour")])  # not the value
    store.close()


def test_normalized_gate_refuses_a_copy_split_across_turns(store_url: str) -> None:
    store, w = _gated_store(store_url, "normalized")
    n = len(store.artifacts())
    with pytest.raises(GateBlockedError, match="split"):
        w.write_sessions([_turns("alice", "a2", "token part one: XQ7-VIO", "LET-3829 was part two")])
    assert len(store.artifacts()) == n
    w.write_sessions([_turns("alice", "a3", "token part one: XQ7-VIO")])  # half alone: accepted
    with pytest.raises(GateBlockedError, match="split"), store.transaction():  # the other half, later
        store.add(owner="alice", tier=Tier.RAW, kind="turn", text="LET-3829", session_id="a3", seq=9)
    store.close()


def test_exact_gate_keeps_exact_semantics(store_url: str) -> None:
    """Documented: under exact matching (the default, paper 001) variants are accepted."""
    store, w = _gated_store(store_url, "exact")
    w.write_sessions([_turns("alice", "a2", f"note {VARIANTS['hyphen-to-space']}")])
    with pytest.raises(GateBlockedError):
        w.write_sessions([_turns("alice", "a4", f"note {CANARY}")])
    store.close()


# ------------------------------------------------------------ item 16: erased, apart from passed
@pytest.mark.parametrize("mode", ["noop", "raw_only", "exact", "raw_plus_resummarize"])
def test_non_erasing_modes_say_erased_false(store_url: str, mode: str) -> None:
    """22.16: a mode that leaves the literal in a tier it does not claim passes (it did what it
    promises) but says ``erased: false`` (before: only passed=True, reading as a proof)."""
    store = MemoryStore(store_url)
    w = make_writer(store, 1, keep=True)
    w.write_sessions(alice_sessions())
    r = forget(store, ForgetTarget.literal(CANARY, "alice"), mode, writer=w)
    assert r.verification.passed and r.erased is False
    assert store.containing(CANARY, owner="alice")  # the literal is indeed still there
    assert any("NOT ERASED" in line for line in r.summary_lines())
    store.close()


@pytest.mark.parametrize("mode", ["full_purge", "tombstone", "lineage_closure"])
def test_erasing_modes_say_erased_true(store_url: str, mode: str) -> None:
    store = MemoryStore(store_url)
    w = make_writer(store, 1, keep=True)
    w.write_sessions(alice_sessions())
    r = forget(store, ForgetTarget.literal(CANARY, "alice"), mode, writer=w)
    assert r.verification.passed and r.erased is True and not store.containing(CANARY)
    if store.scannable:  # PostgreSQL: the server's files (the receipt says key_destroyed)
        assert not any(scan_files(store.files(), CANARY).values())
    store.close()


def test_cli_exit_status_says_not_erased(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """22.16: the CLI exits 12 (documented) when the mode passed but the literal is still
    present, 0 when it is erased; ``--json`` carries ``erased``."""
    db = _cli_store(tmp_path, [_sess("alice", "a1", f"my token is {CANARY}", "I like tea")])
    capsys.readouterr()
    # the hashing embedder's vector keeps its source text: raw_only leaves it (a stale vector)
    assert cli("forget", "--db", str(db), "--mode", "raw_only", "--literal", CANARY, "--owner", "alice",
               "--receipt", str(tmp_path / "r1.json"), "--json") == NOT_ERASED_EXIT
    out = capsys.readouterr()
    assert json.loads(out.out)["erased"] is False and "NOT ERASED" in out.err
    assert cli("forget", "--db", str(db), "--mode", "full_purge", "--literal", CANARY, "--owner", "alice",
               "--receipt", str(tmp_path / "r2.json")) == 0
    assert load_receipt(tmp_path / "r2.json").erased is True


def test_receipts_without_the_new_fields_still_verify(tmp_path: Path) -> None:
    """A receipt signed before ``erased``/``disk_scope``/``disk_held`` existed keeps verifying:
    the signed payload omits them while they hold their defaults."""
    from traceless.forget import verify_signature

    store = MemoryStore(tmp_path / "m.db")
    w = make_writer(store, 0)
    w.write_sessions(alice_sessions())
    r = forget(store, ForgetTarget.literal(CANARY, "alice"), "full_purge", writer=w)
    store.close()
    d = r.model_dump(mode="json")
    d.pop("erased")
    for k in ("disk_scope", "disk_held"):
        d["verification"].pop(k)
    old = sign(Receipt.model_validate(d))
    raw = json.loads(old.model_dump_json())
    assert raw["erased"] is None  # defaults, as an old receipt reads now
    wire = {k: v for k, v in raw.items() if k != "erased"}
    wire["verification"] = {k: v for k, v in raw["verification"].items() if k not in ("disk_scope", "disk_held")}
    assert verify_signature(Receipt.model_validate(wire))
    tampered = Receipt.model_validate({**wire, "erased": True})
    assert not verify_signature(tampered)  # and the new field, once set, is signed


def test_normalized_forget_and_gate_cover_nfd(store_url: str) -> None:
    """22.15: a literal with accents, stored decomposed (NFD), is erased and then refused."""
    import unicodedata

    lit = "Zürich-Café-4417"
    nfd = unicodedata.normalize("NFD", lit)
    assert nfd != lit and nfd.encode() not in lit.encode()
    store = MemoryStore(store_url)
    w = MemoryWriter(store, embedder=HashingEmbedder(64), config=WriteConfig(levels=()))
    w.write_sessions([_turns("alice", "a1", f"my code is {nfd} ok")])
    t = ForgetTarget(kind="literal", value=lit, owner="alice", match="normalized")
    r = forget(store, t, "full_purge", writer=w, gate=True)
    assert r.erased is True and not any(compact(lit) in compact(a.text or "") for a in store.artifacts())
    with pytest.raises(GateBlockedError):
        w.write_sessions([_turns("alice", "a2", f"again {nfd}")])
    store.close()


def test_certificate_counts_only_the_requesters_copies(tmp_path: Path) -> None:
    """22.5/22.9: the behavioural certificate's store copies are about the requester's data:
    bob's copy of a shared literal neither fails alice's certificate nor shows in it (before:
    ``store_copies["raw"] == 1`` from bob, certificate failed)."""
    from traceless.models import ScriptedBackend

    def quiet(messages: Any, config: Any) -> str:
        return "- likes tea" if "Messages:" in messages[-1].content else "I do not know."

    with Memory(tmp_path / "m.db", embedder="hashing") as mem:
        mem.add(f"my token is {CANARY}", user="alice")
        mem.add(f"bob's token is {CANARY}", user="bob")
        r = mem.forget(CANARY, user="alice", certify=True, model=ScriptedBackend(quiet))
        c = r.certificate
        assert c is not None and c.store_copies and not any(c.store_copies.values())
        assert c.failures() == [] and r.verification.passed and r.erased is True
        assert mem.store.containing(CANARY)  # bob's copy, out of alice's scope


def test_compact_ascii_fast_path_equals_the_unicode_definition() -> None:
    """The ASCII fast path of ``compact``/``compact_spans`` gives what the per-cluster NFKC +
    casefold + separator removal gives (seeded random printable ASCII, separators included)."""
    import random
    import string
    import unicodedata

    from traceless.memory import compact_spans

    def slow(x: str) -> tuple[str, list[tuple[int, int]]]:
        out, where = [], []
        for i, c in enumerate(x):
            for ch in unicodedata.normalize("NFKC", c).casefold():
                if not (ch.isspace() or unicodedata.category(ch) in ("Pd", "Cf")):
                    out.append(ch)
                    where.append((i, i + 1))
        return "".join(out), where

    rng = random.Random(22)
    for _ in range(500):
        x = "".join(rng.choice(string.printable + "\x1c\x1f") for _ in range(rng.randint(0, 40)))
        assert compact(x) == slow(x)[0] and compact_spans(x) == slow(x), repr(x)


@pytest.mark.parametrize("clock, coincidence", [(1758519496.765625, True), (1796134821.25, False),
                                                (1796130000.5, False)])
def test_a_short_literal_that_unrelated_bytes_spell_fails_closed_and_says_why(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, clock: float, coincidence: bool) -> None:
    """A 4-digit pin whose bytes a clock reading spells where the scan cannot attribute them
    (1758519496.765625 is b"A\xda4821\0\0" as the 8-byte REAL of a row's created_at): the
    post-commit byte scan finds it, the receipt does not pass (fail closed), and a warning says
    the match may be a coincidence of a short literal. A reading whose decimal digits spell it
    (1796134821.25 holds "4821") lies in the receipt's own timestamp, at an offset the scan
    recognises (``hex_coincidences``): it passes, as at an unrelated reading."""
    import struct
    import time

    from _forget_helpers import session

    from traceless.forget import ForgetTarget, forget

    assert (b"4821" in struct.pack(">d", clock)) is coincidence and ("4821" in repr(clock)) is (clock == 1796134821.25)
    monkeypatch.setattr(time, "time", lambda: clock)
    store = MemoryStore(str(tmp_path / "m.db"))
    w = make_writer(store, 0)
    w.write_sessions([session("alice", "s1", ["my pin is 4821"])])
    r = forget(store, ForgetTarget.literal("4821", "alice", "pin"), "full_purge", writer=w, gate=True)
    store.close()
    assert r.verification.passed is (not coincidence)
    assert any("may be a coincidence" in x for x in r.warnings) is coincidence


def test_receipt_lines_name_whose_counts_they_are(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 36.6: the printed receipt never says an ambiguous ``left=`` (read as the requester's
    records or as everyone's), says ``bystanders_intact=`` where the receipt checked other users'
    records, and ``forget verify`` / ``forget receipts`` print no ``erased=-`` for a receipt that
    records no erasure verdict (a memory system's receipt)."""
    from traceless.forget import write_receipt

    db = _cli_store(tmp_path, [_sess("alice", "a1", f"my token is {CANARY}", "I like tea"),
                               _sess("bob", "b1", "bob likes coffee")])
    out = tmp_path / "r.json"
    capsys.readouterr()
    assert cli("forget", "--db", str(db), "--mode", "full_purge", "--literal", CANARY, "--owner", "alice",
               "--receipt", str(out)) == 0
    printed = capsys.readouterr().out
    assert "removed=" in printed and "requester_untouched=" in printed and " left=" not in printed
    r = load_receipt(out)
    checks = {**r.verification.checks, "bystanders_intact": True}
    system_like = sign(r.model_copy(update={"erased": None, "verification": r.verification.model_copy(
        update={"checks": checks})}))
    assert any(line.strip().startswith("bystanders_intact=True") for line in system_like.summary_lines())
    sys_path = tmp_path / "sys.json"
    write_receipt(system_like, sys_path)
    capsys.readouterr()
    assert cli("forget", "verify", str(sys_path)) == 0
    assert "erased=" not in capsys.readouterr().out
