"""The audit's inversion check on a real mem0 + chroma instance (issue 38.2): four users, one
canary each, ``infer=False``, mem0's own MiniLM embedder; the agent is scripted (the column
needs no model). After mem0's own ``delete`` the API lists none of the canaries' memories, but
chroma's log (``embeddings_queue`` in ``chroma.sqlite3``: below its sync threshold nothing is
in ``data_level0.bin`` yet) keeps their vectors, and the candidate attack ranks planted
canaries first from them; after ``reset`` the files hold no vector and the column shows 0.
Canaries that were never planted are not recovered from the same vectors (the check makes
no claim for unrelated text), and the scorecard's column shows what the rows hold."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

pytestmark = [pytest.mark.integration,
              pytest.mark.skipif(importlib.util.find_spec("mem0") is None or importlib.util.find_spec("chromadb") is None,
                                 reason="needs traceless[mem0] and chromadb")]


def test_the_scorecard_shows_what_the_surviving_vectors_give_back(tmp_path: Path) -> None:
    import numpy as np

    from traceless.audit import (
        SystemAuditConfig,
        candidate_inversion,
        make_canary,
        plant_canaries,
        run_system_audit,
    )
    from traceless.models import CachingBackend, HashingEmbedder, ScriptedBackend
    from traceless.report import render_report
    from traceless.systems import SystemRuntime, load_system_config, open_system

    cfg = SystemAuditConfig(system="mem0", model="scripted", profiles=4, operations=("delete", "reset"),
                            system_config={"infer": False, "vector_store": {"provider": "chroma",
                                                                            "config": {"path": "unused"}}},
                            inversion_decoys=2_000, max_new_tokens=8, keep_memory=True)
    rt = SystemRuntime(CachingBackend(ScriptedBackend(lambda m, c: "I cannot say.")), HashingEmbedder(), "scripted")
    res = run_system_audit(cfg, rt, tmp_path / "a")
    assert res.copies["delete"]["vector_store"] == 0  # mem0's API no longer has them
    delete, reset = res.inversion["delete"], res.inversion["reset"]
    assert delete is not None and reset is not None
    assert delete.planted == 4 and delete.candidates == 2_004 and delete.vectors > 0
    assert delete.top1.successes >= 1 and delete.topk.successes >= delete.top1.successes, delete
    assert reset.vectors == 0 and reset.top1.successes == 0 and reset.topk.successes == 0

    # the same vectors, canaries never planted: nothing recovered (a claim needs the canary)
    planted = {p.canary for p in plant_canaries(cfg)}
    rng = np.random.default_rng(99)
    unrelated = [c for c in (make_canary(rng) for _ in range(8)) if c not in planted][:4]
    sys_cfg = load_system_config("mem0", cfg.system_config)
    system = open_system("mem0", tmp_path / "a" / "work" / "delete", sys_cfg, rt)
    system.close()
    fv = system.file_vectors()
    assert fv is not None and len(fv.vectors) == delete.vectors
    assert any("embeddings_queue" in s for s in fv.sources)
    other = candidate_inversion(fv.vectors, unrelated, fv.embedder, decoys=2_000)
    assert other.top1.successes == 0 and other.topk.successes == 0, other

    rows = render_report(tmp_path / "a").read_text().split("## Erasure scorecard")[1].strip().splitlines()
    col = rows[0].split(" | ").index("recoverable from surviving vectors")
    t1 = delete.top1
    assert rows[2].startswith("| mem0 | `delete` |")
    assert rows[2].split(" | ")[col] == (f"top-1 {t1.successes}/4, {t1.value:.2f} [{t1.low:.2f}, {t1.high:.2f}] "
                                         f"(top-10 {delete.topk.successes}/4; {delete.vectors} vectors)")
    assert rows[3].split(" | ")[col] == "top-1 0/4, 0.00 [0.00, 0.60] (top-10 0/4; 0 vectors)"
