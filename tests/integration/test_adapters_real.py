"""The agno, openai-agents and llamaindex adapters through the audit engine on their real
packages, offline, 2 synthetic users (one the bystander of the other; 3 took a third more of
CI's time for the same checks), with SmolLM2-135M served by llama.cpp on loopback as
the agent (none of the three adapters calls an LLM itself as configured, so what their
deletions leave in the stores does not depend on the model; the AER columns do).

The residue asserted is what each package's deletion does, as measured on these versions
(docs/memory-systems.md has the default-model tables, from the committed bundles): each
user's canary sits in one user turn of one of their two sessions.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from traceless.audit import SystemAuditConfig, run_system_audit
from traceless.cli._systems import print_result
from traceless.models import CachingBackend, ModelBackend, load_backend, load_embedder
from traceless.systems import SystemRuntime

pytestmark = [pytest.mark.heavy(160), pytest.mark.integration, pytest.mark.slow]
SPEC = "llamacpp:smollm2-135m-instruct"


@pytest.fixture(scope="module")
def served() -> Iterator[ModelBackend]:
    pytest.importorskip("xllamacpp")
    be = CachingBackend(load_backend(SPEC, timeout=900))
    yield be
    be.close()


def _audit(served: ModelBackend, out: Path, system: str, module: str) -> Any:
    pytest.importorskip(module)
    cfg = SystemAuditConfig(system=system, model=SPEC, profiles=2, max_new_tokens=16)
    res = run_system_audit(cfg, SystemRuntime(served, load_embedder(), SPEC), out)
    print_result(res, SPEC)
    return res


def _intact(res: Any, *ops: str) -> None:
    for op in ops:
        assert res.bystanders[op]["intact"], op


def test_agno(served: ModelBackend, tmp_path: Path) -> None:
    res = _audit(served, tmp_path / "a", "agno", "agno")
    c, f = res.copies, res.files
    # before: the canary's turn is one memory (its text and its `input`) and one run, per user
    assert c["before"]["agno_memories"] == 4 and c["before"]["agno_runs"] == 2
    for op in ("delete_user_memory", "clear_user_memories", "clear_memory"):
        assert c[op]["agno_memories"] == 0 and c[op]["agno_runs"] == 2  # memories only: the runs keep it
        assert f[op] == {"agno.db": 2}
    assert c["delete_session"]["agno_memories"] == 4 and c["delete_session"]["agno_runs"] == 0
    assert not any(c["clear_user_memories+delete_sessions"].values()) and f["clear_user_memories+delete_sessions"] == {}
    _intact(res, "delete_user_memory", "clear_user_memories", "delete_session", "clear_user_memories+delete_sessions")
    # clear_memory (the agent's memory tool) deletes every user's memories: the first user's
    # call takes the other user's memories (2 copies)
    assert not res.bystanders["clear_memory"]["intact"]
    assert res.bystanders["clear_memory"]["lost"] == {"agno_memories": 2}
    # traceless's erasure finishes every deletion: no record and no byte left, bystanders kept
    assert all(e["passed"] and set(e["claims"].values()) == {"clear"} for e in res.erasure.values())


def test_openai_agents(served: ModelBackend, tmp_path: Path) -> None:
    res = _audit(served, tmp_path / "o", "openai-agents", "agents")
    c, f = res.copies, res.files
    assert c["before"] == {"agent_messages": 2, "agent_sessions": 0} and f["before"] == {"sessions.db": 2}
    for op in ("pop_item", "clear_session"):  # the rows go; SQLite left no byte of them in the file
        assert not any(c[op].values()) and f[op] == {}
        assert res.table[op]["AER_max"] == 0.0  # nothing of the canary is in the agent's context
    _intact(res, "pop_item", "clear_session")
    assert all(e["passed"] and set(e["claims"].values()) == {"clear"} for e in res.erasure.values())


def test_llamaindex(served: ModelBackend, tmp_path: Path) -> None:
    res = _audit(served, tmp_path / "l", "llamaindex", "llama_index.core")
    c, f = res.copies, res.files
    assert c["before"]["chat_store"] == 2 and c["before"]["docstore"] == 2  # the node text, once per user
    assert c["reset"]["chat_store"] == 0 and c["reset"]["docstore"] == 2
    # the default delete_ref_doc (delete_from_docstore=False) leaves the nodes in the docstore
    assert c["delete_ref_doc"]["docstore"] == 2 and f["delete_ref_doc"]["storage/docstore.json"] == 2
    assert c["delete_ref_doc+docstore"]["docstore"] == 0 and set(f["delete_ref_doc+docstore"]) == {"chat.db"}
    assert not any(c["reset+delete_ref_doc+docstore"].values()) and f["reset+delete_ref_doc+docstore"] == {}
    _intact(res, *res.bystanders)
    # traceless's erasure finishes every deletion: no record and no byte left, bystanders kept
    assert all(e["passed"] and set(e["claims"].values()) == {"clear"} for e in res.erasure.values())
