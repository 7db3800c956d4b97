"""The LlamaIndex instance read narrowed (issue 39): given a user or literals, only the user's
records and those whose bytes hold a literal are decoded, with the same scan, plan and bystander
digests as the full decode of every record; an over-deletion is still seen by the digest."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import pytest

from traceless.memory import Session, Turn
from traceless.models import CachingBackend, HashingEmbedder, ScriptedBackend
from traceless.systems import (
    SystemRuntime,
    erase_system,
    kernel,
    load_system_config,
    open_system,
    system_class,
)

pytest.importorskip("llama_index.core")

from traceless.systems import _llamaindex_live as li_live  # noqa: E402
from traceless.systems.json_index import JsonIndex  # noqa: E402

ACCENT = "Zoë-Ærø 4411"
SLASH = "12/05/1990 K9"
QUOTED = 'say "hi" 7781'
SECRET = "SECRET-u1-5150"


def _session(user: str, sid: str, texts: Sequence[str]) -> Session:
    turns = [t for x in texts for t in (Turn(role="user", content=x), Turn(role="assistant", content="noted"))]
    return Session(user_id=user, session_id=sid, turns=turns)


def _live(tmp: Path) -> dict[str, Any]:
    """u1, u10 (u1 is its prefix) and u2; the literals in u1's records and quoted by u10's and u2's."""
    sessions = [
        _session("u1", "a", [f"my token is {SECRET}", f"born {SLASH}", f"name {ACCENT}", QUOTED]),
        _session("u1", "b", ["about the weather"]),
        _session("u10", "a", [f"u1 told me {SECRET}", "the weather u1 likes"]),
        _session("u2", "a", [f"I know {ACCENT} and {SLASH}", f"he said {QUOTED}"]),
    ]
    runtime = SystemRuntime(CachingBackend(ScriptedBackend(lambda m, c: "no")), HashingEmbedder(), "scripted")
    system = open_system("llamaindex", tmp / "live", load_system_config("llamaindex", {}), runtime)
    try:
        system.write(sessions)
    finally:
        system.close()
    return {"chat_db": str(tmp / "live" / "chat.db"), "persist_dir": str(tmp / "live" / "storage")}


class _Full(li_live.LlamaIndexInstance):
    """The same instance read whole: every record decoded, the kernel's own digest."""

    def counts(self) -> dict[str, int] | None:
        return None

    def _plain(self, idx: dict[str, JsonIndex], literals: Sequence[str]) -> bool:
        return False

    def server_bystanders(self, user: str | None, literals: Sequence[str],
                          removed: Iterable[tuple[str, str]]) -> list[tuple[tuple[str, str], str]] | None:
        return None


def _pair(conf: dict[str, Any]) -> tuple[li_live.LlamaIndexInstance, _Full]:
    chat, persist = Path(conf["chat_db"]), Path(conf["persist_dir"])
    return li_live.LlamaIndexInstance(chat, persist), _Full(chat, persist)


CASES = [("u1", [SECRET]), ("u10", []), ("u1", [ACCENT, SLASH]), (None, [ACCENT]), (None, [SLASH]),
         ("u2", [QUOTED]), ("u1", ["weather"]), ("nobody", [])]


@pytest.mark.parametrize("narrowed_max", [50_000, 0])
@pytest.mark.parametrize("user, literals", CASES)
def test_the_narrowed_scan_plan_and_digests_equal_the_full_decode(tmp_path: Path, user: str | None,
                                                                   literals: list[str], narrowed_max: int,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """The owners read for the user only (``user_keys``, ``owners_for``) and, with no candidate
    allowed (``NARROWED_MAX`` 0), every owner read as columns: the same scan, plan and digests."""
    from traceless.systems import _llamaindex_owners as li_owners

    monkeypatch.setattr(li_owners, "NARROWED_MAX", narrowed_max)
    narrow, full = _pair(_live(tmp_path))
    rep = kernel.scan("l", narrow, user, literals, reveal=True)
    assert rep == kernel.scan("l", full, user, literals, reveal=True)
    assert bool(rep.hits) == (user != "nobody")
    plan = kernel.plan("l", narrow, user, literals)
    assert plan == kernel.plan("l", full, user, literals)
    removed = {(a.store, a.record_id) for a in plan.actions if a.action == "remove"}
    assert kernel.bystander_digests(narrow, user, literals, removed) == kernel.bystander_digests(full, user, literals,
                                                                                                 removed)
    # the erasure's digest (per collection, the entries' bytes hashed) agrees with the full decode's
    # verdict: after the erasure both say every bystander is as it was
    before = narrow.bystander_digests(user, literals, removed)
    before_full = kernel.bystander_digests(full, user, literals, removed)
    assert set(before) == set(before_full)
    kernel.execute(narrow, plan, literals)
    assert kernel.bystander_digests(full, user, literals, removed) == before_full
    assert narrow.bystander_digests(user, literals, removed) == before
    if user == "u1":  # u10's records are never u1's (a prefix), u1's are found in every store
        assert {a.store for a in plan.actions if a.reason == "owned by the user"} >= {
            "chat_store", "docstore", "vector_store", "index_store"}


def test_the_narrowed_scan_decodes_no_other_users_embedding(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    narrow, _ = _pair(_live(tmp_path))
    decoded: list[str] = []
    real = JsonIndex.value

    def value(self: JsonIndex, e: Any) -> Any:
        if e.coll == "embedding_dict":
            decoded.append(e.key)
        return real(self, e)

    monkeypatch.setattr(JsonIndex, "value", value)
    rep = kernel.scan("l", narrow, "u1", [SECRET])
    assert decoded and all(k.startswith("u1/") for k in decoded)  # the user's nodes only
    assert rep.stores["vector_store"] > len(decoded)  # counted, not decoded


def _drop_entry(persist: Path, where: str) -> None:
    """Remove one of u10's entries (an embedding, or a node of the index struct), the file
    written again by ``json.dump`` as LlamaIndex writes it."""
    import json

    path = persist / ("default__vector_store.json" if where == "embedding entry" else "index_store.json")
    data = json.loads(path.read_text())
    if where == "embedding entry":
        del data["embedding_dict"][next(k for k in data["embedding_dict"] if k.startswith("u10/"))]
    else:
        struct = next(iter(data["index_store/data"].values()))
        inner = json.loads(struct["__data__"])
        del inner["nodes_dict"][next(k for k in inner["nodes_dict"] if k.startswith("u10/"))]
        struct["__data__"] = json.dumps(inner)
    path.write_text(json.dumps(data))


@pytest.mark.parametrize("where", ["embedding", "chat", "chat text", "node text", "embedding entry", "index node"])
def test_an_over_deletion_fails_the_bystander_check(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                    where: str) -> None:
    """An erasure of u1 that also changes or removes a record of u10 (u1 is its prefix) is caught
    by the digest."""
    conf = _live(tmp_path)
    real = li_live.LlamaIndexInstance.apply

    def apply(self: li_live.LlamaIndexInstance, ops: Sequence[Any], literals: Sequence[str]) -> Any:
        out = real(self, ops, literals)
        if where in ("embedding entry", "index node"):
            _drop_entry(Path(conf["persist_dir"]), where)
        elif where.startswith("chat"):
            import sqlite3
            con = sqlite3.connect(conf["chat_db"])
            con.execute("DELETE FROM llama_index_memory WHERE key = 'u10' AND role = 'assistant'" if where == "chat" else
                        "UPDATE llama_index_memory SET data = replace(data, 'weather', 'WEATHER') WHERE key = 'u10'")
            con.commit()
            con.close()
        else:
            path = Path(conf["persist_dir"]) / ("default__vector_store.json" if where == "embedding" else "docstore.json")
            text = path.read_text()
            old = "0.0, " if where == "embedding" else "the weather u1 likes"
            assert old in text
            path.write_text(text.replace(old, "0.5, " if where == "embedding" else "the weather", 1))
        return out

    monkeypatch.setattr(li_live.LlamaIndexInstance, "apply", apply)
    cfg = load_system_config("llamaindex", conf)
    receipt = erase_system(system_class("llamaindex").attach(cfg, read_only=False), "u1", [SECRET],
                           state_dir=tmp_path / "state", key=b"k" * 32)
    assert not receipt.verification.checks["bystanders_intact"]
    assert not receipt.verification.passed


def test_the_erasure_keeps_every_other_entrys_bytes(tmp_path: Path) -> None:
    conf = _live(tmp_path)
    store = Path(conf["persist_dir"]) / "default__vector_store.json"
    before = JsonIndex(store)
    theirs = {e.key: before.raw(e) for e in before.entries if not e.key.startswith("u1/")}
    receipt = erase_system(system_class("llamaindex").attach(load_system_config("llamaindex", conf), read_only=False),
                           "u1", [SECRET], state_dir=tmp_path / "state", key=b"k" * 32)
    assert receipt.verification.passed
    after = JsonIndex(store)
    assert {e.key: after.raw(e) for e in after.entries} == theirs  # spliced: the rest byte for byte


@pytest.mark.parametrize("native", [False, True])
def test_the_erasure_passes_with_or_without_llamaindexs_own_index_deletion(tmp_path: Path, native: bool) -> None:
    """``index_native_deletion`` (LlamaIndex loads, deletes and persists the whole index) or not
    (the kernel splices the same entries out): the same stores end clear, the bystanders intact."""
    conf = _live(tmp_path) | {"index_native_deletion": native}
    cfg = load_system_config("llamaindex", conf)
    receipt = erase_system(system_class("llamaindex").attach(cfg, read_only=False), "u1", [SECRET],
                           state_dir=tmp_path / "state", key=b"k" * 32)
    assert receipt.verification.passed and receipt.verification.checks["bystanders_intact"]
    assert {g.split("=")[1] for g in receipt.guarantee} == {"clear"}
    narrow, _ = _pair(conf)
    assert not [r for r in narrow.records("u1", [SECRET]) if r.owner == "u1" or SECRET in r.text()]


@pytest.mark.parametrize("overdelete", [False, True])
def test_a_rerun_tells_the_apps_new_memories_from_an_over_deletion(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                     overdelete: bool) -> None:
    """The first run dies in its JSON rewrite (having removed one of u10's embeddings, or not);
    the application then writes a new memory of u2 (LlamaIndex appends its entries); the re-run
    compares the entries the first run digested apart from the appended ones: it passes when
    nothing of a bystander went, and fails its bystander check when one did."""
    conf = _live(tmp_path)
    cls = system_class("llamaindex")
    cfg = load_system_config("llamaindex", conf)

    def crash(*a: Any, **k: Any) -> Any:
        if overdelete:
            _drop_entry(Path(conf["persist_dir"]), "embedding entry")
        raise KeyboardInterrupt

    monkeypatch.setattr(li_live, "erase_json", crash)
    with pytest.raises(KeyboardInterrupt):
        erase_system(cls.attach(cfg, read_only=False), "u1", [SECRET], state_dir=tmp_path / "s", key=b"k" * 32)
    monkeypatch.undo()
    runtime = SystemRuntime(CachingBackend(ScriptedBackend(lambda m, c: "no")), HashingEmbedder(), "scripted")
    app = open_system("llamaindex", tmp_path / "live", load_system_config("llamaindex", {}), runtime)
    try:
        app.write([_session("u2", "new", ["a new memory APPNOTE-7"])])
    finally:
        app.close()
    receipt = erase_system(cls.attach(cfg, read_only=False), "u1", [SECRET], state_dir=tmp_path / "s", key=b"k" * 32)
    assert receipt.verification.checks["bystanders_intact"] is not overdelete
    assert receipt.verification.passed is not overdelete


def test_the_owners_read_from_the_index_are_those_of_the_records(tmp_path: Path) -> None:
    conf = _live(tmp_path)
    idx = li_live.indexes(Path(conf["persist_dir"]))
    assert all(ix.columnar for ix in idx.values())  # the owners read at C speed (``_Owned``)
    own = li_live.owners(li_live.owner_records(idx))
    assert {"u1", "u10", "u2"} <= set(own.values())
    assert li_live.owners_of(idx) == own


def test_the_index_and_owners_kept_after_the_rewrite_are_those_of_the_written_files(tmp_path: Path) -> None:
    """The erasure keeps each rewritten file's index and owner columns derived from the old ones
    (no decode); they equal a fresh decode of the files it wrote."""
    conf = _live(tmp_path)
    cls = system_class("llamaindex")
    # every owner read first (as a scan without a user does): the rewrite derives the new files' owner columns
    li_live.owners_of({s: li_live.cached(p) for s, p in li_live.json_files(Path(conf["persist_dir"])).items()})
    receipt = erase_system(cls.attach(load_system_config("llamaindex", conf), read_only=False), "u1", [SECRET, ACCENT],
                           state_dir=tmp_path / "s", key=b"k" * 32)
    assert receipt.verification.passed
    persist = Path(conf["persist_dir"])
    kept = {s: li_live.cached(p) for s, p in li_live.json_files(persist).items()}
    assert any(li_live._OWNED in ix.memo and ix.columnar for ix in kept.values())
    fresh = li_live.indexes(persist)
    for store, ix in kept.items():
        assert [(e.coll, e.key, e.start, e.vstart, e.end) for e in ix.entries] == [
            (e.coll, e.key, e.start, e.vstart, e.end) for e in fresh[store].entries]
    assert li_live.owners_of(kept) == li_live.owners(li_live.owner_records(fresh))
