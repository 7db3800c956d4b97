"""Issue #10: the erasure claims hold against a careful user and an attacker.

Each test names the item it covers; each failed on the code before the fix.
"""

from __future__ import annotations

import json
import os
import sqlite3
import stat
from pathlib import Path
from typing import Any

import pytest
from _cli import cli
from _forget_helpers import CANARY, alice_sessions, make_writer, other_writer, session

from traceless import _hooks
from traceless.errors import (
    ConfigError,
    DuplicateSessionError,
    GateBlockedError,
    GateKeyError,
    InputFormatError,
    ReceiptError,
    StoreLockedError,
)
from traceless.forget import (
    ForgetTarget,
    Receipt,
    forget,
    load_receipt,
    pseudonym,
    scan_files,
    verify_signature,
)
from traceless.memory import SCHEMA_VERSION, MemoryStore, MemoryWriter, WriteConfig, read_sessions
from traceless.models import HashingEmbedder

pytestmark = pytest.mark.usefixtures("_home")  # TRACELESS_HOME in this test's tmp dir (conftest)




def _jsonl(path: Path, sessions: list[dict[str, object]]) -> Path:
    path.write_text("".join(json.dumps(s) + "\n" for s in sessions), encoding="utf-8")
    return path


def _sess(user: str, sid: str, *texts: str, date: str = "2024/01/01") -> dict[str, object]:
    return {"user_id": user, "session_id": sid, "date": date,
            "turns": [{"role": "user", "content": t} for t in texts]}


def _pg(db: Path | str) -> bool:
    return str(db).startswith("postgresql://")


def _files_hold(db: Path | str, literal: str) -> int:
    """Copies of ``literal`` in a SQLite store's files (main, WAL, shm, journal); a
    PostgreSQL store's files are the server's (test_store_postgres scans a pg_dump)."""
    assert not _pg(db), "no files of a PostgreSQL store to scan here"
    db = Path(db)
    return sum(scan_files([p for p in db.parent.glob(db.name + "*")], literal).values())


def _disk_clean(db: Path | str, literal: str) -> bool:
    return _pg(db) or _files_hold(db, literal) == 0


def _rows(db: Path | str, sql: str) -> list[tuple[object, ...]]:
    """Rows read past the store, with the engine's own client."""
    if _pg(db):
        import psycopg

        with psycopg.connect(str(db)) as c:
            return [tuple(r) for r in c.execute(sql).fetchall()]
    conn = sqlite3.connect(db)
    try:
        return [tuple(r) for r in conn.execute(sql)]
    finally:
        conn.close()


def _state(db: Path | str) -> list[tuple[object, ...]] | None:
    """Every artifact row; None while there is no store (no file, or no tables yet)."""
    if not _pg(db) and not Path(db).exists():
        return None
    if _pg(db) and not _rows(db, "SELECT 1 FROM pg_tables WHERE tablename = 'artifacts'"):
        return None
    # a kill during the store's creation leaves a file without tables: nothing was written
    if not _pg(db) and not _rows(db, "SELECT 1 FROM sqlite_master WHERE name = 'artifacts'"):
        return None
    # or with some of its migrations applied (each is one transaction): nothing is written
    # before the last one, so the artifacts table is there and empty
    applied = _rows(db, "SELECT count(*) FROM _migrations")[0][0]
    if applied < SCHEMA_VERSION:
        assert _rows(db, "SELECT count(*) FROM artifacts") == [(0,)], f"rows written at schema version {applied}"
        return None
    return _rows(db, "SELECT id, owner, text, digest, sealed FROM artifacts ORDER BY id")


# ------------------------------------------------------------------ 1. gate on every write path
def test_cli_memory_add_refuses_a_forgotten_literal(tmp_path: Path, store_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    db = store_url
    first = _jsonl(tmp_path / "a.jsonl", [_sess("u1", "s1", "hello there", f"my token is {CANARY}")])
    assert cli("memory", "add", str(first), "--db", db, "--embedder", "hashing") == 0
    rc = cli("forget", "--db", db, "--mode", "full_purge", "--literal", CANARY, "--owner", "u1",
             "--receipt", str(tmp_path / "r.json"))
    assert rc == 0 and _disk_clean(db, CANARY)
    before = _state(db)
    again = _jsonl(tmp_path / "b.jsonl", [_sess("u1", "s2", "harmless"), _sess("u1", "s3", CANARY)])
    capsys.readouterr()
    rc = cli("memory", "add", str(again), "--db", db, "--embedder", "hashing")
    err = capsys.readouterr().err
    assert rc == GateBlockedError.exit_code
    assert "'u1'" in err and "'secret'" in err and CANARY not in err  # names owner + attribute, never the value
    assert _state(db) == before and _disk_clean(db, CANARY)  # nothing written, no bytes on disk
    # writing without the gate is an explicit choice, and it is recorded
    assert cli("memory", "add", str(again), "--db", db, "--embedder", "hashing", "--no-gate") == 0
    with MemoryStore(db) as store:
        assert store.containing(CANARY, owner="u1")
        assert [k for _, k, _ in store.events()] == ["ungated_write"]


def test_store_enforces_the_gate_without_any_writer(tmp_path: Path, store_url: str) -> None:
    store = MemoryStore(store_url)
    make_writer(store, 0).write_sessions(alice_sessions())
    forget(store, ForgetTarget.literal(CANARY, "alice"), "full_purge", writer=make_writer(store, 0), gate=True)
    from traceless.memory import Tier

    with pytest.raises(GateBlockedError), store.transaction():
        store.add(owner="alice", tier=Tier.CACHE, kind="note", text=f"x{CANARY}y")
    plain = MemoryWriter(store, config=WriteConfig(levels=(), embed=False))  # no gate passed
    with pytest.raises(GateBlockedError):
        plain.write_sessions([session("alice", "s9", [CANARY])])
    assert not store.containing(CANARY)


# ------------------------------------------------------------------ 2. fail closed on another key
@pytest.mark.parametrize("change", ["deleted", "other_key"])
def test_gate_fails_closed_when_the_key_changes(tmp_path: Path, store_url: str, _home: Path, change: str) -> None:
    db = store_url
    with MemoryStore(db) as store:
        make_writer(store, 0).write_sessions(alice_sessions())
        forget(store, ForgetTarget.literal(CANARY, "alice"), "full_purge", writer=make_writer(store, 0), gate=True)
    key = _home / "gate.key"
    key.unlink()
    if change == "other_key":
        key.write_bytes(os.urandom(32))
        key.chmod(0o600)
    with MemoryStore(db) as store:
        before = _state(db)
        with pytest.raises(GateKeyError, match="gate.key"):
            make_writer(store, 0).write_sessions([session("alice", "s9", [f"again {CANARY}"])])
        with pytest.raises(GateKeyError):
            make_writer(store, 0).write_sessions([session("alice", "s10", ["harmless"])])
    assert _state(db) == before and not (change == "deleted" and key.exists())


# ------------------------------------------------------------------ 3. passed = every check
def test_secret_in_session_id_and_date_is_erased_or_fails(tmp_path: Path, store_url: str) -> None:
    secret = "café-ZK9-ëlan"  # non-ASCII: JSON would have stored it as \u00e9 escapes
    db = store_url
    store = MemoryStore(db)
    w = make_writer(store, 0)
    w.write_sessions([session("alice", f"trip-{secret}", [f"note {secret} here", "other"], date=f"met {secret}")])
    r = forget(store, ForgetTarget.literal(secret, "alice"), "full_purge", writer=w)
    store.close()
    assert r.verification.metadata_scan == {} and r.verification.passed
    if not _pg(db):
        assert _files_hold(db, secret) == 0
        raw = b"".join(p.read_bytes() for p in Path(db).parent.glob(Path(db).name + "*"))
        assert secret.encode("unicode_escape").replace(b"\\x", b"\\u00") not in raw


def test_byte_scan_sees_json_escapes(tmp_path: Path) -> None:
    f = tmp_path / "blob"
    f.write_bytes(json.dumps({"date": "café-ë"}).encode())  # ensure_ascii: caf\u00e9-\u00eb
    assert scan_files([f], "café-ë")[str(f)] == 1
    f.write_bytes(b'"caf\\u00E9-\\u00EB"')
    assert scan_files([f], "café-ë")[str(f)] == 1


def test_failed_verification_exits_nonzero(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "m.db"
    assert cli("memory", "add", str(_jsonl(tmp_path / "a.jsonl", [_sess("u1", "s1", f"t {CANARY}", "x")])),
               "--db", str(db), "--embedder", "hashing") == 0
    reader = sqlite3.connect(db, isolation_level=None)
    reader.execute("BEGIN")
    reader.execute("SELECT count(*) FROM artifacts").fetchone()
    try:
        rc = cli("forget", "--db", str(db), "--mode", "full_purge", "--literal", CANARY, "--owner", "u1",
                 "--receipt", str(tmp_path / "r.json"))
    finally:
        reader.execute("COMMIT")
        reader.close()
    assert rc == 11 and "FAILED" in capsys.readouterr().err
    r = load_receipt(tmp_path / "r.json")
    assert not r.verification.passed and r.verification.checks["disk_clean"] is False
    assert cli("forget", "verify", str(tmp_path / "r.json")) == 11


# ------------------------------------------------------------------ 4. add: atomic, idempotent
def _failing_embedder(fail_on: str) -> HashingEmbedder:
    class Failing(HashingEmbedder):
        def embed(self, texts: list[str]) -> list:  # type: ignore[override]
            if any(fail_on in t for t in texts):
                raise RuntimeError("embedder crashed")
            return super().embed(texts)

    return Failing(32)


def test_add_is_one_transaction(tmp_path: Path, store_url: str) -> None:
    store = MemoryStore(store_url)
    w = MemoryWriter(store, embedder=_failing_embedder("BOOM"), config=WriteConfig(levels=(), extractive=True))
    sessions = [session("alice", f"s{i}", [f"turn {i}"]) for i in range(5)] + [session("alice", "s9", ["BOOM"])]
    with pytest.raises(RuntimeError):
        w.write_sessions(sessions)
    assert store.artifacts() == []
    # a summary is never committed without its session, nor a session without its summary
    slow = MemoryStore(store_url, timeout=0.1)
    with other_writer(store_url), pytest.raises(StoreLockedError, match="Nothing was changed"):
        make_writer(slow, 1).write_sessions(alice_sessions())
    assert slow.artifacts() == []


def test_readding_a_session_is_an_explicit_choice(tmp_path: Path, store_url: str) -> None:
    store = MemoryStore(store_url)
    w = make_writer(store, 1, extractive=True)
    w.write_sessions(alice_sessions())
    n = len(store.artifacts())
    with pytest.raises(DuplicateSessionError, match="--on-duplicate"):
        w.write_sessions([session("alice", "s9", ["new"]), *alice_sessions()])
    assert len(store.artifacts()) == n
    w.write_sessions(alice_sessions(), on_duplicate="skip")
    assert len(store.artifacts()) == n
    w.write_sessions(alice_sessions("CHANGED"), on_duplicate="replace")
    raws = store.artifacts(owner="alice", tier="raw")
    assert len(raws) == 7 and all("ALICE" not in (a.text or "") for a in raws)


def test_lone_surrogate_refused_before_anything_is_written(tmp_path: Path) -> None:
    p = tmp_path / "s.jsonl"
    p.write_text(json.dumps(_sess("u1", "s1", "fine")) + "\n" + '{"user_id": "u1", "session_id": "s2", '
                 '"turns": [{"role": "user", "content": "bad \\ud800 here"}]}\n', encoding="utf-8")
    with pytest.raises(InputFormatError, match="line 2.*surrogate"):
        read_sessions(p)


def test_sigkill_during_add_leaves_nothing_or_everything(tmp_path: Path, more_stores: Any, _home: Path) -> None:
    """Kills spread over a real `memory add` (calibrated on an uninterrupted run) leave
    either no session or all of them: never sessions without their summaries."""
    import subprocess
    import sys
    import time

    src = _jsonl(tmp_path / "many.jsonl", [_sess("u1", f"s{i}", f"turn {i} " * 40, "more") for i in range(300)])
    env = {**os.environ, "TRACELESS_HOME": str(_home)}
    code = "from traceless.cli import main; import sys; main(sys.argv[1:])"

    def run(db: str, kill_after: float | None) -> int:
        p = subprocess.Popen([sys.executable, "-c", code, "memory", "add", str(src), "--db", db,
                              "--embedder", "hashing"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if kill_after is not None:
            time.sleep(kill_after)
            p.kill()
        p.wait()
        state = _state(db)
        return len(state) if state is not None else 0

    t0 = time.monotonic()
    full = run(more_stores(), None)
    took = time.monotonic() - t0
    assert full == 1201  # 300 sessions × (2 raw + 2 vectors) + the consolidation
    for frac in (0.6, 0.75, 0.88, 0.96):
        n = run(more_stores(), took * frac)
        assert n in (0, full), f"kill at {frac:.0%} of {took:.1f}s left {n} artifacts (neither 0 nor {full})"


# ------------------------------------------------------------------ 5. third-party verification
def test_receipts_verify_with_the_public_key_alone(tmp_path: Path, store_url: str, _home: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    store = MemoryStore(store_url)
    w = make_writer(store, 0)
    # short (26^4 candidates: the low-entropy warning) and made of letters no hex id, clock
    # reading or number in the store can spell: a 4-digit pin is found by the post-commit byte
    # scan whenever a timestamp or an id happens to contain it (1796134821.25), and then the
    # receipt rightly does not pass
    w.write_sessions([session("alice", "s1", ["my pin is kqzx"])])
    r = forget(store, ForgetTarget.literal("kqzx", "alice", "pin"), "full_purge", writer=w, gate=True)
    assert any("low-entropy" in x for x in r.warnings) and r.verification.passed
    path = tmp_path / "r.json"
    from traceless.forget import write_receipt

    write_receipt(r, path)
    assert cli("keys", "export", "--out", str(tmp_path / "pub.txt")) == 0
    stranger = tmp_path / "stranger-home"
    monkeypatch.setenv("TRACELESS_HOME", str(stranger))
    assert cli("forget", "verify", str(path), "--public-key", str(tmp_path / "pub.txt")) == 0
    assert not stranger.exists() or not any(stranger.iterdir())  # verification created no key
    # nothing a verifier holds (the receipt, the public key) reproduces the keyed reference
    import hashlib
    import hmac as hm

    pub = bytes.fromhex(r.public_key)
    guesses = {hm.new(k, b"kqzx", hashlib.sha256).hexdigest()[:16] for k in (pub, r.signature.encode())}
    assert r.target.ref.removeprefix("hmac:") not in guesses
    # the gate stores no byte length in the clear
    rows = _rows(store_url, "SELECT kind, mac FROM gate_entries")
    assert all(":" not in mac for _, mac in rows)
    tampered = r.model_copy(update={"mode": "noop"})
    assert not verify_signature(tampered, pub)


def test_python_verify_takes_the_public_key_like_the_cli(tmp_path: Path, store_url: str, _home: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 36.6: traceless.verify(receipt, public_key=...) does what `forget verify --public-key` does."""
    import traceless
    from traceless.forget import write_receipt

    store = MemoryStore(store_url)
    w = make_writer(store, 0)
    w.write_sessions([session("alice", "s1", ["my pin is kqzx"])])
    r = forget(store, ForgetTarget.literal("kqzx", "alice", "pin"), "full_purge", writer=w, gate=True)
    path = tmp_path / "r.json"
    write_receipt(r, path)
    assert cli("keys", "export", "--out", str(tmp_path / "pub.txt")) == 0
    stranger = tmp_path / "stranger-home"
    monkeypatch.setenv("TRACELESS_HOME", str(stranger))
    for key in (bytes.fromhex(r.public_key), r.public_key, tmp_path / "pub.txt", str(tmp_path / "pub.txt")):
        assert traceless.verify(path, public_key=key).receipt_id == r.receipt_id
    assert not stranger.exists() or not any(stranger.iterdir())  # verification created no key
    with pytest.raises(ReceiptError, match="public_key="):
        traceless.verify(r.model_copy(update={"mode": "noop"}), public_key=r.public_key)
    with pytest.raises(ReceiptError, match="public_key="):
        from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
        from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

        other = Ed25519PrivateKey.generate().public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
        traceless.verify(path, public_key=other)  # another signer's key


def test_unsigned_extra_fields_refused(tmp_path: Path, store_url: str) -> None:
    store = MemoryStore(store_url)
    w = make_writer(store, 0)
    w.write_sessions(alice_sessions())
    r = forget(store, ForgetTarget.literal(CANARY, "alice"), "full_purge", writer=w)
    body = json.loads(r.model_dump_json())
    body["verification"]["approved_by"] = "auditor"
    (tmp_path / "r.json").write_text(json.dumps(body))
    with pytest.raises(ReceiptError, match="approved_by"):
        load_receipt(tmp_path / "r.json")


# ------------------------------------------------------------------ 6. stored text is data
def test_markup_and_escapes_are_printed_as_data(tmp_path: Path, store_url: str, capfd: pytest.CaptureFixture[str]) -> None:
    db = store_url
    evil = "[/bold] [conceal]hidden[/conceal] \x1b]0;pwned\x07 \x1b[31mred"
    assert cli("memory", "add", str(_jsonl(tmp_path / "a.jsonl", [_sess("u1", "s1", evil)])), "--db", db,
               "--embedder", "hashing") == 0
    for args in (["memory", "show", "--db", db, "--full"], ["memory", "search", "red", "--db", db,
                 "--user", "u1"], ["memory", "lineage", "r-00000001", "--db", db]):
        capfd.readouterr()
        assert cli(*args) == 0, args
        out = capfd.readouterr().out
        assert "\x1b" not in out and "\x07" not in out and "[conceal]hidden" in out.replace("\n", "")


# ------------------------------------------------------------------ 7. outputs validated first; receipts in the db
def test_bad_receipt_path_refused_before_the_forget(tmp_path: Path, store_url: str) -> None:
    db = store_url
    assert cli("memory", "add", str(_jsonl(tmp_path / "a.jsonl", [_sess("u1", "s1", f"t {CANARY}")])),
               "--db", db, "--embedder", "hashing") == 0
    before = _state(db)
    rc = cli("forget", "--db", db, "--mode", "full_purge", "--literal", CANARY, "--owner", "u1",
             "--receipt", str(tmp_path / "missing" / "r.json"))
    assert rc == ConfigError.exit_code and _state(db) == before
    assert cli("forget", "--db", db, "--mode", "full_purge", "--literal", CANARY, "--owner", "u1",
               "--receipt", str(tmp_path / "r.json")) == 0
    rid = load_receipt(tmp_path / "r.json").receipt_id
    assert cli("forget", "receipts", "--db", db) == 0
    assert cli("forget", "receipt", rid, "--db", db, "--out", str(tmp_path / "copy.json")) == 0
    assert load_receipt(tmp_path / "copy.json") == load_receipt(tmp_path / "r.json")


# ------------------------------------------------------------------ 8. a concurrent forget is never undone
def test_consolidation_cannot_undo_a_concurrent_forget(tmp_path: Path, store_url: str) -> None:
    db = store_url
    with MemoryStore(db) as s:
        MemoryWriter(s, config=WriteConfig(levels=(), embed=False)).write_sessions(alice_sessions())
    a = MemoryStore(db, timeout=0.2)
    b = MemoryStore(db, timeout=0.2)
    ran: list[str] = []

    def other_process_forgets() -> None:
        try:
            forget(b, ForgetTarget.literal(CANARY, "alice"), "full_purge", gate=True)
            ran.append("during")
        except StoreLockedError:
            ran.append("blocked")  # the consolidation holds the write lock: the forget waits

    writer = MemoryWriter(a, config=WriteConfig(levels=(), embed=False, extractive=True))
    with _hooks.hooked("consolidate:after_read", other_process_forgets):
        writer.consolidate("alice")
    if ran == ["blocked"]:
        r = forget(b, ForgetTarget.literal(CANARY, "alice"), "full_purge", gate=True)
        assert r.verification.passed
    assert ran and not a.containing(CANARY)


# ------------------------------------------------------------------ 9. user erasure leaves no name behind
def test_user_erasure_removes_every_row_naming_them(tmp_path: Path, store_url: str) -> None:
    db = store_url
    uid = "user-zq81-ingrid"
    store = MemoryStore(db)
    w = make_writer(store, 1, extractive=True)
    w.write_sessions([session(uid, "s1", ["I adopted a dog", "I like tea"]), session(uid, "s2", ["piano"]),
                      session("bob", "b1", ["stamps"])])
    forget(store, ForgetTarget.literal("adopted a dog", uid), "full_purge", writer=w, gate=True)
    r = forget(store, ForgetTarget.user(uid), "full_purge", writer=w)
    ids = store.ancestors([]) or []
    store.close()
    assert r.target.ref == pseudonym(uid) and uid not in r.model_dump_json()
    assert all(i.startswith("p:") for t in r.tiers.values() for i in t.removed)
    ((n_edges,),) = _rows(db, "SELECT count(*) FROM lineage")
    ((bob_edges,),) = _rows(db, "SELECT count(*) FROM lineage l JOIN artifacts a ON a.id = l.child")
    assert n_edges == bob_edges and ids == []
    assert _disk_clean(db, uid)


# ------------------------------------------------------------------ 10. near variants
def test_near_variants_reported_and_forgotten_with_normalized(tmp_path: Path, store_url: str) -> None:
    store = MemoryStore(store_url)
    w = make_writer(store, 0)
    nfd = "cafe\u0301-key-9"
    variants = [CANARY.lower(), CANARY.replace("X", "\uff38"), f"{CANARY[:3]}  {CANARY[3:]}", "CAFÉ-KEY-9"]
    w.write_sessions([session("alice", "s1", [f"v {v}" for v in variants] + [f"exact {CANARY}"]),
                      session("alice", "s2", ["the code starts XQ7-VIO", "LET-3829 is the end"])])
    r = forget(store, ForgetTarget.literal(CANARY, "alice"), "full_purge", writer=w)
    assert r.verification.near_variants.get("raw", 0) >= 3 and r.verification.split_copies == 1
    assert any("--match normalized" in x for x in r.warnings)
    r2 = forget(store, ForgetTarget(kind="literal", value=CANARY, owner="alice", match="normalized"),
                "full_purge", writer=w)
    assert r2.verification.near_variants.get("raw", 0) == 0 and r2.verification.passed
    r3 = forget(store, ForgetTarget(kind="literal", value=nfd, owner="alice", match="normalized"),
                "full_purge", writer=w)
    assert r3.matched and all("KEY-9" not in (a.text or "").upper() for a in store.artifacts(owner="alice"))


# ------------------------------------------------------------------ 11. smaller defects
def test_noop_stores_no_gate_descriptor(tmp_path: Path, store_url: str) -> None:
    store = MemoryStore(store_url)
    w = make_writer(store, 0, extractive=True)
    w.write_sessions(alice_sessions())
    r = forget(store, ForgetTarget.literal(CANARY, "alice"), "noop", writer=w, gate=True)
    assert r.gate_descriptors_added == 0
    w.write_sessions([session("alice", "s9", ["later and harmless"])])  # not blocked by the control


def test_one_character_and_undecodable_literals_refused(tmp_path: Path, store_url: str) -> None:
    with pytest.raises(ConfigError, match="fewer than 4"):
        ForgetTarget.literal("7", "alice")
    db = store_url
    assert cli("memory", "add", str(_jsonl(tmp_path / "a.jsonl", [_sess("u1", "s1", "x")])), "--db", db,
               "--embedder", "hashing") == 0
    assert cli("forget", "--db", db, "--mode", "full_purge", "--literal", "bad\udcff", "--owner",
               "u1") == ConfigError.exit_code


def test_full_purge_on_a_store_without_embeddings(tmp_path: Path, store_url: str) -> None:
    db = store_url
    assert cli("memory", "add", str(_jsonl(tmp_path / "a.jsonl", [_sess("u1", "s1", f"t {CANARY}")])),
               "--db", db, "--no-embed") == 0
    assert cli("forget", "--db", db, "--mode", "full_purge", "--literal", CANARY, "--owner", "u1",
               "--receipt", str(tmp_path / "r.json")) == 0


@pytest.mark.parametrize("case", ["nested", "directory", "levels", "has_answer", "blank_user", "dup_key", "case"])
def test_bad_input_is_a_clear_error(tmp_path: Path, store_url: str, case: str, capsys: pytest.CaptureFixture[str]) -> None:
    db = store_url
    good = _jsonl(tmp_path / "ok.jsonl", [_sess("alice", "s1", "x")])
    args = ["memory", "add", str(good), "--db", db, "--embedder", "hashing"]
    if case == "nested":
        (tmp_path / "n.jsonl").write_text("[" * 100000 + "]" * 100000 + "\n")
        args[2] = str(tmp_path / "n.jsonl")
    elif case == "directory":
        args[2] = str(tmp_path)
    elif case == "levels":
        args += ["--levels", "x"]
    elif case == "has_answer":
        args[2] = str(_jsonl(tmp_path / "h.jsonl", [{**_sess("a", "s", "x"), "turns": [
            {"role": "user", "content": "x", "has_answer": "yes"}]}]))
    elif case == "blank_user":
        args[2] = str(_jsonl(tmp_path / "b.jsonl", [_sess("  ", "s", "x")]))
    elif case == "dup_key":
        (tmp_path / "d.jsonl").write_text('{"user_id": "a", "user_id": "b", "session_id": "s", '
                                          '"turns": [{"role": "user", "content": "x"}]}\n')
        args[2] = str(tmp_path / "d.jsonl")
    elif case == "case":
        assert cli(*args) == 0
        args[2] = str(_jsonl(tmp_path / "c.jsonl", [_sess("Alice", "s2", "x")]))
    before = _state(db)
    rc = cli(*args)
    err = capsys.readouterr().err
    assert rc != 0 and "error:" in err and "Traceback" not in err
    assert _state(db) == before


def test_unknown_embedder_leaves_no_db(tmp_path: Path, store_url: str) -> None:
    db = store_url
    rc = cli("memory", "add", str(_jsonl(tmp_path / "a.jsonl", [_sess("u1", "s1", "x")])), "--db", db,
             "--embedder", "nosuch")
    assert rc != 0 and _state(db) is None  # no file; on a server, no tables


def test_mixed_embedder_dimensions_in_search(tmp_path: Path, store_url: str) -> None:
    db = store_url
    assert cli("memory", "add", str(_jsonl(tmp_path / "a.jsonl", [_sess("u1", "s1", "x")])), "--db", db,
               "--embedder", "hashing-32") == 0
    assert cli("memory", "add", str(_jsonl(tmp_path / "b.jsonl", [_sess("u1", "s2", "y")])), "--db", db,
               "--embedder", "hashing-64") == 0
    assert cli("memory", "search", "x", "--db", db, "--user", "u1") == ConfigError.exit_code


def test_key_that_is_a_directory(tmp_path: Path, store_url: str, _home: Path) -> None:
    (_home / "receipt.key").mkdir(parents=True)
    store = MemoryStore(store_url)
    w = make_writer(store, 0)
    w.write_sessions(alice_sessions())
    with pytest.raises(ConfigError, match="not a regular file"):
        forget(store, ForgetTarget.literal(CANARY, "alice"), "full_purge", writer=w)


def test_files_are_private(tmp_path: Path, _home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "m.db"
    assert cli("memory", "add", str(_jsonl(tmp_path / "a.jsonl", [_sess("u1", "s1", f"t {CANARY}")])),
               "--db", str(db), "--embedder", "hashing") == 0
    assert cli("forget", "--db", str(db), "--mode", "full_purge", "--literal", CANARY, "--owner", "u1",
               "--receipt", str(tmp_path / "r.json")) == 0
    for p in [db, tmp_path / "r.json", *tmp_path.glob("m.db-*")]:
        assert stat.S_IMODE(p.stat().st_mode) & 0o077 == 0, p
    _home.chmod(0o755)
    from traceless import keys

    keys._WARNED.clear()
    capsys.readouterr()
    keys.pepper()  # any use of a key checks its folder once per process
    assert "chmod 700" in capsys.readouterr().err


def test_verify_is_bound_to_its_store_and_creates_no_key(tmp_path: Path, store_url: str, more_stores: Any,
                                                        _home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    one, other = store_url, more_stores()
    src = _jsonl(tmp_path / "a.jsonl", [_sess("u1", "s1", f"t {CANARY}")])
    for db in (one, other):
        assert cli("memory", "add", str(src), "--db", db, "--embedder", "hashing") == 0
    assert cli("forget", "--db", str(one), "--mode", "full_purge", "--literal", CANARY, "--owner", "u1",
               "--receipt", str(tmp_path / "r.json")) == 0
    assert cli("forget", "verify", str(tmp_path / "r.json"), "--db", str(one)) == 0
    assert cli("forget", "verify", str(tmp_path / "r.json"), "--db", str(other)) == ReceiptError.exit_code
    empty = tmp_path / "empty-home"
    monkeypatch.setenv("TRACELESS_HOME", str(empty))
    assert cli("forget", "verify", str(tmp_path / "r.json")) != 0
    assert not empty.exists() or not any(empty.iterdir())
    assert isinstance(load_receipt(tmp_path / "r.json"), Receipt)


# ------------------------------------------------------------------ machine-readable output (#15.5)
def test_json_output_follows_the_published_schemas(tmp_path: Path, store_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    from traceless.forget import VerifyResult
    from traceless.memory import SearchResult
    from traceless.schemas import SCHEMAS, schema_text

    docs = Path(__file__).resolve().parents[2] / "docs" / "schemas"
    for name in SCHEMAS:  # generated from the models: the published files cannot drift
        assert (docs / f"{name}.json").read_text(encoding="utf-8") == schema_text(name), name
    db = store_url
    assert cli("memory", "add", str(_jsonl(tmp_path / "a.jsonl", [_sess("u1", "s1", f"t {CANARY}", "dog")])),
               "--db", db, "--embedder", "hashing") == 0
    capsys.readouterr()
    assert cli("memory", "search", "dog", "--db", db, "--user", "u1", "--json") == 0
    assert SearchResult.model_validate_json(capsys.readouterr().out).hits
    assert cli("forget", "--db", db, "--mode", "full_purge", "--literal", CANARY, "--owner", "u1",
               "--receipt", str(tmp_path / "r.json"), "--json") == 0
    r = Receipt.model_validate_json(capsys.readouterr().out)
    assert r == load_receipt(tmp_path / "r.json")
    assert cli("forget", "verify", str(tmp_path / "r.json"), "--db", db, "--json") == 0
    v = VerifyResult.model_validate_json(capsys.readouterr().out)
    assert v.ok and v.same_store and v.removed_still_absent
