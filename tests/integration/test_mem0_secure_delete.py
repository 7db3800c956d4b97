"""mem0 on qdrant local (issue 39): the erasure deletes with ``secure_delete`` and VACUUMs only
a file the verification's byte scan still finds a literal in; the claim is what the last byte
scan proved. The bystander digest covers the containers the erasure touches (key neighbours)
and each table's count: an over-deletion anywhere, and a change inside a touched container,
are flagged; rows another writer adds are not an over-deletion."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mem0")

from traceless.forget import scan_files  # noqa: E402
from traceless.systems import erase_system, load_system_config, system_class  # noqa: E402
from traceless.systems._mem0_qdrant import encode_key  # noqa: E402

USERS, PER_USER = 40, 10
SECRET = "IBAN-DE89-3704-0044-0532"


def _build(root: Path, home: Path) -> dict[str, Any]:
    """400 memories of 40 users, and one memory (with the secret) of the user ``t``."""
    import numpy as np

    from traceless.systems._mem0 import _import_mem0

    _import_mem0(home)
    from mem0.memory.storage import SQLiteManager
    from mem0.utils.factory import VectorStoreFactory
    from mem0.vector_stores.configs import VectorStoreConfig

    cfg = {"vector_store": {"provider": "qdrant", "config": {"path": str(root / "qdrant"), "collection_name": "mem",
                                                            "embedding_model_dims": 4}},
           "history_db_path": str(root / "history.db"), "traceless": {"infer": False}}
    vc = VectorStoreConfig(**cfg["vector_store"])
    store, db = VectorStoreFactory.create(vc.provider, vc.config), SQLiteManager(cfg["history_db_path"])
    payloads = [{"user_id": f"u{i % USERS}", "data": f"u{i % USERS} memory {i}"} for i in range(USERS * PER_USER)]
    payloads.append({"user_id": "t", "data": f"t holds {SECRET}"})
    ids = [f"00000000-0000-4000-8000-{i * 7919 % 1000003:012d}" for i in range(len(payloads))]
    store.insert(vectors=np.random.default_rng(0).standard_normal((len(ids), 4)).tolist(), payloads=payloads, ids=ids)
    db.batch_add_history([{"memory_id": i, "new_memory": p["data"], "event": "ADD"}
                          for i, p in zip(ids, payloads, strict=True)])
    db.close()
    store.client.close()
    return cfg


@pytest.fixture(scope="module")
def inst(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("secure")
    return _build(tmp / "m", tmp / "home")


def _copy(inst: dict[str, Any], dst: Path) -> dict[str, Any]:
    src = Path(inst["history_db_path"]).parent
    shutil.copytree(src, dst)
    return json.loads(json.dumps(inst).replace(str(src), str(dst)))


def _points_db(cfg: dict[str, Any]) -> Path:
    return Path(cfg["vector_store"]["config"]["path"]) / "collection" / "mem" / "storage.sqlite"


def _erase(cfg: dict[str, Any], tmp: Path) -> Any:
    system = system_class("mem0").attach(load_system_config("mem0", cfg), read_only=False)
    return erase_system(system, "t", [SECRET], state_dir=tmp / "state", key=b"k" * 32)


def _files(cfg: dict[str, Any]) -> list[Path]:
    return [p for p in Path(cfg["history_db_path"]).parent.rglob("*") if p.is_file()]


def _vacuums(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    from traceless.systems import _mem0_live

    done: list[str] = []
    real = _mem0_live._vacuum
    monkeypatch.setattr(_mem0_live, "_vacuum", lambda p: done.append(Path(p).name) or real(p))
    return done


def test_the_erasure_vacuums_nothing_when_secure_delete_left_no_byte(
        inst: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = _copy(inst, tmp_path / "m")
    done = _vacuums(monkeypatch)
    r = _erase(cfg, tmp_path)
    assert r.verification.passed and r.guarantee == [f"{s}=clear" for s in sorted(
        ("entity_store", "history", "messages", "vector_store"))], r.verification.checks
    assert done == []  # secure_delete zeroed the records: no VACUUM of the whole file
    assert sum(scan_files(_files(cfg), [SECRET]).values()) == 0
    assert any("secure_delete" in n for n in r.notes)


def _plant_free_bytes(cfg: dict[str, Any]) -> None:
    """A history row holding the secret, written and deleted without secure_delete after the
    erasure's deletions: its bytes stay in the page's free space (what a writer that does not
    set secure_delete may leave)."""
    con = sqlite3.connect(cfg["history_db_path"])
    con.execute("PRAGMA secure_delete = OFF")
    with con:
        con.execute("INSERT INTO history (id, memory_id, new_memory, event) VALUES ('zz-planted', NULL, ?, 'ADD')",
                    (f"planted {SECRET}",))
    with con:
        con.execute("DELETE FROM history WHERE id = 'zz-planted'")
    con.close()


@pytest.mark.parametrize("compact", [True, False])
def test_bytes_left_after_the_deletion_are_vacuumed_or_never_claimed_clear(
        inst: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, compact: bool) -> None:
    """Free-space bytes of the secret after the deletion: the verification finds them, the
    history db alone is VACUUMed and verified again (clear); with the compaction hook gone
    the receipt fails ``files_clean`` and claims no store ``clear``."""
    from traceless.systems import _mem0_live

    cfg = _copy(inst, tmp_path / "m")
    real = _mem0_live.Mem0Live._compact_vectors

    def plant_after_the_deletion(self: Any, *a: Any) -> Any:
        _plant_free_bytes(cfg)
        assert scan_files([Path(cfg["history_db_path"])], [SECRET])[cfg["history_db_path"]] > 0
        return real(self, *a)

    monkeypatch.setattr(_mem0_live.Mem0Live, "_compact_vectors", plant_after_the_deletion)
    done = _vacuums(monkeypatch)
    if not compact:
        monkeypatch.setattr(_mem0_live.Mem0Live, "compact_residue", lambda self, names: [])
    r = _erase(cfg, tmp_path)
    left = sum(scan_files(_files(cfg), [SECRET]).values())
    assert r.verification.checks["files_clean"] is compact and r.verification.passed is compact
    assert all(g.endswith("=logical") for g in r.guarantee) is (not compact), r.guarantee
    assert (left == 0) is compact
    assert done == (["history.db"] if compact else [])
    assert any("VACUUM history.db" in n for n in r.notes) is compact


def _digest_ranges(cfg: dict[str, Any]) -> tuple[list[tuple[str, str | None]], dict[str, Any]]:
    system = system_class("mem0").attach(load_system_config("mem0", cfg), read_only=True)
    system.plan_erasure("t", [SECRET])
    d = system.bystander_digests("t")
    return [tuple(json.loads(e[len("range:"):])) for e in d["vector_store"] if e.startswith("range:")], d


def test_the_digest_covers_the_touched_container_not_the_whole_collection(inst: dict[str, Any]) -> None:
    ranges, d = _digest_ranges(inst)
    rows = [e for e in d["vector_store"] if e.startswith("row:")]
    assert len(ranges) == 1 and 0 < len(rows) <= 64 < USERS * PER_USER  # t's one point: its neighbours only
    assert f"rows:{USERS * PER_USER}" in d["vector_store"] and f"rows:{USERS * PER_USER}" in d["history"]


def _pick(cfg: dict[str, Any], inside: bool) -> str:
    """A key of another user's point inside (or outside) the container t's erasure touches."""
    ranges, _ = _digest_ranges(cfg)
    lo, hi = ranges[0]
    con = sqlite3.connect(_points_db(cfg))
    keys = [k for (k,) in con.execute("SELECT id FROM points WHERE instr(point, 't holds') = 0 ORDER BY id")]
    con.close()
    return next(k for k in keys if (lo <= k and (hi is None or k <= hi)) is inside)


def _plant(cfg: dict[str, Any], how: str, key: str) -> None:
    con = sqlite3.connect(_points_db(cfg))
    with con:
        if how == "remove-far":
            con.execute("DELETE FROM points WHERE id = ?", (key,))
        elif how == "change-near":
            (blob,), = con.execute("SELECT point FROM points WHERE id = ?", (key,)).fetchall()
            con.execute("UPDATE points SET point = ? WHERE id = ?", (blob.replace(b"memory", b"memorY"), key))
        elif how == "add":
            (blob,), = con.execute("SELECT point FROM points WHERE id = ?", (key,)).fetchall()
            con.execute("INSERT INTO points VALUES (?, ?)", (encode_key("ffffffff-0000-4000-8000-000000000000"), blob))
    con.close()


@pytest.mark.parametrize(("how", "lost"), [(None, False), ("remove-far", True), ("change-near", True),
                                           ("add", False)])
def test_over_deletions_are_flagged_and_additions_are_not(inst: dict[str, Any], tmp_path: Path, how: str | None,
                                                          lost: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """Planted while the erasure runs (after its deletions): a point outside the touched
    container removed (the count), one inside it changed (its row digest): over-deletion; a
    point another writer added: said as added, the receipt passes."""
    from traceless.systems import _mem0_live

    cfg = _copy(inst, tmp_path / "m")
    key = _pick(cfg, inside=how == "change-near")
    real = _mem0_live.Mem0Live._compact_vectors

    def compact(self: Any, *a: Any) -> Any:
        if how is not None:
            _plant(cfg, how, key)
        return real(self, *a)

    monkeypatch.setattr(_mem0_live.Mem0Live, "_compact_vectors", compact)
    r = _erase(cfg, tmp_path)
    assert r.verification.checks["bystanders_intact"] is (not lost), r.notes
    assert any(n.startswith("OVER-DELETION") and "vector_store" in n for n in r.notes) is lost
    assert any("were added in vector_store" in n for n in r.notes) is (how == "add")
