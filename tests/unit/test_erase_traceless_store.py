"""``traceless scan/forget --memory traceless`` (issue 34 item 5): traceless's own store as a
registered live system: its tiers read as the kernel's records (owner = the store's user),
erased through the store's own deletions with the lineage (a raw turn's summaries and
embeddings go with it), the same report and receipt as every other system."""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _cli import cli  # noqa: E402

from traceless.memory import MemoryStore, Session, Turn  # noqa: E402
from traceless.models import HashingEmbedder, ScriptedBackend  # noqa: E402
from traceless.systems import SystemRuntime, load_system_config, open_system  # noqa: E402

pytestmark = pytest.mark.usefixtures("_home")
IBAN, OTHER = "DE89 3704 0044 0532 0130 00", "GB29 NWBK 6016 1331 9268 19"


def _store(tmp_path: Path) -> Path:
    rt = SystemRuntime(ScriptedBackend(lambda m, c: "The user keeps an IBAN."), HashingEmbedder(), "scripted")
    work = tmp_path / "app"
    s = open_system("traceless", work, load_system_config("traceless", {"S": 1}), rt)
    try:
        s.write([Session(user_id=u, session_id="s1", turns=[Turn(role="user", content=f"my IBAN is {v}"),
                                                            Turn(role="assistant", content="Noted.")])
                 for u, v in (("alice", IBAN), ("bob", OTHER))])
    finally:
        s.close()
    cfg = tmp_path / "traceless.json"
    cfg.write_text(json.dumps({"db": str(work / "memory.db")}))
    return cfg


def _fingerprint(root: Path) -> dict[str, tuple[str, int]]:
    return {p.name: (hashlib.sha256(p.read_bytes()).hexdigest(), p.stat().st_mtime_ns)
            for p in sorted(root.iterdir()) if p.is_file()}


def test_scan_reads_every_tier_and_changes_no_byte(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = _store(tmp_path)
    before = _fingerprint(tmp_path / "app")
    capsys.readouterr()
    assert cli("scan", "--memory", "traceless", "--memory-config", str(cfg), "--user", "alice", "--json") == 0
    rep = json.loads(capsys.readouterr().out)
    assert _fingerprint(tmp_path / "app") == before
    found = {h["store"] for h in rep["hits"]}
    assert {"raw", "summary", "embedding"} <= found, rep["hits"]
    assert all(h["owner_match"] for h in rep["hits"])  # bob's records are not alice's


def test_forget_erases_the_user_with_the_lineage_and_signs(tmp_path: Path) -> None:
    cfg = _store(tmp_path)
    db = tmp_path / "app" / "memory.db"
    with MemoryStore(db, access="read") as st:
        alice = {a.id for a in st.artifacts(owner="alice")}
        bob = [(a.id, a.digest) for a in st.artifacts(owner="bob")]
    receipt = tmp_path / "r.json"
    assert cli("forget", "--memory", "traceless", "--memory-config", str(cfg), "--user", "alice",
               "--literal", IBAN, "--receipt", str(receipt)) == 0
    r = json.loads(receipt.read_text())
    assert r["verification"]["passed"] and r["mode"] == "erase:traceless"
    assert sum(len(t["removed"]) for t in r["tiers"].values()) == len(alice)
    assert IBAN.encode() not in db.read_bytes() and "alice" not in receipt.read_text()
    with MemoryStore(db, access="read") as st:
        assert not st.artifacts(owner="alice") and not st.descendants(alice)
        assert [(a.id, a.digest) for a in st.artifacts(owner="bob")] == bob


def test_a_raw_turns_records_link_what_was_derived_from_it(tmp_path: Path) -> None:
    """A removed record's ``linked`` records (its lineage descendants) go with it."""
    from traceless.systems._native_live import StoreInstance

    db = tmp_path / "app" / "memory.db"
    _store(tmp_path)
    with MemoryStore(db, access="read") as st:
        raw = [a for a in st.containing(OTHER) if a.tier.value == "raw"]
        derived = set(st.descendants([a.id for a in raw]))
        recs = {r.id: r for r in StoreInstance(st).records()}
    assert derived and {i for a in raw for _, i in recs[a.id].linked} == derived


def test_a_literal_only_erasure_rewrites_the_literal_wherever_it_is(tmp_path: Path) -> None:
    cfg = _store(tmp_path)
    db = tmp_path / "app" / "memory.db"
    assert cli("forget", "--memory", "traceless", "--memory-config", str(cfg), "--literal", OTHER,
               "--receipt", str(tmp_path / "r.json")) == 0
    with MemoryStore(db, access="read") as st:
        assert not st.containing(OTHER) and st.artifacts(owner="bob")
        assert st.containing(IBAN)  # alice's literal is untouched
    assert OTHER.encode() not in db.read_bytes()


def test_a_config_without_the_store_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = tmp_path / "c.json"
    cfg.write_text("{}")
    capsys.readouterr()
    assert cli("scan", "--memory", "traceless", "--memory-config", str(cfg), "--user", "alice") == 2
    err = capsys.readouterr().err.strip()
    assert '"db"' in err and len(err.splitlines()) == 1
