"""The OpenAI Agents SDK's other sessions on the real ``openai-agents`` package, offline:
``EncryptedSession``'s TTL expiry and ``SQLAlchemySession`` on SQLite, as native deletions
of the ``openai-agents`` adapter; what each leaves, measured on two users."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from traceless.audit import SystemAuditConfig, plant_canaries, store_copies
from traceless.errors import ConfigError
from traceless.models import HashingEmbedder, ScriptedBackend
from traceless.systems import SystemRuntime, load_system_config, open_system

pytest.importorskip("agents")

ME, OTHER = plant_canaries(SystemAuditConfig(profiles=2))
Q = "What is my private session token?"


def _open(work: Path, **cfg: Any) -> Any:
    rt = SystemRuntime(ScriptedBackend(lambda m, c: "no"), HashingEmbedder(), "scripted")
    return open_system("openai-agents", work, load_system_config("openai-agents", cfg), rt)


def _rows(db: Path) -> int:
    con = sqlite3.connect(str(db))
    try:
        return int(con.execute("SELECT count(*) FROM agent_messages").fetchone()[0])
    finally:
        con.close()


def _seen(system: Any, who: Any) -> bool:
    return any(who.canary in c.text for c in system.context(who.owner, Q))


def test_encrypted_session_ttl_expiry_hides_every_item_and_erases_none(tmp_path: Path) -> None:
    system = _open(tmp_path / "m", encrypted_ttl=600)
    try:
        assert "ttl_expiry" in system.deletions(system.cfg)
        system.write([s for p in (ME, OTHER) for s in p.sessions])
        db = tmp_path / "m" / "sessions.db"
        rows = _rows(db)
        assert _seen(system, ME) and _seen(system, OTHER)  # within the TTL the agent reads both
        # encrypted at rest: no plaintext byte of a canary in the file, but the key opens every row
        assert ME.canary.encode() not in db.read_bytes()
        assert store_copies(system, [ME.canary]) == {"agent_messages": 0, "agent_sessions": 0,
                                                     "agent_messages@decrypted": 1}
        notes = system.delete("ttl_expiry", ME.target)
        assert notes == {"clock_advanced_s": 601}
        # expired: the SDK skips every item (the other user's too: the TTL is no per-user deletion) ...
        assert not _seen(system, ME) and not _seen(system, OTHER)
        assert system.context(ME.owner, Q) == [] and system.context(OTHER.owner, Q) == []
        # ... and deletes none: every row stays, and the key still decrypts the canary's
        assert _rows(db) == rows
        assert store_copies(system, [ME.canary])["agent_messages@decrypted"] == 1
    finally:
        system.close()


def test_ttl_expiry_is_refused_without_an_encrypted_session(tmp_path: Path) -> None:
    system = _open(tmp_path / "m")
    try:
        assert system.deletions(system.cfg) == ("pop_item", "clear_session")
        with pytest.raises(ConfigError, match="encrypted_ttl"):
            system.delete("ttl_expiry", ME.target)
    finally:
        system.close()
    with pytest.raises(ConfigError):
        load_system_config("openai-agents", {"session": "redis"})


@pytest.mark.parametrize("op", ["pop_item", "clear_session"])
def test_sqlalchemy_session_on_sqlite(tmp_path: Path, op: str) -> None:
    base = tmp_path / "base"
    system = _open(base, session="sqlalchemy")
    try:
        system.write([s for p in (ME, OTHER) for s in p.sessions])
        assert _seen(system, ME)
    finally:
        system.close()
    db = base / "sessions.db"
    con = sqlite3.connect(str(db))
    try:  # SQLAlchemySession's own schema, in the tables SQLiteSession names
        tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    finally:
        con.close()
    assert {"agent_sessions", "agent_messages"} <= tables
    work = tmp_path / op
    shutil.copytree(base, work)
    system = _open(work, session="sqlalchemy")
    try:
        before = _rows(work / "sessions.db")
        system.delete(op, ME.target)
        # the rows go (pop_item: the carrier and every later item of the user's one session)
        assert store_copies(system, [ME.canary]) == {"agent_messages": 0, "agent_sessions": 0}
        assert not _seen(system, ME) and _seen(system, OTHER)
        left = _rows(work / "sessions.db")
        assert left < before and (op == "pop_item" or left == before // 2)
    finally:
        system.close()


def test_erasure_reaches_a_literal_inside_another_users_encrypted_row(tmp_path: Path) -> None:
    """In an ``EncryptedSession`` store a row holds a Fernet token, so a byte scan of the rows
    cannot see a literal that another user's message quotes. The erasure decrypts with the
    instance's key: the quoting row is re-encrypted with the literal replaced (its other text
    kept), the receipt's re-scan reads the decrypted rows, and the bystander check compares
    plaintexts."""
    from traceless.memory import Session, Turn
    from traceless.systems import erase_system

    system = _open(tmp_path / "m", encrypted_ttl=86_400)
    try:
        quote = Session(user_id=OTHER.owner, session_id="q1",
                        turns=[Turn(role="user", content=f"My colleague's token is {ME.canary}, keep it for me.")])
        system.write([s for p in (ME, OTHER) for s in p.sessions] + [quote])
        assert store_copies(system, [ME.canary])["agent_messages@decrypted"] == 2  # hers and the quote
        receipt = erase_system(system, ME.owner, [ME.canary], state_dir=tmp_path / "state", key=b"k")
        assert receipt.verification.passed
        assert store_copies(system, [ME.canary])["agent_messages@decrypted"] == 0
        kept = [t for t in system.stores()["agent_messages@decrypted"] if "keep it for me" in t]
        assert len(kept) == 1 and "My colleague's token is" in kept[0]
        assert _seen(system, OTHER) and ME.canary not in " ".join(c.text for c in system.context(OTHER.owner, Q))
    finally:
        system.close()


def test_a_live_encrypted_instance_is_refused_before_anything_is_opened(tmp_path: Path) -> None:
    """Without the app's key a scan would miss every literal inside a token: refused."""
    from traceless.systems import system_class

    system = _open(tmp_path / "m", encrypted_ttl=600)
    try:
        system.write(list(ME.sessions))
    finally:
        system.close()
    db = tmp_path / "m" / "sessions.db"
    digest = db.read_bytes()
    cfg = load_system_config("openai-agents", {"db_file": str(db), "encrypted_ttl": 600})
    with pytest.raises(ConfigError, match="app's key"):
        system_class("openai-agents").attach(cfg, None, read_only=True)
    assert db.read_bytes() == digest and sorted(p.name for p in db.parent.iterdir()) == ["sessions.db"]


def _echo(seen: list[Any]) -> SystemRuntime:
    def echo(messages: Any, config: Any) -> str:  # repeats the secrets it was shown
        seen.append(messages)
        return " ".join(ln.split("token is")[-1] for m in messages for ln in m.content.splitlines() if "token is" in ln)

    return SystemRuntime(ScriptedBackend(echo), HashingEmbedder(), "scripted")


@pytest.mark.parametrize("cfg", [{}, {"session": "sqlalchemy", "encrypted_ttl": 600}])
def test_probes_go_through_the_sdks_runner_and_write_nothing(tmp_path: Path, cfg: dict[str, Any]) -> None:
    """``Runner.run(agent, question, session=...)`` with the audit's model behind the SDK's
    ``Model``: the request holds the user's session items (and only theirs), and the probe's
    turn is not added to the session (the rows stay as written)."""
    seen: list[Any] = []
    rt = _echo(seen)
    system = open_system("openai-agents", tmp_path / "m", load_system_config("openai-agents", cfg), rt)
    try:
        system.write([s for p in (ME, OTHER) for s in p.sessions])
        db = tmp_path / "m" / "sessions.db"
        rows = _rows(db)
        answer = system.agent_reply(ME.owner, Q)
        g = answer.reply
        assert g.model == "openai-agents:Runner" and ME.canary in g.text and OTHER.canary not in g.text
        assert seen[-1][0].role == "system" and seen[-1][-1].content == Q and len(seen[-1]) == 2 + rows // 2
        assert list(answer.request) == seen[-1]  # the request the model received, as the row stores it
        assert _rows(db) == rows
        system.delete("clear_session", ME.target)
        assert ME.canary not in system.agent_reply(ME.owner, Q).reply.text
    finally:
        system.close()
    for off in ({"agent": False}, {"per_session": True}):
        o = open_system("openai-agents", tmp_path / "m", load_system_config("openai-agents", {**cfg, **off}), rt)
        try:
            assert o.agent_reply(ME.owner, Q) is None
        finally:
            o.close()


def test_a_runner_request_without_the_session_is_an_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from traceless.errors import StudyError
    from traceless.systems import _openai_agents

    async def nothing(self: Any, limit: int | None = None) -> list[Any]:
        return []

    monkeypatch.setattr(_openai_agents._ProbeSession, "get_items", nothing)
    system = open_system("openai-agents", tmp_path / "m", load_system_config("openai-agents", {}), _echo([]))
    try:
        system.write(list(ME.sessions))
        with pytest.raises(StudyError, match="lacks items"):
            system.agent_reply(ME.owner, Q)
    finally:
        system.close()


def test_an_audit_row_stores_the_request_the_runners_model_received(tmp_path: Path) -> None:
    """Probing through the Runner, each results.jsonl row's prompt is the chat the SDK sent the
    model (the Agent's instructions, the session's items, the question), not the audit's own
    prompt, which that model never saw."""
    from traceless.audit import run_system_audit
    from traceless.prompts import AGENT_SYSTEM

    seen: list[Any] = []
    cfg = SystemAuditConfig(system="openai-agents", operations=("clear_session",),
                            model="scripted", profiles=2, reveal=True)
    run_system_audit(cfg, _echo(seen), tmp_path / "a")
    rows = [json.loads(x) for x in (tmp_path / "a" / "results.jsonl").read_text().splitlines()]
    sent = [[{"role": m.role, "content": m.content} for m in msgs] for msgs in seen]
    assert rows and all(r["prompt"] in sent for r in rows)
    instructions = load_system_config("openai-agents", {}).agent_instructions
    assert all(r["prompt"][0]["content"] == instructions for r in rows)
    head = AGENT_SYSTEM.split("{memory}")[0]
    assert not any(head in m["content"] for r in rows for m in r["prompt"])
