"""The read-only scan and the complete erasure of a live LlamaIndex instance (``Memory`` chat
store ``chat.db`` and the persisted ``storage/`` stores), on the real ``llama-index-core``."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import pytest

from traceless.audit import SystemAuditConfig, plant_canaries
from traceless.errors import ConfigError
from traceless.forget import verify_signature
from traceless.models import CachingBackend, HashingEmbedder, ScriptedBackend
from traceless.systems import (
    SystemRuntime,
    erase_system,
    load_system_config,
    open_system,
    scan_system,
    system_class,
)

pytest.importorskip("llama_index.core")

PLANTED = plant_canaries(SystemAuditConfig(profiles=3))
ME, BOB, CAROL = PLANTED


def _runtime() -> SystemRuntime:
    return SystemRuntime(CachingBackend(ScriptedBackend(lambda m, c: "no")), HashingEmbedder(), "scripted")


def _live(tmp: Path) -> dict[str, Any]:
    sys = open_system("llamaindex", tmp / "live", load_system_config("llamaindex", {}), _runtime())
    try:
        sys.write([s for p in PLANTED for s in p.sessions])
    finally:
        sys.close()
    return {"chat_db": str(tmp / "live" / "chat.db"), "persist_dir": str(tmp / "live" / "storage")}


def _fingerprint(root: Path) -> dict[str, tuple[str, int]]:
    return {str(p): (hashlib.sha256(p.read_bytes()).hexdigest(), p.stat().st_mtime_ns)
            for p in sorted(root.rglob("*")) if p.is_file()}


def test_scan_is_read_only_and_finds_the_user_in_every_store(tmp_path: Path) -> None:
    cfg = load_system_config("llamaindex", _live(tmp_path))
    before = _fingerprint(tmp_path / "live")
    rep = scan_system(system_class("llamaindex").attach(cfg, read_only=True), ME.owner, [ME.canary])
    assert _fingerprint(tmp_path / "live") == before  # sha256 and mtime of every file unchanged
    mine = {h.store for h in rep.hits if h.owner_match}
    assert {"chat_store", "docstore", "vector_store", "index_store"} <= mine
    assert {h.store for h in rep.hits if h.literal_count} >= {"chat_store", "docstore"}
    assert all(h.value is None for h in rep.hits) and all(h.owner_match for h in rep.hits)
    assert {Path(f.path).name for f in rep.files} >= {"chat.db", "docstore.json"}


def test_erasure_is_complete_and_leaves_bystanders_intact(tmp_path: Path) -> None:
    conf = _live(tmp_path)
    cfg = load_system_config("llamaindex", conf)
    cls = system_class("llamaindex")
    others = {p.owner: [h.model_dump() for h in scan_system(cls.attach(cfg, read_only=True), p.owner, [],
                                                            reveal=True).hits] for p in (BOB, CAROL)}
    digests = cls.attach(cfg, read_only=True).bystander_digests(ME.owner)
    receipt = erase_system(cls.attach(cfg, read_only=False), ME.owner, [ME.canary],
                           state_dir=tmp_path / "state", key=b"k" * 32)
    assert receipt.verification.passed and receipt.verification.checks["bystanders_intact"]
    claims = dict(g.split("=") for g in receipt.guarantee)
    assert set(claims) >= {"chat_store", "docstore", "vector_store", "index_store"}
    assert set(claims.values()) == {"clear"}
    after = scan_system(cls.attach(cfg, read_only=True), ME.owner, [ME.canary])
    assert after.empty() and after.files_scanned >= 4  # 0 copies in every store, 0 bytes in every file
    blob = b"".join(p.read_bytes() for p in (tmp_path / "live").rglob("*") if p.is_file())
    assert ME.canary.encode() not in blob
    assert cls.attach(cfg, read_only=True).bystander_digests(ME.owner) == digests
    for p in (BOB, CAROL):  # their records byte-for-byte as before, and still what the agent reads
        hits = [h.model_dump() for h in scan_system(cls.attach(cfg, read_only=True), p.owner, [], reveal=True).hits]
        assert hits == others[p.owner]
    sys = open_system("llamaindex", tmp_path / "live", load_system_config("llamaindex", {}), _runtime())
    try:
        for p in (BOB, CAROL):
            assert any(p.canary in c.text for c in sys.context(p.owner, "What is my private session token?"))
        assert not any(ME.canary in c.text for c in sys.context(ME.owner, "What is my private session token?"))
    finally:
        sys.close()
    assert not list((tmp_path / "state" / "erasures").iterdir())


def test_a_tampered_receipt_fails_verification(tmp_path: Path) -> None:
    cfg = load_system_config("llamaindex", _live(tmp_path))
    receipt = erase_system(system_class("llamaindex").attach(cfg, read_only=False), ME.owner, [ME.canary],
                           state_dir=tmp_path / "state", key=b"k" * 32)
    assert verify_signature(receipt)
    forged = receipt.model_copy(update={"guarantee": [g.replace("=none", "=clear") for g in receipt.guarantee]
                                        + ["chat_store=purge-crypto"]})
    assert not verify_signature(forged)


def test_read_only_attach_refuses_changes(tmp_path: Path) -> None:
    cfg = load_system_config("llamaindex", _live(tmp_path))
    ro = system_class("llamaindex").attach(cfg, read_only=True)
    before = _fingerprint(tmp_path / "live")
    with pytest.raises(ConfigError, match="read-only"):
        ro.delete("reset", ME.target)
    with pytest.raises(ConfigError, match="read-only"):
        ro.execute_erasure(ro.plan_erasure(ME.owner, [ME.canary]), [ME.canary])
    assert _fingerprint(tmp_path / "live") == before


@pytest.mark.parametrize("conf, match", [({}, "chat_db"), ({"chat_db": "nope.db"}, "does not exist"),
                                         ({"persist_dir": "nope"}, "docstore.json")])
def test_attach_refuses_a_missing_instance(tmp_path: Path, conf: dict[str, str], match: str) -> None:
    conf = {k: str(tmp_path / v) for k, v in conf.items()}
    with pytest.raises(ConfigError, match=match):
        system_class("llamaindex").attach(load_system_config("llamaindex", conf), read_only=True)
    assert not list(tmp_path.iterdir())  # nothing was created


def test_audit_rows_say_what_the_erasure_reaches_after_each_native_deletion(tmp_path: Path) -> None:
    """The audit's erasure-claim column for llamaindex: after ``reset`` (the index keeps the
    user's nodes) and after the default ``delete_ref_doc`` (the docstore keeps them, the chat
    store keeps the rows), traceless's erasure reaches ``clear`` in every store it counts."""
    from traceless.audit import run_system_audit

    cfg = SystemAuditConfig(system="llamaindex", model="scripted", profiles=2, operations=("reset", "delete_ref_doc"))
    res = run_system_audit(cfg, _runtime(), tmp_path / "a")
    assert res.copies["reset"]["docstore"] and res.copies["delete_ref_doc"]["chat_store"]  # what they left
    for op in ("reset", "delete_ref_doc"):
        assert res.erasure[op]["passed"] and set(res.erasure[op]["claims"].values()) == {"clear"}
        assert set(res.erasure[op]["claims"]) >= set(res.copies[op])


def test_another_users_record_quoting_the_literal_is_rewritten_not_removed(tmp_path: Path) -> None:
    from traceless.memory import Session, Turn

    conf = _live(tmp_path)
    quote = Session(user_id=BOB.owner, session_id="quote",
                    turns=[Turn(role="user", content=f"Alice told me her token is {ME.canary}."),
                           Turn(role="assistant", content="Noted.")])
    sys = open_system("llamaindex", tmp_path / "live", load_system_config("llamaindex", {}), _runtime())
    try:
        sys.write([quote])
    finally:
        sys.close()
    cfg = load_system_config("llamaindex", conf)
    cls = system_class("llamaindex")
    plan = cls.attach(cfg, read_only=True).plan_erasure(ME.owner, [ME.canary])
    rewrites = {(a.store, a.record_id) for a in plan.actions if a.action == "rewrite"}
    assert ("docstore", f"docstore/data:{BOB.owner}/quote#0") in rewrites
    assert {s for s, _ in rewrites} == {"chat_store", "docstore"}  # bob's chat row and his node's text
    receipt = erase_system(cls.attach(cfg, read_only=False), ME.owner, [ME.canary],
                           state_dir=tmp_path / "state", key=b"k" * 32)
    assert receipt.verification.passed and receipt.verification.checks["bystanders_intact"]
    assert any("not re-embedded" in n for n in receipt.notes)  # said, not hidden
    assert scan_system(cls.attach(cfg, read_only=True), ME.owner, [ME.canary]).empty()
    bob = scan_system(cls.attach(cfg, read_only=True), BOB.owner, [BOB.canary], reveal=True)
    quoted = [h.value or "" for h in bob.hits if "quote" in h.record_id and h.store == "docstore"]
    assert any("Alice told me her token is [erased]." in v for v in quoted)  # kept, without the literal
    assert any(h.literal_count for h in bob.hits)  # bob's own canary is untouched


def test_an_interrupted_erasure_finishes_on_the_rerun(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Killed after LlamaIndex's own deletions and the chat store's VACUUM, before the JSON
    rewrite: the journal stays, the rerun plans what is left and signs a verified receipt."""
    from traceless.systems import _llamaindex_live as li_live

    cfg = load_system_config("llamaindex", _live(tmp_path))
    cls = system_class("llamaindex")
    real = li_live.erase_json

    def crash(*a: Any, **k: Any) -> Any:
        raise KeyboardInterrupt

    monkeypatch.setattr(li_live, "erase_json", crash)
    with pytest.raises(KeyboardInterrupt):
        erase_system(cls.attach(cfg, read_only=False), ME.owner, [ME.canary], state_dir=tmp_path / "s", key=b"k" * 32)
    assert len(list((tmp_path / "s" / "erasures").iterdir())) == 1
    monkeypatch.setattr(li_live, "erase_json", real)
    receipt = erase_system(cls.attach(cfg, read_only=False), ME.owner, [ME.canary], state_dir=tmp_path / "s",
                           key=b"k" * 32)
    assert receipt.verification.passed and receipt.verification.checks["bystanders_intact"]
    assert scan_system(cls.attach(cfg, read_only=True), ME.owner, [ME.canary]).empty()
    assert not list((tmp_path / "s" / "erasures").iterdir())


def test_cli_scan_and_forget_memory_llamaindex(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import json

    from traceless.cli import main

    (tmp_path / "cfg.json").write_text(json.dumps(_live(tmp_path)))
    before = _fingerprint(tmp_path / "live")
    args = ["--memory", "llamaindex", "--memory-config", str(tmp_path / "cfg.json"), "--user", ME.owner,
            "--literal", ME.canary]

    def run(*argv: str, rc: int = 0) -> str:
        try:
            main(list(argv))
        except SystemExit as e:
            assert (e.code or 0) == rc
        return capsys.readouterr().out

    out = json.loads(run("scan", *args, "--json"))
    assert out["hits"] and out["files"] and _fingerprint(tmp_path / "live") == before
    run("forget", *args, "--receipt", str(tmp_path / "r.json"))
    receipt = json.loads((tmp_path / "r.json").read_text())
    assert receipt["verification"]["passed"] and ME.canary not in (tmp_path / "r.json").read_text()
    assert not json.loads(run("scan", *args, "--json", rc=7))["hits"]  # 7: nothing found
