"""``traceless scan`` / ``traceless forget --memory mem0`` on a mem0 instance built from a
user-style config (issue #23): qdrant local path and chroma persistent, a history path of
its own, three users, ``infer=False``.

* the erasure leaves 0 copies of the user's canaries in every store and 0 bytes in every
  file, where mem0's own ``delete_all`` leaves 2 rows in ``history`` (the contrast);
* the other two users' records are unchanged (their digests, before and after);
* the receipt verifies with the public key alone (a fresh home without any key);
* ``scan`` shows it before and after without changing one byte or mtime of any file.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import shutil
import sys
import uuid
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "unit"))

import _mem0_instance as mi  # noqa: E402
from _cli import cli  # noqa: E402

pytestmark = [pytest.mark.integration,
              pytest.mark.skipif(importlib.util.find_spec("mem0") is None, reason="needs traceless[mem0]")]

PROVIDERS = ["qdrant", pytest.param("chroma", marks=pytest.mark.skipif(
    importlib.util.find_spec("chromadb") is None, reason="needs chromadb"))]


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, Path]]:
    base = tmp_path_factory.mktemp("mem0-instances")
    out = {}
    for p in ("qdrant", "chroma"):
        if p == "chroma" and importlib.util.find_spec("chromadb") is None:
            continue
        out[p] = (base / p, mi.build(base / p, p, base / "mem0-home"))
    return out


def _copy(built: dict[str, tuple[Path, Path]], provider: str, dst: Path) -> Path:
    src, cfg = built[provider]
    shutil.copytree(src, dst)
    return mi.relocate(cfg, src, dst)


def _fingerprint(root: Path) -> dict[str, tuple[str, int]]:
    return {str(p): (hashlib.sha256(p.read_bytes()).hexdigest(), p.stat().st_mtime_ns)
            for p in sorted(root.rglob("*")) if p.is_file()}


def _scan(cfg: Path, user: str, *literals: str) -> dict[str, object]:
    from traceless import scan

    return scan("mem0", cfg, user=user, literals=literals).model_dump()


def _copies(report: dict[str, object]) -> dict[str, int]:
    """Records per store that the scan found (a record with the canary in two fields counts once)."""
    out: dict[str, int] = {}
    for store, _ in {(h["store"], h["record_id"]) for h in report["hits"]}:  # type: ignore[union-attr]
        out[store] = out.get(store, 0) + 1
    return out


def _canaries(user: str) -> list[str]:
    return [mi.canary(user, i) for i in range(mi.MEMORIES)]


def _follows_schema(name: str, doc: object) -> None:
    """Issue 36.8: ``doc`` is valid under the published ``docs/schemas/NAME.json``."""
    import jsonschema

    schema = json.loads((Path(__file__).resolve().parents[2] / "docs" / "schemas" / f"{name}.json").read_text())
    jsonschema.validate(doc, schema)


def _lit_args(user: str) -> list[str]:
    return [a for c in _canaries(user) for a in ("--literal", c)]


@pytest.mark.parametrize("provider", PROVIDERS)
def test_scan_is_read_only_and_finds_every_store(built: dict[str, tuple[Path, Path]], provider: str,
                                                 tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = _copy(built, provider, tmp_path / "inst")
    before = _fingerprint(tmp_path / "inst")
    assert cli("scan", "--memory", "mem0", "--memory-config", str(cfg), "--user", "alice", *_lit_args("alice"),
               "--json") == 0
    report = json.loads(capsys.readouterr().out)
    _follows_schema("scan-result", report)
    assert _fingerprint(tmp_path / "inst") == before  # not one byte, not one mtime, no new file
    copies = _copies(report)
    assert copies["vector_store"] == 3 and copies["history"] == 3 and copies["messages"] == 1
    assert sum(f["count"] for f in report["files"]) > 0
    assert all(h["value"] is None for h in report["hits"])  # values only with --reveal
    if provider == "qdrant":
        assert copies["entity_store"] == 1
    else:
        assert copies["chroma_log"] == 3


def _bystander_hits(report: dict[str, object], rebuilt: bool) -> list[dict[str, object]]:
    """A scan's hits as the bystander check compares them. When chroma had flushed an erased
    vector to its HNSW segment (chromadb 1.5.9 does so, or not, by timing after a client
    opens the collection), the erasure rebuilds the collection: the remaining records are
    added again, so their log entries (``chroma_log``) get new sequence numbers, in another
    order; only then the log's record ids are left out of the comparison."""
    hits = report["hits"]
    assert isinstance(hits, list)
    if not rebuilt:
        return hits
    masked = [{**h, "record_id": None} if h["store"] == "chroma_log" else h for h in hits]
    return sorted(masked, key=lambda h: json.dumps(h, sort_keys=True))


@pytest.mark.parametrize("provider", PROVIDERS)
def test_forget_erases_user_everywhere_keeps_bystanders_and_signs(
        built: dict[str, tuple[Path, Path]], provider: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    from traceless.systems import load_system_config, system_class

    cfg = _copy(built, provider, tmp_path / "inst")
    others = {u: _scan(cfg, u, *_canaries(u)) for u in ("bob", "carol")}
    live = system_class("mem0").attach(load_system_config("mem0", cfg), read_only=True)
    digests = live.bystander_digests("alice")
    receipt = tmp_path / "receipt.json"
    assert cli("forget", "--memory", "mem0", "--memory-config", str(cfg), "--user", "alice", *_lit_args("alice"),
               "--receipt", str(receipt)) == 0
    capsys.readouterr()
    after = _scan(cfg, "alice", *_canaries("alice"))
    assert after["hits"] == [] and after["files"] == []  # 0 copies in every store, 0 bytes in every file
    assert after["files_scanned"] == len([p for p in (tmp_path / "inst").rglob("*") if p.is_file()])
    # the other users' records are exactly what they were
    assert live.bystander_digests("alice") == digests
    r = json.loads(receipt.read_text())
    rebuilt = any("rebuilt from its" in n for n in r["notes"])
    for u, rep in others.items():
        now = _scan(cfg, u, *_canaries(u))
        assert _bystander_hits(now, rebuilt) == _bystander_hits(rep, rebuilt) and now["stores"] == {
            **rep["stores"], **{s: n for s, n in now["stores"].items()}}
        assert _copies(now) == _copies(rep)
    assert r["verification"]["passed"] and r["verification"]["checks"]["bystanders_intact"]
    assert "alice" not in receipt.read_text() and "CANARY" not in receipt.read_text()
    assert set(r["guarantee"]) >= {"history=clear", "vector_store=clear", "messages=clear"}
    # verification with the public key alone, on a machine that has no key of its own
    pub = tmp_path / "signer.pub"
    assert cli("keys", "export", "--out", str(pub)) == 0
    monkeypatch.setenv("TRACELESS_HOME", str(tmp_path / "verifier-home"))
    assert cli("forget", "verify", str(receipt), "--public-key", str(pub)) == 0
    assert not (tmp_path / "verifier-home").exists() or not any((tmp_path / "verifier-home").iterdir())
    tampered = tmp_path / "tampered.json"
    tampered.write_text(receipt.read_text().replace('"passed": true', '"passed": false', 1))
    assert cli("forget", "verify", str(tampered), "--public-key", str(pub)) != 0


def test_mem0_own_delete_all_leaves_two_history_rows(built: dict[str, tuple[Path, Path]], tmp_path: Path) -> None:
    """The contrast: mem0's own per-user deletion keeps the canary twice in history (the ADD
    row's new_memory and the DELETE row's old_memory), the entity and the messages row."""
    cfg_path = _copy(built, "qdrant", tmp_path / "inst")
    cfg = json.loads(cfg_path.read_text())
    mem = mi.mem0_memory(cfg, tmp_path / "home")
    try:
        mem.delete_all(user_id="alice")
    finally:
        mi.close(mem, "qdrant")
    rep = _scan(cfg_path, "alice", mi.canary("alice", 0))
    hist = [h for h in rep["hits"] if h["store"] == "history"]  # type: ignore[union-attr]
    assert len(hist) == 2 and _copies(rep)["history"] == 2 and {h["field"] for h in hist} == {"new_memory", "old_memory"}
    assert _copies(rep).get("messages") == 1 and _copies(rep).get("vector_store") is None


def test_bad_input_is_refused_before_anything_is_opened(built: dict[str, tuple[Path, Path]], tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    cfg = json.loads(_copy(built, "qdrant", tmp_path / "inst").read_text())
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({**cfg, "colour": "blue"}))
    assert cli("scan", "--memory", "mem0", "--memory-config", str(bad), "--user", "alice") == 2
    err = capsys.readouterr().err
    assert "'colour'" in err and "Keys it accepts" in err and "vector_store" in err
    bad.write_text(json.dumps({**cfg, "traceless": {"infer": False, "topk": 3}}))
    assert cli("forget", "--memory", "mem0", "--memory-config", str(bad), "--user", "alice") == 2
    assert "traceless.topk" in capsys.readouterr().err
    assert cli("scan", "--memory", "mem0", "--memory-config", str(tmp_path / "nope.json"), "--user", "a") == 2
    gone = tmp_path / "gone"
    for key in ("history_db_path", "vector_store"):
        moved = json.loads(json.dumps(cfg))
        if key == "history_db_path":
            moved[key] = str(gone / "history.db")
        else:
            moved[key]["config"]["path"] = str(gone / "qdrant")
        bad.write_text(json.dumps(moved))
        assert cli("forget", "--memory", "mem0", "--memory-config", str(bad), "--user", "alice") == 2
        assert "does not exist" in capsys.readouterr().err
        assert not gone.exists()  # no empty store was created
    cfg_path = tmp_path / "inst.json"
    before = _fingerprint(tmp_path / "inst")
    assert cli("scan", "--memory", "mem0", "--memory-config", str(cfg_path), "--user", "nobody") == 7
    assert cli("forget", "--memory", "mem0", "--memory-config", str(cfg_path), "--user", "nobody",
               "--receipt", str(tmp_path / "r.json")) == 7
    assert "nothing" in capsys.readouterr().err
    assert not (tmp_path / "r.json").exists()
    assert cli("forget", "--memory", "mem0", "--memory-config", str(cfg_path), "--user", "alice", "--dry-run") == 0
    assert "remove vector_store/" in capsys.readouterr().out
    assert cli("forget", "--memory", "mem0", "--memory-config", str(cfg_path), "--user", "alice", "--dry-run",
               "--json") == 0
    _follows_schema("erasure-plan", json.loads(capsys.readouterr().out))
    assert _fingerprint(tmp_path / "inst") == before  # a dry run and a nothing-found erasure change nothing


def test_audit_config_accepts_mem0_keys_and_overrides_only_paths(tmp_path: Path) -> None:
    from traceless.systems import load_system_config
    from traceless.systems._mem0 import Mem0Config, audit_config

    cfg = load_system_config("mem0", mi.user_config(tmp_path / "prod", "qdrant"))
    assert isinstance(cfg, Mem0Config) and cfg.infer is False
    built, overrides = audit_config(cfg, tmp_path / "work", {"model": "m"}, "minilm")
    assert built["vector_store"]["config"]["path"] == str(tmp_path / "work" / "qdrant")
    assert built["vector_store"]["config"]["collection_name"] == "traceless"
    assert built["history_db_path"] == str(tmp_path / "work" / "history.db")
    assert built["version"] == "v1.1" and built["embedder"] == cfg.embedder
    assert any(o.startswith("vector_store.config.path:") for o in overrides)
    assert any(o.startswith("history_db_path:") for o in overrides)
    assert load_system_config("mem0", {"infer": True}).infer is True  # the old flat keys still work
    assert not os.path.exists(tmp_path / "work")


KILLS = 50


@pytest.mark.slow
def test_sigkill_at_any_moment_of_the_erasure_is_finished_by_the_rerun(
        built: dict[str, tuple[Path, Path]], tmp_path: Path) -> None:
    """50 real SIGKILLs of a process running ``forget --memory mem0 --user alice`` (trials
    whose erasure finished before the kill do not count), at moments spread over the first
    80 % of an uninterrupted erasure's time (runs vary with the machine's load); after each, the
    same erasure re-run completes with a passing receipt, the scan is clean and the other
    users' records are intact."""
    import random
    import subprocess

    from traceless.forget import load_receipt, verify_signature
    from traceless.systems import load_system_config, system_class

    src, cfg0 = built["qdrant"]
    live = system_class("mem0").attach(load_system_config("mem0", cfg0), read_only=True)
    bystanders = live.bystander_digests("alice")
    worker = subprocess.Popen([sys.executable, str(Path(__file__).with_name("_erase_kill_worker.py"))],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=os.environ.copy())
    assert worker.stdin is not None and worker.stdout is not None
    assert worker.stdout.readline().strip() == "ready"

    def trial(i: int, delay: float) -> tuple[str, str, float, Path]:
        dst = tmp_path / f"t{i}"
        cfg = _copy(built, "qdrant", dst)
        receipt = tmp_path / f"t{i}.receipt.json"
        worker.stdin.write(f"run {cfg} {tmp_path / f't{i}.state'} {receipt} {delay}\n")  # type: ignore[union-attr]
        worker.stdin.flush()  # type: ignore[union-attr]
        first, rerun, took = worker.stdout.readline().split()  # type: ignore[union-attr]
        return first.removeprefix("first:"), rerun.removeprefix("rerun:"), float(took), cfg

    try:
        runs = [trial(i, -1.0) for i in (-2, -1)]  # uninterrupted: how long an erasure takes (warm)
        assert all(r[:2] == ("exit:0", "7") for r in runs)
        full = min(r[2] for r in runs)
        rng = random.Random(23)
        killed, i = 0, 0
        while killed < KILLS and i < 3 * KILLS:  # every kill lands in a real erasure, at a moment spread over it
            i += 1
            delay = 0.8 * full * (killed + rng.random()) / KILLS  # runs vary with the load: stay inside one
            first, rerun, took, cfg = trial(i, delay)
            killed += first == "killed"
            if first != "killed":  # this erasure ran faster than the warm ones (the load fell): aim inside it
                full = min(full, took)
            assert rerun in ("0", "7"), (delay, first, rerun)
            receipt = tmp_path / f"t{i}.receipt.json"
            r = load_receipt(receipt)  # the re-run's (or, when the first run finished, the first's)
            assert r.verification.passed and verify_signature(r)
            assert not any((tmp_path / f"t{i}.state" / "erasures").glob("*.json"))  # no journal left
            after = _scan(cfg, "alice", *_canaries("alice"))
            assert after["hits"] == [] and after["files"] == []
            again = system_class("mem0").attach(load_system_config("mem0", cfg), read_only=True)
            again.resume_bystanders(bystanders)  # the digest over the containers the first one covered
            assert again.bystander_digests("alice") == bystanders
            shutil.rmtree(tmp_path / f"t{i}")
        assert killed >= KILLS  # the kills really interrupted erasures
    finally:
        worker.stdin.close()
        worker.wait(timeout=30)


@pytest.mark.parametrize("provider", PROVIDERS)
def test_audit_builds_a_fresh_instance_from_the_users_config(provider: str, tmp_path: Path) -> None:
    """The audit's instance is the user's config with only paths and the collection moved into
    the work dir: it writes and retrieves through mem0, and the user's paths are never created."""
    from traceless.memory import Session, Turn
    from traceless.models import HashingEmbedder, ScriptedBackend
    from traceless.systems import SystemRuntime, load_system_config, open_system

    prod = tmp_path / "prod"
    cfg = load_system_config("mem0", mi.user_config(prod, provider))
    rt = SystemRuntime(ScriptedBackend(lambda m, c: "unused"), HashingEmbedder(), "scripted")
    s = open_system("mem0", tmp_path / "work", cfg, rt)
    try:
        s.write([Session(session_id="s1", user_id="u1", turns=[Turn(role="user", content="my pin is 4312")])])
        assert [c.text for c in s.context("u1", "what is my pin?")] == ["my pin is 4312"]
        assert {k: len(list(v)) for k, v in s.stores().items()} == {"vector_store": 1, "entity_store": 0, "history": 1, "messages": 0}
        assert any(o.startswith("vector_store.config.path:") for o in s.describe()["overrides"])
    finally:
        s.close()
    assert not prod.exists()  # the user's paths were never touched
    assert (tmp_path / "work" / provider).is_dir()


def test_a_literal_held_only_by_others_changes_nothing(built: dict[str, tuple[Path, Path]], tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 40 item 1: on main ``--user dave --literal <bob's canary>`` deleted bob's memory
    and its history rows (rc 0, ``passed``); now nothing of bob's changes, rc and message say so."""
    cfg = _copy(built, "qdrant", tmp_path / "inst")
    before = _copies(_scan(cfg, "bob", *_canaries("bob")))
    rc = cli("forget", "--memory", "mem0", "--memory-config", str(cfg), "--user", "dave",
             "--literal", mi.canary("bob", 0), "--receipt", str(tmp_path / "r.json"))
    err = capsys.readouterr().err
    assert rc != 0 and "held by" in err and "other users' records" in err
    assert not (tmp_path / "r.json").exists()
    assert _copies(_scan(cfg, "bob", *_canaries("bob"))) == before


def test_the_dry_run_names_how_many_other_users_records_hold_the_literal(
        built: dict[str, tuple[Path, Path]], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 40 item 1: on main the dry run listed bob's memory as to be removed ("holds a literal")."""
    cfg = _copy(built, "qdrant", tmp_path / "inst")
    assert cli("forget", "--memory", "mem0", "--memory-config", str(cfg), "--user", "alice",
               "--literal", mi.canary("alice", 0), "--literal", mi.canary("bob", 0), "--dry-run") == 6
    cap = capsys.readouterr()
    assert "held by" in cap.err and "other users' records" in cap.err and "nothing was changed" in cap.err


def test_two_erasures_in_one_directory_keep_both_receipts(built: dict[str, tuple[Path, Path]], tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 36.3: without --receipt, erasing alice and then bob in one directory keeps both
    signed receipts, each named by its receipt id (before: both wrote receipt-erase-mem0.json)."""
    from traceless.forget import load_receipt, verify_signature

    cfg = _copy(built, PROVIDERS[0], tmp_path / "inst")
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    for user in ("alice", "bob"):
        assert cli("forget", "--memory", "mem0", "--memory-config", str(cfg), "--user", user, *_lit_args(user)) == 0
    capsys.readouterr()
    receipts = sorted(work.glob("receipt-*.json"))
    assert len(receipts) == 2
    loaded = [load_receipt(p) for p in receipts]
    assert all(verify_signature(r) for r in loaded)
    assert {p.name for p in receipts} == {f"receipt-{r.receipt_id}.json" for r in loaded}


def test_an_instance_its_app_holds_open_is_refused_before_any_byte_changes(
        built: dict[str, tuple[Path, Path]], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 34 (bug 1): with the app holding the qdrant instance open, ``forget`` deleted the
    history rows (12 → 6) and then said "nothing was erased yet"; now the precondition finds
    the lock before the first write: every file keeps its bytes and mtime, no receipt."""
    cfg = _copy(built, "qdrant", tmp_path / "inst")
    app = mi.mem0_memory(json.loads(cfg.read_text()), tmp_path / "home")
    try:
        before = _fingerprint(tmp_path / "inst")
        rc = cli("forget", "--memory", "mem0", "--memory-config", str(cfg), "--user", "alice",
                 *_lit_args("alice"), "--receipt", str(tmp_path / "r.json"))
        err = capsys.readouterr().err
        assert rc != 0 and "in use" in err and "nothing was erased yet" in err, err
        assert _fingerprint(tmp_path / "inst") == before
        assert not (tmp_path / "r.json").exists()
    finally:
        mi.close(app, "qdrant")

CHROMA = pytest.mark.skipif(importlib.util.find_spec("chromadb") is None, reason="needs chromadb")


def _chroma_client(cfg: Path) -> Any:
    import chromadb
    from chromadb.config import Settings

    path = json.loads(cfg.read_text())["vector_store"]["config"]["path"]
    return chromadb.PersistentClient(path=path, settings=Settings(anonymized_telemetry=False))


def _vectors(col: Any, where: dict[str, Any]) -> dict[str, bytes]:
    import numpy as np

    got = col.get(where=where, include=["embeddings"])
    return {i: np.asarray(e, dtype="<f4").tobytes() for i, e in zip(got["ids"], got["embeddings"], strict=True)}


Past = tuple[dict[str, bytes], dict[str, bytes], int, int]


def _past_the_threshold(cfg: Path) -> Past:
    """The instance filled past its collection's HNSW ``sync_threshold`` (chroma's default,
    1,000) with other users' memories in mem0's payload shape, in one ``add`` (mem0 adds one
    per call: 60 s for 1,000), so every vector is written to ``data_level0.bin``. Returns
    alice's and the others' vectors (float32, read through chroma's own API), the threshold
    and the number of memories."""
    import numpy as np

    client = _chroma_client(cfg)
    try:
        col = client.get_collection("prod_memories", embedding_function=None)
        threshold = int(col.configuration["hnsw"]["sync_threshold"])
        vecs = np.random.default_rng(38).standard_normal((threshold, 384)).astype(np.float32)
        vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
        now = "2026-01-01T00:00:00+00:00"
        col.add(ids=[str(uuid.UUID(int=i + 1)) for i in range(threshold)], embeddings=vecs,
                metadatas=[{"data": f"user{i % 97} note {i}", "hash": f"{i:032x}", "user_id": f"user{i % 97}",
                            "role": "user", "created_at": now, "updated_at": now} for i in range(threshold)])
        return (_vectors(col, {"user_id": "alice"}), _vectors(col, {"user_id": {"$ne": "alice"}}), threshold,
                col.count())
    finally:
        client.close()


def _forget_alice(cfg: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    """``traceless forget`` of alice with her canaries (exit 0); its receipt."""
    receipt = tmp_path / "receipt.json"
    assert cli("forget", "--memory", "mem0", "--memory-config", str(cfg), "--user", "alice", *_lit_args("alice"),
               "--receipt", str(receipt)) == 0
    capsys.readouterr()
    return dict(json.loads(receipt.read_text()))


def _others_kept(cfg: Path, others: dict[str, bytes], size: int) -> None:
    """Every other user's vector is the same bytes through chroma's API, and only alice's went."""
    client = _chroma_client(cfg)
    try:
        col = client.get_collection("prod_memories", embedding_function=None)
        assert _vectors(col, {"user_id": {"$ne": "alice"}}) == others and col.count() == size - mi.MEMORIES
    finally:
        client.close()


@pytest.fixture(scope="module")
def big(built: dict[str, tuple[Path, Path]], tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Past]:
    """The chroma instance past its threshold (``_past_the_threshold``), built once per module."""
    if "chroma" not in built:
        pytest.skip("needs chromadb")
    src = tmp_path_factory.mktemp("chroma-past-threshold") / "inst"
    cfg = _copy(built, "chroma", src)
    return src, cfg, _past_the_threshold(cfg)


def _copy_big(big: tuple[Path, Path, Past], dst: Path) -> tuple[Path, Past]:
    src, cfg, past = big
    shutil.copytree(src, dst)
    return mi.relocate(cfg, src, dst), past


def _vector_copies(root: Path, vectors: Iterable[bytes]) -> dict[str, int]:
    forms = list(vectors)
    out = {}
    for p in sorted(root.rglob("*")):
        if p.is_file() and (n := sum(p.read_bytes().count(v) for v in forms)):
            out[str(p.relative_to(root))] = n
    return out


@CHROMA
def test_forget_rewrites_chromas_hnsw_segment_past_its_threshold(
        big: tuple[Path, Path, Past], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 38.1: past chroma's sync threshold mem0's own deletion leaves the erased vectors'
    floats in ``data_level0.bin`` (on main: alice's 3, under a receipt saying ``clear``);
    ``forget`` rebuilds the segment from the remaining records: none of them in any file,
    raw or L2-normalised, ``vector_store=clear``, and every other user's vector is the same
    bytes and found by mem0's own search."""
    from traceless.systems._mem0_chroma import vector_forms

    cfg, (alice, others, threshold, size) = _copy_big(big, tmp_path / "inst")
    assert size > threshold and len(alice) == mi.MEMORIES
    before = _vector_copies(tmp_path / "inst", alice.values())
    assert sum(n for f, n in before.items() if f.endswith("data_level0.bin")) == mi.MEMORIES, before
    r = _forget_alice(cfg, tmp_path, capsys)
    forms = {f for pair in vector_forms(list(alice.values())) for f in pair}
    assert _vector_copies(tmp_path / "inst", forms) == {}  # on main: 3 in data_level0.bin
    assert r["verification"]["passed"] and "vector_store=clear" in r["guarantee"]
    assert any("rebuilt from its" in n for n in r["notes"]), r["notes"]
    assert any(f"0 of the {mi.MEMORIES} erased vectors" in n for n in r["notes"]), r["notes"]
    assert not any("HNSW" in n for n in r["notes"] if n.startswith("out of scope"))
    _others_kept(cfg, others, size)
    mem = mi.mem0_memory(json.loads(cfg.read_text()), tmp_path / "home")
    try:
        hits = mem.search("bob note 1: my account code", filters={"user_id": "bob"}, top_k=3)["results"]
        assert any(mi.canary("bob", 1) in h["memory"] for h in hits)
    finally:
        mem.close()
        mem.vector_store.client.close()


@CHROMA
def test_a_surviving_copy_of_the_segment_keeps_the_vector_store_logical(
        big: tuple[Path, Path, Past], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The vector check can fail: a copy of the HNSW segment kept inside the chroma path (a
    backup before an upgrade) holds alice's floats and no byte of her text; the receipt says
    ``logical`` for the vector store and names the file and how many vectors survive in it."""
    cfg, (alice, _, _, _) = _copy_big(big, tmp_path / "inst")
    chroma = tmp_path / "inst" / "chroma"
    seg = next(p.parent for p in chroma.rglob("data_level0.bin"))
    shutil.copytree(seg, chroma / "backup" / seg.name)
    r = _forget_alice(cfg, tmp_path, capsys)
    assert "vector_store=logical" in r["guarantee"] and "history=clear" in r["guarantee"]
    assert _vector_copies(tmp_path / "inst", alice.values()) == {f"chroma/backup/{seg.name}/data_level0.bin": 3}
    assert any(f"{mi.MEMORIES} of the {mi.MEMORIES} erased vectors" in n and "backup" in n and "data_level0.bin" in n
               for n in r["notes"]), r["notes"]


def _segment(root: Path, collection_id: str) -> Path:
    """The HNSW segment directory of a collection (chroma's catalogue, read-only)."""
    import sqlite3

    db = next(root.rglob("chroma.sqlite3"))
    con = sqlite3.connect(f"{db.resolve().as_uri()}?mode=ro", uri=True)
    try:
        (sid,) = con.execute("SELECT id FROM segments WHERE scope = 'VECTOR' AND collection = ?",
                             (collection_id,)).fetchone()
    finally:
        con.close()
    return db.parent / str(sid)


@CHROMA
def test_scrub_zeroes_what_hnswlib_wrote_from_uninitialised_memory_and_chroma_reads_the_same(tmp_path: Path) -> None:
    """hnswlib writes ``length.bin`` whole from a ``malloc``ed buffer it fills only for
    ``cosine`` (each vector's norm): an ``l2`` segment's file is heap garbage; a segment made
    before its first sync has room for 100 elements and none written (``data_level0.bin`` past
    its last element). ``scrub_segments`` zeroes those bytes (a marker planted in each is gone),
    keeps the cosine norms, and what chroma returns (``get`` with embeddings, ``query``) is the
    same before and after."""
    import chromadb
    import numpy as np
    from chromadb.config import Settings

    from traceless.systems._mem0_chroma import collection_spaces, scrub_segments

    root = tmp_path / "c"
    vecs = np.random.default_rng(5).standard_normal((150, 16)).astype(np.float32) * 3
    names = {"l2": 150, "cosine": 150, "fresh": 5}  # fresh: l2 below its threshold (1,000): nothing synced
    client = chromadb.PersistentClient(path=str(root), settings=Settings(anonymized_telemetry=False))
    try:
        ids = {}
        for name, k in names.items():
            hnsw = {"space": "cosine" if name == "cosine" else "l2"} | ({} if name == "fresh" else {"sync_threshold": 100})
            col = client.create_collection(f"mem-{name}", embedding_function=None, configuration={"hnsw": hnsw})
            col.add(ids=[f"m{i}" for i in range(k)], embeddings=vecs[:k])
            ids[name] = str(col.id)
    finally:
        client.close()

    def read() -> list[Any]:
        c = chromadb.PersistentClient(path=str(root), settings=Settings(anonymized_telemetry=False))
        try:
            out = []
            for name in names:
                col = c.get_collection(f"mem-{name}", embedding_function=None)
                got = col.get(include=["embeddings"])
                q = col.query(query_embeddings=vecs[:3] + 0.5, n_results=5, include=["distances"])
                out.append((got["ids"], np.asarray(got["embeddings"]).tobytes(), q["ids"],
                            np.asarray(q["distances"]).tobytes()))
            return out
        finally:
            c.close()

    marker = b"CANARY-hnswlib-heap"
    seg = {name: _segment(root, cid) for name, cid in ids.items()}
    count = {n: int.from_bytes((d / "header.bin").read_bytes()[20:28], "little") for n, d in seg.items()}
    assert count == {"l2": 150, "cosine": 150, "fresh": 0}
    assert (seg["fresh"] / "data_level0.bin").stat().st_size > 64
    norms = (seg["cosine"] / "length.bin").read_bytes()[:4 * 150]
    before = read()
    for f in (seg["l2"] / "length.bin", seg["fresh"] / "length.bin", seg["fresh"] / "data_level0.bin"):
        with open(f, "r+b") as fh:  # what the heap held: here a marker
            fh.seek(8)
            fh.write(marker)
    zeroed, files = scrub_segments(root, collection_spaces(root))
    assert zeroed >= 3 * len(marker) and files >= 3
    assert not any(marker in p.read_bytes() for p in root.rglob("*") if p.is_file())
    assert (seg["l2"] / "length.bin").read_bytes().count(0) == (seg["l2"] / "length.bin").stat().st_size
    assert (seg["cosine"] / "length.bin").read_bytes()[:4 * 150] == norms and norms.count(0) < 4 * 150
    assert scrub_segments(root, collection_spaces(root)) == (0, 0)  # nothing left to zero
    assert read() == before  # (opening "fresh" syncs its 5 logged vectors: chroma writes new garbage then)


@CHROMA
def test_forget_zeroes_an_erased_canary_hnswlib_wrote_into_length_bin(
        big: tuple[Path, Path, Past], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """hnswlib writes ``length.bin`` from the writing process's heap: a CI run failed when the
    segment the rebuild wrote held alice's canary six times (the erasing process had read her
    records) and the receipt failed ``files_clean``. The heap is not steerable, so the bytes
    are written where hnswlib wrote them, right after chroma's rebuild: the erasure zeroes them,
    the receipt passes with ``clear``, no file holds the canary, the other users' vectors are
    as they were. Before ``scrub_segments`` this receipt failed ``files_clean``."""
    from traceless.systems import _mem0_chroma

    cfg, (_, others, _, size) = _copy_big(big, tmp_path / "inst")
    canary = mi.canary("alice", 0).encode()
    real = _mem0_chroma.rebuild

    def rebuild_with_heap_bytes(path: Path, names: Any) -> dict[str, int]:
        kept = real(path, names)
        for length in Path(path).rglob("length.bin"):
            with open(length, "r+b") as f:
                f.seek(16)
                f.write(canary)
        return kept

    monkeypatch.setattr(_mem0_chroma, "rebuild", rebuild_with_heap_bytes)
    r = _forget_alice(cfg, tmp_path, capsys)
    assert r["verification"]["passed"] and "vector_store=clear" in r["guarantee"]
    assert any("rebuilt from its" in n for n in r["notes"]) and any("uninitialised memory" in n for n in r["notes"])
    assert not any(canary in p.read_bytes() for p in (tmp_path / "inst").rglob("*") if p.is_file())
    _others_kept(cfg, others, size)


@CHROMA
def test_the_vector_check_finds_chromas_normalised_floats(tmp_path: Path) -> None:
    """On a ``cosine`` collection chroma writes each vector L2-normalised by hnswlib: the check
    finds every one of them by that form (its raw bytes are in no segment file)."""
    import chromadb
    import numpy as np
    from chromadb.config import Settings

    from traceless.systems._mem0_chroma import surviving, vector_forms

    client = chromadb.PersistentClient(path=str(tmp_path / "c"), settings=Settings(anonymized_telemetry=False))
    try:
        col = client.create_collection("cosine_memories", embedding_function=None,
                                       configuration={"hnsw": {"space": "cosine", "sync_threshold": 10}})
        vecs = np.random.default_rng(7).standard_normal((20, 384)).astype(np.float32) * 3
        col.add(ids=[f"m{i}" for i in range(20)], embeddings=vecs)
    finally:
        client.close()
    seg = [p for p in (tmp_path / "c").rglob("data_level0.bin")]
    assert surviving(seg, {f"m{i}": f for i, f in enumerate(vector_forms(vecs))}) == {
        str(seg[0]): {f"m{i}": 1 for i in range(20)}}
    assert surviving(seg, {f"m{i}": (f[0], f[0]) for i, f in enumerate(vector_forms(vecs))}) == {}


@CHROMA
@pytest.mark.parametrize("state", ["copy-complete-original-deleted", "partial-copy-beside-original"])
def test_an_interrupted_rebuild_is_completed_by_the_next_erasure(
        big: tuple[Path, Path, Past], tmp_path: Path, state: str, capsys: pytest.CaptureFixture[str]) -> None:
    """A kill inside the rebuild leaves the original whole beside a (partial) copy, or the
    complete copy with the original deleted; the scan reads the records where they are, and
    the next erasure finishes the rebuild before mem0 opens the collection (which would
    otherwise create an empty one): alice erased to ``clear``, every other vector kept."""
    from traceless.systems._mem0_chroma import REBUILD_SUFFIX

    cfg, (_, others, _, size) = _copy_big(big, tmp_path / "inst")
    client = _chroma_client(cfg)
    try:
        col = client.get_collection("prod_memories", embedding_function=None)
        copy = client.create_collection("prod_memories" + REBUILD_SUFFIX, schema=col.schema, embedding_function=None)
        got = col.get(include=["embeddings", "metadatas"], limit=size if state.startswith("copy") else 10)
        copy.add(ids=got["ids"], embeddings=got["embeddings"], metadatas=got["metadatas"])
        if state.startswith("copy"):
            client.delete_collection("prod_memories")
    finally:
        client.close()
    assert _copies(_scan(cfg, "alice", *_canaries("alice")))["vector_store"] == mi.MEMORIES
    r = _forget_alice(cfg, tmp_path, capsys)
    assert r["verification"]["passed"] and "vector_store=clear" in r["guarantee"]
    assert any("interrupted rebuild" in n for n in r["notes"]), r["notes"]
    client = _chroma_client(cfg)
    try:
        assert sorted(c.name for c in client.list_collections()) == ["prod_memories"]
    finally:
        client.close()
    _others_kept(cfg, others, size)
