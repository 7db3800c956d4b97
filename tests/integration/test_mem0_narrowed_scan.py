"""mem0 on qdrant local decodes only the points whose bytes may be the user's or hold a
literal (issue 39): on an instance written to trip that selection (prefix user ids, literals
in a nested value, after a JSON escape, non-ASCII, in a number, history rows of other users'
memories, orphans) the scan and the plan find exactly what decoding every point finds; the
bystander digest over the stored bytes still flags a point or history row of another user
removed or changed during the erasure."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mem0")

from traceless.systems import load_system_config, system_class  # noqa: E402

ODD = ["CANARY-plain-5521", "Ñandú-secret-77", "nested-LIT-7781", "nSecret-991", 'say "hi" 4242-q',
       "5551234567", "tab\there-55x", "alice@example.com"]
"""Literals: plain; non-ASCII; inside a list value; after a ``\\n`` escape in a nested value
(the JSON text holds ``nSecret``, the bytes ``\\nSecret``); a quote (no needle: every point is
decoded); a number (an int payload value); a control character; a first letter an escape may end with."""


def _payloads() -> list[dict[str, Any]]:
    base = {"hash": "h", "created_at": "2026-12-01T00:00:00+00:00"}
    rows = [
        {"user_id": "u1", "data": f"u1 holds {ODD[0]}"},
        {"user_id": "u10", "data": f"u10 holds {ODD[0]} and {ODD[1]}"},
        {"user_id": "u100", "data": "u100 plain"},
        {"user_id": "u1", "data": "u1 tags", "tags": ["x", ODD[2]]},
        {"user_id": "u10", "data": "u10 note", "notes": ["line\nSecret-991 here"]},
        {"data": f"no owner holds {ODD[3]} and {ODD[6]}"},
        {"user_id": "ü-user", "data": f"escaped {json.dumps(ODD[1])[1:-1]} {ODD[4]}"},
        {"user_id": "u1", "data": "u1 phone", "phone": 5551234567},
        {"user_id": "u10", "data": f"contact {ODD[7]}"},
        {"user_id": "u2", "data": "u2 alone"},
    ]
    return [{**base, **r} for r in rows]


def _build(root: Path, home: Path) -> dict[str, Any]:
    import numpy as np

    from traceless.systems._mem0 import _import_mem0

    _import_mem0(home)
    from mem0.memory.storage import SQLiteManager
    from mem0.utils.factory import VectorStoreFactory
    from mem0.vector_stores.configs import VectorStoreConfig

    cfg = {"vector_store": {"provider": "qdrant", "config": {"path": str(root / "qdrant"), "collection_name": "mem",
                                                            "embedding_model_dims": 8}},
           "history_db_path": str(root / "history.db"), "traceless": {"infer": False}}
    vc = VectorStoreConfig(**cfg["vector_store"])
    store, db = VectorStoreFactory.create(vc.provider, vc.config), SQLiteManager(cfg["history_db_path"])
    payloads = _payloads()
    ids = [f"00000000-0000-4000-8000-{i:012d}" for i in range(len(payloads))]
    store.insert(vectors=np.random.default_rng(0).standard_normal((len(ids), 8)).tolist(), payloads=payloads, ids=ids)
    ents = VectorStoreFactory.create(vc.provider, {**vc.config.model_dump(), "collection_name": "mem_entities",
                                                   "client": store.client})
    ents.insert(vectors=[[0.1] * 8], payloads=[{"user_id": "u1", "data": f"entity {ODD[0]}"}],
                ids=["00000000-0000-4000-8000-100000000000"])
    db.batch_add_history([{"memory_id": i, "new_memory": p["data"], "event": "ADD"} for i, p in zip(ids, payloads,
                                                                                                   strict=True)])
    db.batch_add_history([
        {"memory_id": ids[2], "old_memory": "u100 plain", "new_memory": f"u100 learnt {ODD[0]}", "event": "UPDATE"},
        {"memory_id": "00000000-dead-4000-8000-000000000000", "new_memory": f"orphan {ODD[1]}", "event": "ADD"},
        {"memory_id": "00000000-dead-4000-8000-000000000001", "new_memory": "orphan plain", "event": "ADD"},
        {"memory_id": None, "new_memory": f"no memory {ODD[3]}", "event": "ADD"}])
    db.save_messages([{"role": "user", "content": f"remember {ODD[0]}"}], "user_id=u1")
    db.save_messages([{"role": "user", "content": "u10's message"}], "user_id=u10")
    db.close()
    store.client.close()
    return cfg


@pytest.fixture(scope="module")
def inst(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("narrow")
    return _build(tmp / "m", tmp / "home")


def _live(cfg: dict[str, Any], read_only: bool = True) -> Any:
    return system_class("mem0").attach(load_system_config("mem0", cfg), read_only=read_only).live  # type: ignore[attr-defined]


class _Full:
    """``live`` reading every record (the reference the narrowed read must equal)."""

    def __init__(self, live: Any) -> None:
        self._live = live

    def records_for(self, user: str | None, literals: Any) -> Any:
        return self._live.records()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._live, name)


def _hits(rep: Any) -> list[tuple[Any, ...]]:
    return sorted((h.store, h.record_id, h.field, h.owner_match, h.literal_count, h.owner, h.unattributable)
                  for h in rep.hits)


CASES = [("u1", []), ("u10", []), ("u1", ODD[:1]), ("u1", ODD), (None, ODD), ("u10", [ODD[1]]), ("u10", [ODD[3]]),
         ("ü-user", [ODD[1]]), ("u1", [ODD[5]]), ("u100", [ODD[0]]), ("nobody", ODD[:4]), ("u2", [ODD[7]]),
         (None, [ODD[2], ODD[6]])]


@pytest.mark.parametrize(("user", "literals"), CASES)
def test_the_narrowed_scan_and_plan_find_what_decoding_every_point_finds(
        inst: dict[str, Any], user: str | None, literals: list[str]) -> None:
    from traceless.systems._mem0_live import Mem0Live

    live = _live(inst)
    full = _Full(live)
    narrowed, reference = live.scan(user, literals, True), Mem0Live.scan(full, user, literals, True)  # type: ignore[arg-type]
    assert _hits(narrowed) == _hits(reference)
    assert [h.value for h in sorted(narrowed.hits, key=lambda h: (h.store, h.record_id, h.field))] == \
        [h.value for h in sorted(reference.hits, key=lambda h: (h.store, h.record_id, h.field))]
    assert narrowed.stores == reference.stores and narrowed.unattributable == reference.unattributable
    assert sorted(live.plan(user, literals).actions, key=repr) == \
        sorted(Mem0Live.plan(full, user, literals).actions, key=repr)  # type: ignore[arg-type]


def test_the_scan_decodes_only_the_selected_points(inst: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    from traceless.systems import _mem0_live

    loaded: list[int] = []
    real = _mem0_live._load_point
    monkeypatch.setattr(_mem0_live, "_load_point", lambda b: loaded.append(1) or real(b))
    rep = _live(inst).scan("u2", [], False)
    assert sorted(h.store for h in rep.hits) == ["history", "vector_store"] and rep.stores["vector_store"] == 10
    assert len(loaded) == 1  # u2's one point, of 11


def _copy(inst: dict[str, Any], dst: Path) -> dict[str, Any]:
    import shutil

    src = Path(inst["history_db_path"]).parent
    shutil.copytree(src, dst)
    return json.loads(json.dumps(inst).replace(str(src), str(dst)))


def _other_point_removed(cfg: dict[str, Any]) -> None:
    con = sqlite3.connect(Path(cfg["vector_store"]["config"]["path"]) / "collection" / "mem" / "storage.sqlite")
    with con:
        (key, blob), = con.execute("SELECT id, point FROM points WHERE instr(point, ?) > 0", (b"u2 alone",)).fetchall()
        con.execute("DELETE FROM points WHERE id = ?", (key,))
    con.close()


def _other_point_changed(cfg: dict[str, Any]) -> None:
    con = sqlite3.connect(Path(cfg["vector_store"]["config"]["path"]) / "collection" / "mem" / "storage.sqlite")
    with con:
        (key, blob), = con.execute("SELECT id, point FROM points WHERE instr(point, ?) > 0", (b"u2 alone",)).fetchall()
        con.execute("UPDATE points SET point = ? WHERE id = ?", (blob.replace(b"u2 alone", b"u2 alonE"), key))
    con.close()


def _other_history_changed(cfg: dict[str, Any]) -> None:
    con = sqlite3.connect(cfg["history_db_path"])
    with con:
        con.execute("UPDATE history SET new_memory = 'u100 plain!' WHERE new_memory = 'u100 plain'")
    con.close()


def _other_history_removed(cfg: dict[str, Any]) -> None:
    con = sqlite3.connect(cfg["history_db_path"])
    with con:
        con.execute("DELETE FROM history WHERE new_memory = 'orphan plain'")
    con.close()


@pytest.mark.parametrize(("plant", "store"), [(None, None), (_other_point_removed, "vector_store"),
                                              (_other_point_changed, "vector_store"),
                                              (_other_history_changed, "history"),
                                              (_other_history_removed, "history")])
def test_an_over_deletion_during_the_erasure_is_flagged(inst: dict[str, Any], tmp_path: Path, plant: Any,
                                                       store: str | None, monkeypatch: pytest.MonkeyPatch) -> None:
    """u1's erasure, with another user's point or history row removed or changed while it
    runs (planted after mem0's own deletion): the receipt fails ``bystanders_intact`` and
    names the store; without a plant it passes."""
    from traceless.systems import _mem0_live, erase_system

    cfg = _copy(inst, tmp_path / "m")
    real = _mem0_live.Mem0Live._compact_vectors

    def compact(self: Any, *a: Any) -> Any:
        if plant is not None:
            plant(cfg)
        return real(self, *a)

    monkeypatch.setattr(_mem0_live.Mem0Live, "_compact_vectors", compact)
    system = system_class("mem0").attach(load_system_config("mem0", cfg), read_only=False)
    r = erase_system(system, "u1", [ODD[2]], state_dir=tmp_path / "state", key=b"k" * 32)
    assert r.verification.checks["bystanders_intact"] is (plant is None), r.notes
    if store is not None:
        assert any(n.startswith("OVER-DELETION") and store in n for n in r.notes)


def test_the_erasure_never_loads_the_collection(inst: dict[str, Any], tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """On qdrant local the lock is taken as qdrant's client takes it and the points are
    deleted by key: no qdrant client (which unpickles every point first) is opened."""
    from qdrant_client.local import qdrant_local

    from traceless.systems import erase_system

    def refuse(*a: Any, **k: Any) -> None:
        raise AssertionError("QdrantLocal opened: every point loaded")

    monkeypatch.setattr(qdrant_local.QdrantLocal, "__init__", refuse)
    cfg = _copy(inst, tmp_path / "m")
    system = system_class("mem0").attach(load_system_config("mem0", cfg), read_only=False)
    r = erase_system(system, "u1", [ODD[2]], state_dir=tmp_path / "state", key=b"k" * 32)
    assert r.verification.passed
    assert _live(cfg).scan("u1", [ODD[2]], False).hits == []


def test_point_keys_decode_to_the_ids_they_encode() -> None:
    """``decode_ids`` (the orphan check's keys decoded at once) inverts ``encode_keys`` for
    UUIDs, digit strings, integers and non-ASCII ids; a key no id encodes to is no id."""
    from traceless.systems._mem0_qdrant import decode_ids, encode_key, encode_keys

    ids = [f"00000000-0000-4000-8000-{i:012d}" for i in range(50)] + ["5", "05", "ñandú-ü", "x" * 36]
    keys = [*encode_keys(ids), encode_key(7), "not-a-key", encode_key(7)[:-4]]
    assert decode_ids(keys) == {i.encode() for i in [*ids, "7"]}


def test_the_float_run_is_the_vector_and_nothing_else(inst: dict[str, Any]) -> None:
    """``may_hold`` skips a point's unnamed vector: the run found is exactly its floats (a
    ``BINFLOAT`` each), the payload right after; a pickle laid out otherwise is searched whole."""
    import pickle

    from traceless.systems._mem0_live import _load_point
    from traceless.systems._mem0_qdrant import float_run

    con = sqlite3.connect(Path(inst["vector_store"]["config"]["path"]) / "collection" / "mem" / "storage.sqlite")
    blobs = [b for (b,) in con.execute("SELECT point FROM points")]
    con.close()
    for b in blobs:
        lo, hi = float_run(b) or (0, 0)
        assert hi - lo == 9 * 8 and b[hi:].startswith(b"es\x8c\x07payload")  # 8 dims
        assert pickle.loads(b"(" + b[lo:hi] + b"l.") == _load_point(b).vector[""]  # noqa: S301 - the test's own bytes
    assert float_run(pickle.dumps({"vector": {"a": [1.0]}, "payload": {}})) is None
