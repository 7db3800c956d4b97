"""A literal acts on the requester's records only (issue #40, items 1, 2, 6), on real mem0
(qdrant local) and real LangGraph (SQLite store + checkpointer) instances:

* a literal held only by other users' records erases nothing of theirs: refused, no byte of
  the instance changed (before: mem0 deleted bob's memories, LangGraph bob's whole thread);
* a literal under the own store's minimum (4 characters) is refused before any change
  (before: ``--literal e`` deleted every record of every user);
* another user's record that quotes the requester's literal is never removed (mem0 can only
  remove a record whole: refused; the erasure without that literal still erases the user);
* the receipt's ``left`` counts the requester's records, never the instance's totals;
* a LangGraph thread whose id fits the requester's template but whose metadata names
  another user (``{user_id}:{session_id}`` with ``ann`` / ``ann:vip``) is not the requester's.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "unit"))

from _cli import cli  # noqa: E402

pytestmark = pytest.mark.integration


def _fingerprint(root: Path) -> dict[str, str]:
    return {str(p): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(root.rglob("*")) if p.is_file()}


# ---------------------------------------------------------------------------------- mem0
mem0_only = pytest.mark.skipif(importlib.util.find_spec("mem0") is None, reason="needs traceless[mem0]")


@pytest.fixture(scope="module")
def mem0_built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    import _mem0_instance as mi

    base = tmp_path_factory.mktemp("mem0-scope")
    cfg = mi.build(base / "inst", "qdrant", base / "mem0-home")
    return base / "inst", cfg, base / "mem0-home"


def _mem0_copy(built: tuple[Path, Path, Path], dst: Path) -> Path:
    import _mem0_instance as mi

    src, cfg, _ = built
    shutil.copytree(src, dst)
    return mi.relocate(cfg, src, dst)


@mem0_only
@pytest.mark.parametrize("literal", ["CANARY-bob-0-7Q", "bob note 1: my account code is CANARY-bob-1-7Q", "e"])
def test_mem0_a_literal_not_the_requesters_changes_nothing(mem0_built: tuple[Path, Path, Path], tmp_path: Path,
                                                            literal: str, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = _mem0_copy(mem0_built, tmp_path / "inst")
    before = _fingerprint(tmp_path / "inst")
    rc = cli("forget", "--memory", "mem0", "--memory-config", str(cfg), "--user", "alice", "--literal", literal,
             "--receipt", str(tmp_path / "r.json"))
    err = capsys.readouterr().err
    assert rc == (2 if len(literal) < 4 else 6), err  # too short: the own store's rule (ConfigError)
    assert ("fewer than 4 characters" if len(literal) < 4 else "nothing was changed") in err
    assert _fingerprint(tmp_path / "inst") == before  # not one byte of bob's (or anyone's) records
    assert not (tmp_path / "r.json").exists()


@mem0_only
def test_mem0_a_bystander_quoting_the_literal_is_never_removed(mem0_built: tuple[Path, Path, Path],
                                                               tmp_path: Path) -> None:
    import _mem0_instance as mi

    from traceless import scan
    from traceless.forget import load_receipt

    cfg = _mem0_copy(mem0_built, tmp_path / "inst")
    mem = mi.mem0_memory(json.loads(cfg.read_text(encoding="utf-8")), mem0_built[2])
    try:
        mem.add([{"role": "user", "content": f"alice told me her code {mi.canary('alice', 0)}"}],
                user_id="bob", infer=False)
    finally:
        mi.close(mem, "qdrant")
    bob_before = scan("mem0", cfg, user="bob").model_dump()["hits"]
    before = _fingerprint(tmp_path / "inst")
    rc = cli("forget", "--memory", "mem0", "--memory-config", str(cfg), "--user", "alice",
             "--literal", mi.canary("alice", 0), "--receipt", str(tmp_path / "r.json"))
    assert rc == 6 and _fingerprint(tmp_path / "inst") == before
    # without the literal the user is still erased, and bob's quoting memory stays
    rc = cli("forget", "--memory", "mem0", "--memory-config", str(cfg), "--user", "alice",
             "--receipt", str(tmp_path / "r.json"))
    assert rc == 0
    r = load_receipt(tmp_path / "r.json")
    assert r.verification.passed and r.verification.checks["bystanders_intact"]
    assert all(t.left == 0 for t in r.tiers.values()), {s: t.left for s, t in r.tiers.items()}
    assert scan("mem0", cfg, user="bob").model_dump()["hits"] == bob_before
    assert scan("mem0", cfg, user="alice").model_dump()["hits"] == []


# ----------------------------------------------------------------------------- LangGraph
lg_only = pytest.mark.skipif(importlib.util.find_spec("langgraph.checkpoint.sqlite") is None
                             or importlib.util.find_spec("langmem") is None, reason="needs traceless[langgraph]")


@pytest.fixture(scope="module")
def lg_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from _lg_instance import build

    root = tmp_path_factory.mktemp("lg-scope") / "instance"
    build(root)
    return root


def _lg(template: Path, tmp_path: Path) -> tuple[Path, dict[str, Any]]:
    from _lg_instance import config

    root = tmp_path / "instance"
    shutil.copytree(template, root)
    return root, config(root)


@lg_only
@pytest.mark.parametrize("which", ["other-users-canary", "short"])
def test_langgraph_a_literal_not_the_requesters_changes_nothing(lg_template: Path, tmp_path: Path,
                                                                which: str) -> None:
    from _lg_instance import USERS, canary, snapshot

    from traceless.errors import ConfigError, ErasureScopeError
    from traceless.forget import receipt_key
    from traceless.systems import LangGraphSystem, erase_system, load_system_config

    root, cfg = _lg(lg_template, tmp_path)
    before = snapshot(root)
    literal = canary(USERS[1]) if which == "other-users-canary" else "Elm"
    system = LangGraphSystem.attach(load_system_config("langgraph", cfg), read_only=False)
    try:
        with pytest.raises(ErasureScopeError if which == "other-users-canary" else ConfigError,
                           match="nothing was changed" if which == "other-users-canary" else "fewer than 4"):
            erase_system(system, USERS[0], [literal], state_dir=tmp_path / "state", key=receipt_key())
    finally:
        system.close()
    assert {k: v[0] for k, v in snapshot(root).items()} == {k: v[0] for k, v in before.items()}


def _echo_threads(db: Path, turns: list[tuple[str, str, str]]) -> None:
    """A LangGraph app on a ``SqliteSaver`` at ``db`` that answers "noted"; each (user, thread,
    text) is one invocation, the user in its ``configurable`` (LangGraph copies it to metadata)."""
    import sqlite3

    from langgraph.checkpoint.sqlite import SqliteSaver
    from langgraph.graph import END, START, MessagesState, StateGraph

    conn = sqlite3.connect(str(db), check_same_thread=False)
    saver = SqliteSaver(conn)
    saver.setup()
    g = StateGraph(MessagesState)
    g.add_node("echo", lambda s: {"messages": [{"role": "assistant", "content": "noted"}]})
    g.add_edge(START, "echo")
    g.add_edge("echo", END)
    app = g.compile(checkpointer=saver)
    for user, thread, text in turns:
        app.invoke({"messages": [{"role": "user", "content": text}]},
                   {"configurable": {"thread_id": thread, "user_id": user}})
    conn.close()


@lg_only
def test_langgraph_a_thread_whose_metadata_names_another_user_is_not_the_requesters(tmp_path: Path) -> None:
    """``{user_id}:{session_id}``: user ``ann``'s pattern fits ``ann:vip:s1``, the thread of user
    ``ann:vip`` (its checkpoints' metadata says so); before, ann's erasure took it."""
    from traceless.systems import LangGraphSystem, load_system_config, scan_system

    db = tmp_path / "checkpoints.db"
    _echo_threads(db, [("ann", "ann:s1", "ann's own note"), ("ann:vip", "ann:vip:s1", "the vip's note")])
    cfg = {"checkpointer": {"kind": "sqlite", "path": str(db)},
           "users": {"namespace": ["memories", "{user_id}"], "thread_id": "{user_id}:{session_id}",
                     "configurable": {"user_id": "{user_id}"}}}
    system = LangGraphSystem.attach(load_system_config("langgraph", cfg), read_only=True)
    try:
        hits = scan_system(system, "ann", []).hits
    finally:
        system.close()
    threads = {json.loads(h.record_id)[0] for h in hits if h.owner_match}
    assert threads == {"ann:s1"}, threads


def test_langgraph_threads_named_freely_are_attributed_by_the_users_id_in_the_state(tmp_path: Path) -> None:
    """Issue 34 (bug 2): an app that names threads ``conv-N`` and keeps ``user_id`` in the graph's
    state: the default template matched no thread, the scan found 0 of the user's records and
    ``forget`` signed ``passed`` while LangGraph's own ``list`` still showed the user's thread with
    their address. Now the state's ``user_id`` attributes the thread (default ``state_key``)."""
    import operator
    import sqlite3
    from typing import Annotated, TypedDict

    from langgraph.checkpoint.sqlite import SqliteSaver
    from langgraph.graph import END, START, StateGraph

    from traceless.systems import LangGraphSystem, erase_system, load_system_config, scan_system

    State = TypedDict("State", {"user_id": str, "notes": Annotated[list[str], operator.add]})  # noqa: UP013

    db = tmp_path / "checkpoints.db"
    conn = sqlite3.connect(str(db), check_same_thread=False)
    SqliteSaver(conn).setup()
    g = StateGraph(State)
    g.add_node("ack", lambda s: {"notes": ["noted"]})
    g.add_edge(START, "ack")
    g.add_edge("ack", END)
    app = g.compile(checkpointer=SqliteSaver(conn))
    secret = "Rue des Lilas 14, 75011 Paris"
    for tid, user, text in (("conv-1", "ann", f"my address is {secret}"), ("conv-2", "bob", "bob's own note")):
        app.invoke({"user_id": user, "notes": [text]}, {"configurable": {"thread_id": tid}})
    conn.close()
    cfg = load_system_config("langgraph", {"checkpointer": {"kind": "sqlite", "path": str(db)}})
    ro = LangGraphSystem.attach(cfg, read_only=True)
    try:
        mine = {json.loads(h.record_id)[0] for h in scan_system(ro, "ann", []).hits if h.owner_match}
    finally:
        ro.close()
    assert mine == {"conv-1"}, mine
    receipt = erase_system(LangGraphSystem.attach(cfg, read_only=False), "ann", [secret], state_dir=tmp_path / "s",
                           key=b"k" * 32)
    assert receipt.verification.passed
    conn = sqlite3.connect(str(db), check_same_thread=False)
    try:  # LangGraph's own API: ann's thread is gone, bob's is there
        saver = SqliteSaver(conn)
        assert list(saver.list({"configurable": {"thread_id": "conv-1"}})) == []
        assert list(saver.list({"configurable": {"thread_id": "conv-2"}}))
    finally:
        conn.close()
    assert secret.encode() not in db.read_bytes()


@lg_only
def test_langgraph_a_thread_two_users_wrote_in_is_refused_naming_it(tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 40.1 (a thread that two users wrote in went with the other user's messages, or
    stayed silently with the requester's): ann's thread ``ann:s1`` also holds a turn bob wrote
    (his invocation's metadata names him). ann's erasure is refused before any change, naming the
    thread and that one other user wrote in it; ann's thread of her own alone was not the problem."""
    db = tmp_path / "checkpoints.db"
    _echo_threads(db, [("ann", "ann:s1", "ann's note ANN-NOTE-5521"), ("ann", "ann:s2", "ann alone"),
                       ("bob", "ann:s1", "bob joins ann's thread: BOB-NOTE-7733")])
    cfg = tmp_path / "lg.json"
    cfg.write_text(json.dumps({"checkpointer": {"kind": "sqlite", "path": str(db)},
                               "users": {"namespace": ["memories", "{user_id}"], "thread_id": "{user_id}:{session_id}",
                                         "configurable": {"user_id": "{user_id}"}}}))
    before = _fingerprint(tmp_path)
    rc = cli("forget", "--memory", "langgraph", "--memory-config", str(cfg), "--user", "ann",
             "--receipt", str(tmp_path / "r.json"))
    err = capsys.readouterr().err
    assert rc == 6, err
    assert "1 thread(s) of the user were also written by other users" in err and "ann:s1" in err, err
    assert "ann:s2" not in err and "Nothing was changed" in err
    assert _fingerprint(tmp_path) == before
