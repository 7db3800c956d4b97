"""Property: forget never crosses owners, and retrieval never returns another owner's data."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from _forget_helpers import make_summarizer
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from traceless.forget import FORGET_MODES, ForgetTarget, forget, pseudonym
from traceless.memory import MemoryStore, MemoryWriter, Session, Tier, WriteConfig, WriteGate
from traceless.models import HashingEmbedder

SECRET = "ZK4-AMBER-1177"
WORDS = ["dogs", "teas", "Lisbon", "piano", "rain", "kettle", "garden", "train", "book", SECRET]
EMB = HashingEmbedder(32)


@pytest.fixture(scope="module", autouse=True)
def _home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    home = tmp_path_factory.mktemp("home")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TRACELESS_HOME", str(home))
        yield home


turn = st.lists(st.sampled_from(WORDS), min_size=1, max_size=5).map(" ".join)
sess = st.lists(turn, min_size=1, max_size=3)
owner_data = st.lists(sess, min_size=1, max_size=3)  # sessions of one owner (ids s0, s1, … shared across owners)
world = st.dictionaries(st.sampled_from(["ann", "ben", "cat", "dan", "eve"]), owner_data, min_size=2, max_size=4)


def _sessions(data: dict[str, list[list[str]]]) -> list[Session]:
    out = []
    for owner, sessions in sorted(data.items()):
        for i, turns in enumerate(sessions):
            out.append(Session.model_validate({
                "user_id": owner, "session_id": f"s{i}",
                "turns": [{"role": "user", "content": t} for t in turns],
                "neighbors": {"0": [1]} if len(turns) > 1 else {},
            }))
    return out


def _state(store: MemoryStore, owner: str) -> tuple[dict[str, str], set[str]]:
    return {a.id: a.digest for a in store.artifacts(owner=owner)}, store.gate_descriptors(owner)


def _check_search(store: MemoryStore, owners: list[str], queries: list[str]) -> None:
    for o in owners:
        embedded = [a for a in store.artifacts(owner=o) if a.tier in (Tier.RAW, Tier.SUMMARY)
                    and store.embedding_of(a.id) is not None]
        for q in queries:
            hits = store.search(o, EMB.embed([q])[0], k=1000)
            assert all(h.artifact.owner == o for h in hits), "search crossed owners"
            assert sorted(h.artifact.id for h in hits) == sorted(a.id for a in embedded)
            small = store.search(o, EMB.embed([q])[0], k=2)
            assert [h.artifact.id for h in small] == [h.artifact.id for h in hits[:2]]


def _fresh(store_url: str) -> str:
    """A new, empty store per example: SQLite in memory; on PostgreSQL a new schema of the
    test's database (creating a database per example would cost more than the example)."""
    if not store_url.startswith("postgresql://"):
        return ":memory:"
    import psycopg

    schema = f"ex_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(store_url, autocommit=True) as c:
        c.execute(f"CREATE SCHEMA {schema}")
    return f"{store_url}&options=-csearch_path%3D{schema}"


def test_forget_never_crosses_owners(store_url: str) -> None:
    # PostgreSQL examples cost a server round trip per statement: fewer of them
    examples = 25 if store_url.startswith("postgresql://") else 100

    @settings(max_examples=examples, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(
        data=world,
        mode=st.sampled_from(sorted(FORGET_MODES.names())),
        kind=st.sampled_from(["literal", "session", "user", "record", "word"]),
        levels=st.sampled_from([(), (1,), (1, 2)]),
        extractive=st.booleans(),
        pick=st.integers(min_value=0, max_value=10_000),
        queries=st.lists(turn, min_size=1, max_size=3),
    )
    def example(
        data: dict[str, list[list[str]]], mode: str, kind: str, levels: tuple[int, ...], extractive: bool,
        pick: int, queries: list[str],
    ) -> None:
        store = MemoryStore(_fresh(store_url))
        try:
            _one_example(store, data, mode, kind, levels, extractive, pick, queries)
        finally:
            store.close()

    example()


def _one_example(
    store: MemoryStore, data: dict[str, list[list[str]]], mode: str, kind: str, levels: tuple[int, ...],
    extractive: bool, pick: int, queries: list[str],
) -> None:
    writer = MemoryWriter(store, summarizer=make_summarizer(keep=True, canary=SECRET), embedder=EMB,
                          config=WriteConfig(levels=levels, extractive=extractive))
    writer.write_sessions(_sessions(data))
    owners = sorted(data)
    victim = owners[pick % len(owners)]
    others = [o for o in owners if o != victim]
    _check_search(store, owners, queries)
    before = {o: _state(store, o) for o in others}

    raws = store.artifacts(owner=victim, tier=Tier.RAW)
    if kind == "literal":
        target = ForgetTarget.literal(SECRET, victim)
    elif kind == "word":
        target = ForgetTarget.literal(WORDS[pick % len(WORDS)], victim)
    elif kind == "session":
        target = ForgetTarget.session(f"s{pick % len(data[victim])}", victim)
    elif kind == "user":
        target = ForgetTarget.user(victim)
    else:
        target = ForgetTarget.record(raws[pick % len(raws)].id)
    receipt = forget(store, target, mode, writer=writer, gate=WriteGate())
    assert receipt.target.owner == pseudonym(victim)  # owners appear only as keyed pseudonyms

    for o in others:
        assert _state(store, o) == before[o], f"forget of {victim} ({mode}, {kind}) changed {o}"
    _check_search(store, owners, queries)
    if kind == "user" and mode in ("full_purge", "lineage_closure"):
        assert store.artifacts(owner=victim) == []
        assert store.search(victim, EMB.embed([queries[0]])[0], k=10) == []


def test_wrong_owner_record_target_matches_nothing(store_url: str) -> None:
    store = MemoryStore(store_url)
    writer = MemoryWriter(store, embedder=EMB, config=WriteConfig(levels=()))
    writer.write_sessions(_sessions({"ann": [["dog tea"]], "ben": [["dog tea"]]}))
    (ben_raw,) = store.artifacts(owner="ben", tier=Tier.RAW)
    before = {a.id: a.digest for a in store.artifacts()}
    t = ForgetTarget(kind="record", value=ben_raw.id, owner="ann")
    r = forget(store, t, "full_purge", writer=writer)
    assert not r.matched
    assert {a.id: a.digest for a in store.artifacts()} == before


def test_user_target_with_foreign_owner_refused(store_url: str) -> None:
    from traceless.errors import ConfigError

    store = MemoryStore(store_url)
    with pytest.raises(ConfigError, match="owner must be that user"):
        forget(store, ForgetTarget(kind="user", value="ann", owner="ben"), "full_purge")
    with pytest.raises(ConfigError, match="needs an owner"):
        forget(store, ForgetTarget(kind="literal", value="xyzw"), "full_purge")
