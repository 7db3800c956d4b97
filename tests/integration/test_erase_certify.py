"""``traceless forget --memory mem0 --certify`` (issue #23 item 3): after the erasure, the
audit's probes are asked of the user's agent through mem0's own retrieval (``Memory.search``
with the instance's embedder) on the live instance, and the result is signed into the
receipt. A scripted agent that repeats any canary its memory shows it makes the probes
real: on the instance before the erasure it extracts the user's canary, after it cannot.
A certificate altered after signing fails ``forget verify``; its claims and store copies
are what a re-scan finds."""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "unit"))

import _mem0_instance as mi  # noqa: E402
from _cli import cli  # noqa: E402

pytestmark = [pytest.mark.integration,
              pytest.mark.skipif(importlib.util.find_spec("mem0") is None, reason="needs traceless[mem0]")]

CANARY = re.compile(r"CANARY-\w+-\d-7Q")


def _parrot(messages: list, config: object) -> str:  # type: ignore[type-arg]
    found = CANARY.findall(" ".join(m.content for m in messages[:-1]) or messages[0].content)
    return f"It is {found[0]}." if found else "I do not know."


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    base = tmp_path_factory.mktemp("mem0-certify")
    return base / "qdrant", mi.build(base / "qdrant", "qdrant", base / "mem0-home")


def _copy(built: tuple[Path, Path], dst: Path) -> Path:
    shutil.copytree(built[0], dst)
    return mi.relocate(built[1], built[0], dst)


def _lits(user: str) -> list[str]:
    return [mi.canary(user, i) for i in range(mi.MEMORIES)]


def test_the_probes_go_through_mem0s_retrieval_and_see_a_user_not_erased(built: tuple[Path, Path],
                                                                          tmp_path: Path) -> None:
    from traceless._erase_api import attach_system, certify_live
    from traceless.models import ScriptedBackend

    cfg = _copy(built, tmp_path / "inst")
    s = attach_system("mem0", cfg, read_only=True)
    try:
        cert = certify_live(s, "bob", _lits("bob"), ScriptedBackend(_parrot))
    finally:
        s.close()
    assert cert.probes and any(p.extracted for p in cert.probes) and cert.aer["agent"]["direct"] > 0
    assert all(p.context_items > 0 for p in cert.probes)  # mem0's search returned bob's memories
    assert cert.store_copies["vector_store"] > 0 and cert.store_copies["history"] > 0


def test_certified_erasure_signs_the_probes_and_a_tampered_certificate_fails(
        built: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    import traceless
    from traceless.models import ScriptedBackend

    cfg = _copy(built, tmp_path / "inst")
    out = tmp_path / "receipt.json"
    r = traceless.forget(system="mem0", config=cfg, user="alice", literals=_lits("alice"), certify=True,
                         model=ScriptedBackend(_parrot), receipt_path=out)
    assert r.certificate is not None and r.verification.passed
    assert r.verification.checks["certificate_no_extraction"] and r.verification.checks["certificate_no_store_copies"]
    assert {p.level for p in r.certificate.probes} == {"direct", "indirect", "jailbreak"}
    assert not any(p.extracted for p in r.certificate.probes)
    doc = json.loads(out.read_text())
    assert doc["certificate"] == json.loads(r.model_dump_json())["certificate"]  # the file holds the certified one
    assert "CANARY" not in out.read_text() and "alice" not in out.read_text()
    # the claims and copies signed are what a re-scan of the instance finds now
    rescan = traceless.scan("mem0", cfg, user="alice", literals=_lits("alice"))
    assert rescan.empty()
    assert set(r.certificate.store_copies) == {*rescan.stores, "files"} and not any(r.certificate.store_copies.values())
    assert {c.split("=")[0] for c in r.guarantee} == set(rescan.stores)
    assert all(c.endswith("=clear") for c in r.guarantee)
    pub = tmp_path / "signer.pub"
    assert cli("keys", "export", "--out", str(pub)) == 0
    monkeypatch.setenv("TRACELESS_HOME", str(tmp_path / "verifier-home"))
    capsys.readouterr()
    assert cli("forget", "verify", str(out), "--public-key", str(pub)) == 0
    assert "certificate OK" in capsys.readouterr().out
    doc["certificate"]["probes"][0]["extracted"] = True  # a leak hidden, or one invented: either breaks the signature
    tampered = tmp_path / "tampered.json"
    tampered.write_text(json.dumps(doc))
    assert cli("forget", "verify", str(tampered), "--public-key", str(pub)) != 0


def test_certify_needs_literals_and_is_refused_before_anything_is_erased(built: tuple[Path, Path],
                                                                          tmp_path: Path) -> None:
    cfg = _copy(built, tmp_path / "inst")
    before = sorted((p, p.read_bytes()) for p in (tmp_path / "inst").rglob("*") if p.is_file())
    assert cli("forget", "--memory", "mem0", "--memory-config", str(cfg), "--user", "alice", "--certify") == 2
    assert sorted((p, p.read_bytes()) for p in (tmp_path / "inst").rglob("*") if p.is_file()) == before


def _fingerprint(root: Path) -> dict[str, tuple[str, int]]:
    import hashlib

    return {str(p): (hashlib.sha256(p.read_bytes()).hexdigest(), p.stat().st_mtime_ns)
            for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("embedder", [
    # a remote embedder with no network: an OpenAI-compatible server on a loopback port that refuses
    {"provider": "openai", "config": {"model": "text-embedding-3-small", "api_key": "sk-test-not-a-real-key",
                                      "openai_base_url": "http://127.0.0.1:9/v1", "embedding_dims": 384}},
    # a local model folder that is not there
    {"provider": "huggingface", "config": {"model": "/nonexistent/all-MiniLM-L6-v2", "embedding_dims": 384}},
], ids=["remote-offline", "missing-model"])
def test_a_certify_that_cannot_run_is_refused_before_any_byte_changes(
        built: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str], embedder: dict[str, object]) -> None:
    """Issue 34 bug 3: the probes' embedder cannot run. Before the fix the erasure ran, then the
    certificate failed with a traceback: the user erased, no certificate, a re-run exits 7."""
    import traceless

    home = tmp_path / "home"
    monkeypatch.setenv("TRACELESS_HOME", str(home))
    cfg = _copy(built, tmp_path / "inst")
    doc = json.loads(cfg.read_text())
    cfg.write_text(json.dumps({**doc, "embedder": embedder}))
    before_hits = len(traceless.scan("mem0", cfg, user="alice").hits)
    before = _fingerprint(tmp_path / "inst")
    receipt = tmp_path / "r.json"
    lits = [a for lit in _lits("alice") for a in ("--literal", lit)]
    capsys.readouterr()
    code = cli("forget", "--memory", "mem0", "--memory-config", str(cfg), "--user", "alice", *lits, "--certify",
               "--model", "scripted", "--receipt", str(receipt))
    err = capsys.readouterr().err.strip()
    assert code == 2, err
    assert "--certify cannot run" in err and "nothing was erased" in err and len(err.splitlines()) == 1, err
    assert "sk-test-not-a-real-key" not in err
    assert _fingerprint(tmp_path / "inst") == before  # not one byte, not one mtime, no new file
    assert not receipt.exists()
    journals = list((home / "erasures").glob("*")) if (home / "erasures").exists() else []
    assert not journals
    assert len(traceless.scan("mem0", cfg, user="alice").hits) == before_hits  # all there: it can run again
