"""Lineage closure (recursive CTEs) on a multi-level graph, and the writer's lineage."""

from __future__ import annotations

import random

import numpy as np
import pytest
from _forget_helpers import alice_sessions, make_writer

from traceless.memory import MemoryStore, Tier

pytestmark = pytest.mark.usefixtures("_home")  # TRACELESS_HOME in this test's tmp dir (conftest)


def _graph(store: MemoryStore) -> dict[str, str]:
    """r1 r2 r3 r4 (raw)
    s1 ← r1 r2 ; s2 ← r2 r3 ; s3 ← s1 s2 (summary of summaries) ; s4 ← r4
    e1 ← s3 (embed) ; c1 ← s3 e1 (cache) ; c2 ← c1 (cache of cache)
    """
    n: dict[str, str] = {}
    with store.transaction():
        for name in ("r1", "r2", "r3", "r4"):
            n[name] = store.add(owner="o", tier=Tier.RAW, kind="turn", text=name).id

        def add(name: str, tier: Tier, parents: list[str], op: str) -> None:
            vec = np.ones(4, dtype=np.float32) if tier == Tier.EMBEDDING else None
            n[name] = store.add(owner="o", tier=tier, kind="k", text=name, vector=vec,
                                parents=[n[p] for p in parents], op=op).id

        add("s1", Tier.SUMMARY, ["r1", "r2"], "summarize")
        add("s2", Tier.SUMMARY, ["r2", "r3"], "summarize")
        add("s3", Tier.SUMMARY, ["s1", "s2"], "summarize")
        add("s4", Tier.SUMMARY, ["r4"], "summarize")
        add("e1", Tier.EMBEDDING, ["s3"], "embed")
        add("c1", Tier.CACHE, ["s3", "e1"], "cache")
        add("c2", Tier.CACHE, ["c1"], "cache")
    return n


EXPECTED_DOWN = {
    "r1": {"s1", "s3", "e1", "c1", "c2"},
    "r2": {"s1", "s2", "s3", "e1", "c1", "c2"},
    "r3": {"s2", "s3", "e1", "c1", "c2"},
    "r4": {"s4"},
    "s3": {"e1", "c1", "c2"},
    "e1": {"c1", "c2"},
    "c2": set(),
}
EXPECTED_UP = {
    "c2": {"c1", "s3", "e1", "s1", "s2", "r1", "r2", "r3"},
    "e1": {"s3", "s1", "s2", "r1", "r2", "r3"},
    "s2": {"r2", "r3"},
    "s4": {"r4"},
    "r1": set(),
}


def test_closure_multi_level(store_url: str) -> None:
    store = MemoryStore(store_url)
    n = _graph(store)
    inv = {v: k for k, v in n.items()}
    for src, want in EXPECTED_DOWN.items():
        assert {inv[i] for i in store.descendants([n[src]])} == want, src
    for src, want in EXPECTED_UP.items():
        assert {inv[i] for i in store.ancestors([n[src]])} == want, src
    # several seeds: union; results sorted and without duplicates
    got = store.descendants([n["r1"], n["r3"], n["r4"]])
    assert got == sorted(set(got))
    assert {inv[i] for i in got} == EXPECTED_DOWN["r1"] | EXPECTED_DOWN["r3"] | EXPECTED_DOWN["r4"]
    assert store.descendants([]) == [] and store.ancestors([]) == []
    assert store.descendants(["nope"]) == []


def _down(parents_of: dict[str, list[str]], x: str) -> set[str]:
    kids = {c for c, ps in parents_of.items() if x in ps}
    return kids.union(*(_down(parents_of, k) for k in kids)) if kids else set()


def _up(parents_of: dict[str, list[str]], x: str) -> set[str]:
    ps = set(parents_of[x])
    return ps.union(*(_up(parents_of, p) for p in ps)) if ps else set()


def test_closure_matches_reference_on_random_dags(store_url: str) -> None:
    rng = random.Random(7)
    store = MemoryStore(store_url)  # one store: each graph's ids are new, edges never join two graphs
    for _ in range(20):
        ids: list[str] = []
        parents_of: dict[str, list[str]] = {}
        with store.transaction():
            for i in range(30):
                ps = rng.sample(ids, k=min(len(ids), rng.randint(0, 3))) if ids else []
                a = store.add(owner="o", tier=Tier.RAW if not ps else Tier.SUMMARY, kind="k", text=str(i),
                              parents=ps, op="x")
                ids.append(a.id)
                parents_of[a.id] = ps

        for x in rng.sample(ids, 8):
            assert set(store.descendants([x])) == _down(parents_of, x)
            assert set(store.ancestors([x])) == _up(parents_of, x)


def test_edges_survive_deletion_for_closure_checks(store_url: str) -> None:
    store = MemoryStore(store_url)
    n = _graph(store)
    with store.transaction():
        store.delete([n["s1"]])
    assert not store.exists(n["s1"])
    # a removed node still links its ancestors to its descendants
    assert n["s3"] in store.descendants([n["r1"]])
    assert n["r1"] in store.ancestors([n["c2"]])


def test_cycle_terminates(store_url: str) -> None:
    store = MemoryStore(store_url)
    with store.transaction():
        a = store.add(owner="o", tier=Tier.RAW, kind="k", text="a").id
        b = store.add(owner="o", tier=Tier.SUMMARY, kind="k", text="b", parents=[a], op="x").id
        store.add_edge(a, b, "x", {})  # a ← b: a cycle (never made by traceless, but must not hang)
    assert set(store.descendants([a])) == {a, b}
    assert set(store.ancestors([a])) == {a, b}


def test_writer_lineage(store_url: str) -> None:
    store = MemoryStore(store_url)
    writer = make_writer(store, 1, extractive=True)
    writer.write_sessions(alice_sessions())
    for s in store.artifacts(owner="alice", tier=Tier.SUMMARY):
        parents = store.parents(s.id)
        if s.kind == "extractive":
            assert {e.parent for e in parents} == {r.id for r in store.artifacts(owner="alice", tier=Tier.RAW)}
            assert {e.op for e in parents} == {"extract"}
        else:
            srcs = store.artifacts(owner="alice", tier=Tier.RAW, session_id=s.session_id)
            assert {e.parent for e in parents} == {r.id for r in srcs}
            assert all(e.op == "summarize" and e.params["S"] == 1 for e in parents)
        emb = store.embedding_of(s.id)
        assert (emb is None) == (s.kind == "extractive")
    for r in store.artifacts(owner="alice", tier=Tier.RAW):
        emb = store.embedding_of(r.id)
        assert emb is not None and emb.text == r.text
        assert r.id in store.ancestors([emb.id])
        assert emb.id in store.descendants([r.id])
