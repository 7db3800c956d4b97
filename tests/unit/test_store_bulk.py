"""The bulk-load path (``MemoryStore.bulk``: COPY on PostgreSQL, executemany on SQLite)
stores exactly what the row-by-row path stores, on both backends (issue #14, scale)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from _forget_helpers import CANARY, alice_sessions, bob_sessions, make_writer

from traceless.forget import ForgetTarget, forget
from traceless.memory import MemoryStore, Tier, _writes

pytestmark = pytest.mark.usefixtures("_home")  # TRACELESS_HOME in this test's tmp dir (conftest)


def _meta(store: MemoryStore, meta: dict[str, Any]) -> dict[str, Any]:
    # an extractive summary records its sources' digests (keyed on an encrypted store):
    # compare whether each still names its source's current digest
    if store.encrypted and "sources" in meta:
        return {**meta, "sources": {i: store.get(i).digest == d for i, d in meta["sources"].items()}}
    return meta


def _snapshot(store: MemoryStore) -> dict[str, Any]:
    """What a store holds, decrypted; without wall-clock times and (encrypted) digests,
    which are keyed by a random per-store data key."""
    arts = [(a.id, a.owner, a.tier, a.kind, a.session_id, a.seq, a.text, a.vector, _meta(store, a.meta),
             None if store.encrypted else a.digest) for a in store.artifacts()]
    lineage = [tuple(r) for r in store._conn.execute("SELECT child, parent, op, params FROM lineage ORDER BY 1, 2")]
    seq = {t.value: store.get_meta(f"seq:{t.value}") for t in Tier}
    return {"artifacts": arts, "lineage": lineage, "seq": seq}


def _write(store: MemoryStore, *, batched: bool) -> list[int]:
    """Write the same sessions; returns the sizes of the engine's batch inserts."""
    writer = make_writer(store, 1, extractive=True)
    if not batched:  # the row-by-row path: every add a statement of its own
        store.bulk = store.transaction  # type: ignore[method-assign]
    sent: list[int] = []
    real = store._b.insert_many

    def spy(table: str, cols: Any, rows: Any) -> None:
        sent.append(len(rows))
        real(table, cols, rows)

    store._b.insert_many = spy  # type: ignore[method-assign]
    writer.write_sessions(alice_sessions())
    writer.write_sessions(bob_sessions(with_canary=False))  # a second batch continues the id counters
    return sent


@pytest.mark.parametrize("encrypt", [True, False])
def test_bulk_and_row_by_row_store_identical_rows(store_url: str, more_stores: Any, encrypt: bool,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    # small batches: sends in the middle of a block (every 7 artifacts) and at its end
    monkeypatch.setattr(_writes, "BATCH_ROWS", 7)
    rows = MemoryStore(store_url, encrypt=encrypt)
    bulk = MemoryStore(more_stores(), encrypt=encrypt)
    assert _write(rows, batched=False) == []
    batches = _write(bulk, batched=True)
    a, b = _snapshot(rows), _snapshot(bulk)
    assert sum(batches) == len(b["artifacts"]) and len(batches) > 4  # all through COPY / executemany
    assert len(a["artifacts"]) > 20 and len(a["lineage"]) > 10  # summaries, embeddings, extractive
    assert a == b
    # the bulk-loaded store then behaves as the other: search and a forget that verifies
    q = np.frombuffer(bulk.artifacts(owner="alice", tier=Tier.EMBEDDING)[0].vector or b"", np.float32)
    assert [h.artifact.id for h in bulk.search("alice", q, 3)] == [h.artifact.id for h in rows.search("alice", q, 3)]
    rc = forget(bulk, ForgetTarget.literal(CANARY, "alice"), "full_purge", writer=make_writer(bulk, 1))
    assert rc.matched and rc.verification.passed
    rows.close()
    bulk.close()


def test_reads_inside_a_bulk_block_see_earlier_adds(store_url: str) -> None:
    store = MemoryStore(store_url)
    with store.ungated("test"), store.bulk():
        r = store.add(owner="u", tier=Tier.RAW, kind="turn", text="hello")
        e = store.add(owner="u", tier=Tier.EMBEDDING, kind="vector", parents=[r.id], op="embed",
                      vector=np.ones(4, np.float32))
        assert store.get(r.id).text == "hello"
        assert store.descendants([r.id]) == [e.id]
        r2 = store.add(owner="u", tier=Tier.RAW, kind="turn", text="again")
    assert (r.id, r2.id) == ("r-00000001", "r-00000002")
    assert [a.id for a in store.artifacts()] == [e.id, r.id, r2.id]
    store.close()


def test_a_failed_bulk_block_writes_nothing(store_url: str) -> None:
    store = MemoryStore(store_url)
    make_writer(store, 0).write_sessions(alice_sessions())
    before = _snapshot(store)
    with pytest.raises(RuntimeError, match="stop"), store.ungated("test"), store.bulk():
        r = store.add(owner="alice", tier=Tier.RAW, kind="turn", text="one more")
        store.add(owner="carol", tier=Tier.RAW, kind="turn", text="new owner", parents=[r.id], op="x")
        raise RuntimeError("stop")
    assert _snapshot(store) == before
    store.close()
