"""Issue 40.9: the audit refuses a back end traceless cannot handle up front, with the
message ``scan``/``forget`` give (a mem0 faiss config crashed after 13 s with
``AttributeError: 'FAISS' object has no attribute 'client'``, exit 10)."""

from __future__ import annotations

from pathlib import Path

import pytest

from traceless.audit import SystemAuditConfig, run_system_audit
from traceless.errors import UnsupportedError
from traceless.models import HashingEmbedder, ScriptedBackend
from traceless.systems import SystemRuntime

FAISS = {"vector_store": {"provider": "faiss", "config": {"path": "/tmp/faiss", "collection_name": "mem0"}}}


def test_a_mem0_faiss_audit_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    pytest.importorskip("mem0")
    cfg = SystemAuditConfig(system="mem0", system_config=FAISS, model="scripted", profiles=1)
    rt = SystemRuntime(ScriptedBackend(lambda m, c: "ok"), HashingEmbedder(), "scripted")
    with pytest.raises(UnsupportedError, match=r"mem0 vector_store 'faiss' cannot be scanned or erased yet; "
                                               r"supported: qdrant, chroma"):
        run_system_audit(cfg, rt, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_scan_gives_the_same_message(tmp_path: Path) -> None:
    pytest.importorskip("mem0")
    import traceless

    hist = tmp_path / "history.db"
    hist.write_bytes(b"")
    cfg = {**FAISS, "history_db_path": str(hist)}
    with pytest.raises(UnsupportedError, match=r"mem0 vector_store 'faiss' cannot be scanned or erased yet; "
                                               r"supported: qdrant, chroma"):
        traceless.scan("mem0", cfg, user="ann")
