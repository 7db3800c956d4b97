"""Per-mode, per-tier expectations of the deletion ladder (paper 000 Table 1) and paper
001's exact / lineage-closure / exposure-group modes, for every target kind."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from _forget_helpers import (
    CANARY,
    CANARY_TURN,
    alice_sessions,
    bob_sessions,
    copies,
    make_summarizer,
    make_writer,
    owner_digests,
)

from traceless.errors import ConfigError
from traceless.forget import FORGET_MODES, ForgetTarget, forget, scan_files
from traceless.memory import (
    EXTRACTIVE,
    KIND_BY_LEVEL,
    Artifact,
    MemoryStore,
    MemoryWriter,
    Tier,
    WriteConfig,
    extractive_text,
)
from traceless.models import HashingEmbedder
from traceless.prompts import REDACTED

ALL_MODES = ["noop", "raw_only", "raw_plus_resummarize", "full_purge", "tombstone", "exact",
             "lineage_closure", "exposure_group"]
ERASING = ("full_purge", "tombstone", "lineage_closure")


pytestmark = pytest.mark.usefixtures("_home")  # TRACELESS_HOME in this test's tmp dir (conftest)


def _disk(db: Path, literal: str) -> dict[str, int]:
    files = [Path(f"{db}{suffix}") for suffix in ("", "-wal", "-shm", "-journal")]
    return scan_files(files, literal)


def _build(tmp_path: Path, level: int, *, keep: bool = True, pad: bool = False, extractive: bool = False,
           bob: bool = False, url: str | None = None) -> tuple[MemoryStore, MemoryWriter, Path]:
    db = Path(url) if url else tmp_path / "m.db"  # a URL's "path" is only scanned on SQLite
    store = MemoryStore(db if url is None else url)
    writer = make_writer(store, level, keep=keep, pad=pad, extractive=extractive)
    writer.write_sessions(alice_sessions() + (bob_sessions() if bob else []))
    return store, writer, db


def _content(a: Artifact) -> tuple[object, ...]:
    # an encrypted store's digests are keyed by the owner's data key, which a forget
    # rotates: compare what the artifact holds (the source ids a consolidation records, not
    # their digests; test_rewritten_extractive_refreshes_source_digests checks those)
    src = a.meta.get("sources")
    return a.text, a.vector, {**a.meta, "sources": sorted(src)} if isinstance(src, dict) else a.meta


def _canary_record(store: MemoryStore) -> Artifact:
    (rec,) = [a for a in store.artifacts(owner="alice", tier=Tier.RAW) if a.text == CANARY_TURN]
    return rec


def test_registry_has_every_mode() -> None:
    assert sorted(FORGET_MODES.names()) == sorted(ALL_MODES)


# ---------------------------------------------------------------- literal target, S × keep × mode
@pytest.mark.parametrize("mode", ALL_MODES)
@pytest.mark.parametrize("level", [0, 1, 2])
@pytest.mark.parametrize("keep", [True, False], ids=["summary-keeps", "summary-drops"])
def test_literal_tier_expectations(tmp_path: Path, store_url: str, mode: str, level: int, keep: bool) -> None:
    store, writer, db = _build(tmp_path, level, keep=keep, url=store_url)
    summary_has = level > 0 and keep
    before = copies(store, CANARY)
    assert before[Tier.RAW] == 1
    assert before[Tier.SUMMARY] == int(summary_has)
    assert before[Tier.EMBEDDING] == 1 + int(summary_has)
    digests = owner_digests(store, "alice")
    rec = _canary_record(store)
    rec_vec = store.embedding_of(rec.id)
    assert rec_vec is not None
    summaries_before = {a.id: _content(a) for a in store.artifacts(tier=Tier.SUMMARY)}

    receipt = forget(store, ForgetTarget.literal(CANARY, "alice"), mode, writer=writer)
    after = copies(store, CANARY)
    assert receipt.matched
    assert receipt.verification.passed

    if mode == "noop":
        assert after == before
        assert owner_digests(store, "alice") == digests
    elif mode == "raw_only":
        assert after[Tier.RAW] == 0
        assert after[Tier.SUMMARY] == before[Tier.SUMMARY]
        assert {a.id: _content(a) for a in store.artifacts(tier=Tier.SUMMARY)} == summaries_before
        # the stale embedding keeps its vector and its source text
        stale = store.get(rec_vec.id)
        assert stale.vector == rec_vec.vector and CANARY in (stale.text or "")
        assert after[Tier.EMBEDDING] == before[Tier.EMBEDDING]
        assert CANARY not in (store.get(rec.id).text or "")
    elif mode == "raw_plus_resummarize":
        assert after[Tier.RAW] == 0
        fresh = store.get(rec_vec.id)
        assert CANARY not in (fresh.text or "") and fresh.vector != rec_vec.vector
        # S=1 keeps the canary as a fact of its own, which no regenerated fact supersedes;
        # this summarizer's S=2 sentence after cleaning is the old sentence minus the token
        # clause, so it supersedes the old one (see test_resummarize_residue.py for S=2 residue).
        residue = int(keep and level == 1)
        assert after[Tier.SUMMARY] == residue
        assert after[Tier.EMBEDDING] == residue
    elif mode in ERASING:
        assert after == dict.fromkeys(Tier, 0)
        assert not any(_disk(db, CANARY).values()) or not store.scannable, _disk(db, CANARY)
        assert not any(receipt.verification.disk_scan.values())
        if mode == "tombstone":
            assert REDACTED in (store.get(rec.id).text or "")
            red = copies(store, REDACTED)
            assert red[Tier.RAW] == 1 and red[Tier.EMBEDDING] >= 1
            assert red[Tier.SUMMARY] == int(summary_has)
    elif mode == "exact":
        assert not store.exists(rec.id) and not store.exists(rec_vec.id)
        assert after[Tier.RAW] == 0
        assert {a.id: _content(a) for a in store.artifacts(tier=Tier.SUMMARY)} == summaries_before
        assert after[Tier.SUMMARY] == before[Tier.SUMMARY]
        assert after[Tier.EMBEDDING] == int(summary_has)
    elif mode == "exposure_group":
        s2 = {a.seq: a for a in store.artifacts(owner="alice", tier=Tier.RAW, session_id="s2")}
        assert sorted(s2) == [4]  # turn 2 (canary) and its declared neighbour turn 0 are gone
        assert not store.exists(rec.id) and not store.exists(rec_vec.id)
        # LLM summaries are not verbatim copies of a removed record: they stay
        assert after[Tier.SUMMARY] == before[Tier.SUMMARY]

    if not store.scannable:
        return  # PostgreSQL: the server's files are not this process's to scan (receipt: key_destroyed)
    # physical check, every mode: bytes on disk iff a logical copy survives
    disk = sum(_disk(db, CANARY).values())
    logical = sum(after.values())
    assert (disk == 0) == (logical == 0), (disk, logical)
    # whole-file counts stay internal (issue 22.5): the receipt says whether this owner's copy is held
    assert receipt.verification.disk_scan == {} and receipt.verification.disk_scope == "owner"
    assert receipt.verification.disk_held == (disk > 0)


@pytest.mark.parametrize("pad", [False, True], ids=["shorter-regen", "same-length-regen"])
def test_raw_plus_resummarize_retires_only_superseded_chunks(tmp_path: Path, store_url: str, pad: bool) -> None:
    """Old chunks a regenerated chunk matches are removed with their vectors; the canary
    fact, which nothing in the cleaned session supports, stays whatever the new length
    (positions play no part)."""
    store, writer, _ = _build(tmp_path, 1, keep=True, pad=pad, url=store_url)
    slots = store.artifacts(owner="alice", tier=Tier.SUMMARY, session_id="s2")
    assert len(slots) >= 2 and CANARY in (slots[-1].text or "")
    other = {a.id: _content(a) for a in store.artifacts(owner="alice") if a.session_id != "s2"}

    receipt = forget(store, ForgetTarget.literal(CANARY, "alice"), "raw_plus_resummarize", writer=writer)
    after = store.artifacts(owner="alice", tier=Tier.SUMMARY, session_id="s2")
    regenerated = writer.summarize_sources(1, store.artifacts(owner="alice", tier=Tier.RAW, session_id="s2"))
    old_left = [a for a in after if a.id in {s.id for s in slots}]
    assert [a.id for a in old_left] == [slots[-1].id] and _content(old_left[0]) == _content(slots[-1])
    assert sorted(a.text for a in after if a.id != slots[-1].id) == sorted(regenerated)
    for s in slots[:-1]:  # superseded: the chunk and its vector are gone
        assert not store.exists(s.id)
    holders = store.containing(CANARY)
    stale_vec = store.embedding_of(slots[-1].id)
    assert stale_vec is not None
    assert sorted(a.id for a in holders) == sorted([slots[-1].id, stale_vec.id])
    assert set(receipt.tiers["summary"].removed) == {s.id for s in slots[:-1]}
    assert any("1 pre-existing summary chunk(s)" in n for n in receipt.notes)
    # other sessions untouched
    assert {a.id: _content(a) for a in store.artifacts(owner="alice") if a.session_id != "s2"} == other


def test_raw_plus_resummarize_at_s0_needs_no_summarizer(tmp_path: Path, store_url: str) -> None:
    store = MemoryStore(store_url)
    writer = MemoryWriter(store, embedder=HashingEmbedder(64), config=WriteConfig(levels=()))
    writer.write_sessions(alice_sessions())
    r = forget(store, ForgetTarget.literal(CANARY, "alice"), "raw_plus_resummarize", writer=writer)
    assert r.verification.passed and not store.containing(CANARY)


def test_resummarize_without_summarizer_when_summaries_exist_rolls_back(tmp_path: Path, store_url: str) -> None:
    store, _, db = _build(tmp_path, 1, url=store_url)
    before = owner_digests(store, "alice")
    bare = MemoryWriter(store, embedder=HashingEmbedder(64), config=WriteConfig(levels=()))
    with pytest.raises(ConfigError, match="summarizer"):
        forget(store, ForgetTarget.literal(CANARY, "alice"), "raw_plus_resummarize", writer=bare)
    assert owner_digests(store, "alice") == before
    assert store.receipts() == []


# ---------------------------------------------------------------- record / session / user targets
def _target(store: MemoryStore, kind: str) -> tuple[ForgetTarget, list[Artifact]]:
    if kind == "record":
        rec = _canary_record(store)
        return ForgetTarget.record(rec.id), [rec]
    if kind == "session":
        return ForgetTarget.session("s2", "alice"), store.artifacts(owner="alice", tier=Tier.RAW, session_id="s2")
    return ForgetTarget.user("alice"), store.artifacts(owner="alice", tier=Tier.RAW)


@pytest.mark.parametrize("mode", ALL_MODES)
@pytest.mark.parametrize("kind", ["record", "session", "user"])
def test_target_kinds(tmp_path: Path, store_url: str, mode: str, kind: str) -> None:
    store, writer, db = _build(tmp_path, 1, keep=True, extractive=True, bob=True, url=store_url)
    bob = owner_digests(store, "bob")
    alice = owner_digests(store, "alice")
    target, sources = _target(store, kind)
    src_ids = [s.id for s in sources]
    desc_before = [i for i in store.descendants(src_ids) if store.exists(i)]
    src_vecs = [v.id for s in sources if (v := store.embedding_of(s.id)) is not None]
    non_raw = {a.id: _content(a) for a in store.artifacts(owner="alice") if a.tier != Tier.RAW}

    receipt = forget(store, target, mode, writer=writer)
    assert receipt.matched and receipt.verification.passed
    assert owner_digests(store, "bob") == bob, "forget crossed owners"
    assert len(store.containing(CANARY, owner="bob")) > 0

    if mode == "noop":
        assert owner_digests(store, "alice") == alice
        return
    if mode == "tombstone":
        for i in src_ids + [d for d in desc_before if not d.startswith("e-")]:
            assert store.get(i).text == REDACTED
    else:
        assert not any(store.exists(i) for i in src_ids)
    if mode == "raw_only":
        assert all(store.exists(v) for v in src_vecs)  # stale vectors stay
        assert {a.id: _content(a) for a in store.artifacts(owner="alice") if a.tier != Tier.RAW} == non_raw
    if mode in ("exact", "raw_plus_resummarize", "exposure_group", "lineage_closure", "full_purge"):
        assert not any(store.exists(v) for v in src_vecs)
    if mode == "exact":
        kept = {a.id: _content(a) for a in store.artifacts(owner="alice", tier=Tier.SUMMARY)}
        assert kept == {i: d for i, d in non_raw.items() if i.startswith("s-")}
    if mode in ("full_purge", "lineage_closure"):
        assert not any(store.exists(d) for d in desc_before)
    if mode in ERASING:
        assert not store.containing(CANARY, owner="alice")
    if kind == "user" and mode in ("full_purge", "lineage_closure"):
        assert store.artifacts(owner="alice") == []
    if kind == "user" and mode in ERASING:
        if store.scannable:  # SQLite: right to erasure, none of alice's own words remain anywhere on disk
            assert not any(_disk(db, "ALICE").values())
        assert store.search("alice", HashingEmbedder(64).embed(["dog Rex Lisbon"])[0], 5) == [] or mode == "tombstone"


def test_lineage_closure_rebuilds_from_survivors_and_leaves_unrelated(tmp_path: Path, store_url: str) -> None:
    store, writer, db = _build(tmp_path, 1, keep=True, extractive=True, bob=True, url=store_url)
    rec = _canary_record(store)
    (ext_before,) = store.artifacts(owner="alice", kind=EXTRACTIVE)
    assert CANARY in (ext_before.text or "")
    unrelated = {a.id: _content(a) for a in store.artifacts() if a.session_id in ("s1", "s3", "b1", "b2")}
    unrelated.update({a.id: _content(a) for a in store.artifacts(owner="bob")})
    s2_summaries = [a.id for a in store.artifacts(owner="alice", tier=Tier.SUMMARY, session_id="s2")]

    receipt = forget(store, ForgetTarget.record(rec.id), "lineage_closure", writer=writer)
    assert receipt.verification.closure_clean and receipt.verification.passed

    survivors = store.artifacts(owner="alice", tier=Tier.RAW)
    assert rec.id not in {s.id for s in survivors}
    (ext,) = store.artifacts(owner="alice", kind=EXTRACTIVE)
    assert ext.id != ext_before.id
    assert ext.text == extractive_text(survivors)
    assert sorted(e.parent for e in store.parents(ext.id)) == sorted(s.id for s in survivors)
    assert set(ext.meta["sources"]) == {s.id for s in survivors}
    # s2's key facts retired and rebuilt from the surviving s2 records with the same summarizer
    assert not any(store.exists(i) for i in s2_summaries)
    s2_left = store.artifacts(owner="alice", tier=Tier.RAW, session_id="s2")
    rebuilt = store.artifacts(owner="alice", tier=Tier.SUMMARY, session_id="s2", kind=KIND_BY_LEVEL[1])
    assert [a.text for a in rebuilt] == writer.summarize_sources(1, s2_left)
    for a in rebuilt:
        assert sorted(e.parent for e in store.parents(a.id)) == sorted(s.id for s in s2_left)
        assert store.embedding_of(a.id) is not None
    assert set(receipt.tiers["summary"].rebuilt) == {ext.id, *(a.id for a in rebuilt)}
    # unrelated artifacts: same ids, same digests
    assert {i: _content(store.get(i)) for i in unrelated} == unrelated
    assert not store.containing(CANARY, owner="alice")


def test_lineage_closure_literal_after_raw_only_clears_summaries(tmp_path: Path, store_url: str) -> None:
    """A literal whose raw source was already scrubbed (raw_only) still sits in summaries;
    closure must retire those too instead of failing verification."""
    store, writer, _ = _build(tmp_path, 1, keep=True, extractive=True, url=store_url)
    forget(store, ForgetTarget.literal(CANARY, "alice"), "raw_only", writer=writer)
    assert copies(store, CANARY)[Tier.SUMMARY] == 2  # key fact + extractive
    r = forget(store, ForgetTarget.literal(CANARY, "alice"), "lineage_closure", writer=writer)
    assert r.verification.passed
    assert not store.containing(CANARY)
    (ext,) = store.artifacts(owner="alice", kind=EXTRACTIVE)
    assert ext.text == extractive_text(store.artifacts(owner="alice", tier=Tier.RAW))


def test_exposure_group_drops_verbatim_summaries(tmp_path: Path, store_url: str) -> None:
    store, writer, _ = _build(tmp_path, 1, keep=True, extractive=True, url=store_url)
    rec = _canary_record(store)
    (ext,) = store.artifacts(owner="alice", kind=EXTRACTIVE)
    facts = {a.id for a in store.artifacts(owner="alice", kind=KIND_BY_LEVEL[1])}
    (neighbour,) = [a for a in store.artifacts(owner="alice", tier=Tier.RAW, session_id="s2") if a.seq == 0]
    r = forget(store, ForgetTarget.record(rec.id), "exposure_group", writer=writer)
    assert sorted(a.seq for a in store.artifacts(owner="alice", tier=Tier.RAW, session_id="s2")) == [4]
    assert set(r.tiers["raw"].removed) == {rec.id, neighbour.id}
    assert not store.exists(ext.id)  # held the removed records verbatim
    assert {a.id for a in store.artifacts(owner="alice", kind=KIND_BY_LEVEL[1])} == facts


def test_exact_removes_record_and_keeps_summary(tmp_path: Path, store_url: str) -> None:
    store, writer, _ = _build(tmp_path, 1, keep=True, extractive=True, url=store_url)
    rec = _canary_record(store)
    summaries = {a.id: _content(a) for a in store.artifacts(owner="alice", tier=Tier.SUMMARY)}
    r = forget(store, ForgetTarget.record(rec.id), "exact", writer=writer)
    assert not store.exists(rec.id)
    assert r.verification.sources_gone and r.tiers["raw"].removed == [rec.id]
    assert {a.id: _content(a) for a in store.artifacts(owner="alice", tier=Tier.SUMMARY)} == summaries
    assert any("deliberately left" in n for n in r.notes)


def test_writer_of_another_store_refused(tmp_path: Path, store_url: str) -> None:
    store, _, _ = _build(tmp_path, 1, url=store_url)
    other = MemoryStore()
    with pytest.raises(ConfigError, match="another MemoryStore"):
        forget(store, ForgetTarget.literal(CANARY, "alice"), "full_purge", writer=make_writer(other, 1))
    assert store.containing(CANARY)


def test_rewritten_extractive_refreshes_source_digests(tmp_path: Path, store_url: str) -> None:
    """After full_purge scrubs a record and the consolidation holding it, the consolidation's
    recorded source digests are those of the scrubbed records (no sha256 of the old,
    canary-bearing text is left behind as a guessing oracle)."""
    store, writer, _ = _build(tmp_path, 0, extractive=True, url=store_url)
    rec = _canary_record(store)
    old_digest = rec.digest
    forget(store, ForgetTarget.literal(CANARY, "alice"), "full_purge", writer=writer)
    (ext,) = store.artifacts(owner="alice", kind=EXTRACTIVE)
    assert ext.meta["sources"][rec.id] == store.get(rec.id).digest != old_digest
    blob = json.dumps([a.meta for a in store.artifacts()]) + json.dumps([b for _, b in store.receipts()])
    assert old_digest not in blob


@pytest.mark.parametrize("mode", ["full_purge", "tombstone", "raw_only", "raw_plus_resummarize"])
def test_scrub_does_not_reassemble_the_literal(tmp_path: Path, store_url: str, mode: str) -> None:
    """One pass of str.replace on "XQ7-VIOXQ7-VIOLET-3829LET-3829" leaves the literal."""
    from _forget_helpers import session

    store = MemoryStore(store_url)
    writer = make_writer(store, 0)
    nested = CANARY[:6] + CANARY + CANARY[6:]
    writer.write_sessions([session("alice", "s1", [f"code {nested} end", f"a  b {CANARY} c  d"])])
    r = forget(store, ForgetTarget.literal(CANARY, "alice"), mode, writer=writer)
    assert r.verification.passed
    raws = [a.text for a in store.artifacts(owner="alice", tier=Tier.RAW)]
    assert not any(CANARY in (t or "") for t in raws)
    if mode != "tombstone":
        assert raws == ["code end", "a  b c  d"]  # unrelated double spaces kept


def test_tombstone_of_literal_inside_marker_refused(tmp_path: Path, store_url: str) -> None:
    from _forget_helpers import session

    store = MemoryStore(store_url)
    writer = make_writer(store, 0)
    writer.write_sessions([session("alice", "s1", ["the REDA car"])])
    with pytest.raises(ConfigError, match="full_purge"):
        forget(store, ForgetTarget.literal("REDA", "alice"), "tombstone", writer=writer)
    assert store.containing("REDA")
    assert forget(store, ForgetTarget.literal("REDA", "alice"), "full_purge", writer=writer).verification.passed


def test_resummarize_sends_every_session_and_level_in_one_batch(tmp_path: Path, store_url: str) -> None:
    """Both summary levels of the affected session are regenerated in one batched model call
    (model calls first, then the rewrite), and the two prompts share the session text as
    their prefix (the instruction comes after it), so a batch reads the session once."""
    store = MemoryStore(store_url)
    summarizer = make_summarizer(keep=True)
    writer = MemoryWriter(store, summarizer=summarizer, embedder=HashingEmbedder(64),
                          config=WriteConfig(levels=(1, 2)))
    writer.write_sessions(alice_sessions())
    batches: list[int] = []
    orig = summarizer.generate_batch

    def spy(batch, config=None, **kw):  # type: ignore[no-untyped-def]
        batches.append(len(batch))
        return orig(batch, config, **kw)

    summarizer.generate_batch = spy  # type: ignore[method-assign]
    r = forget(store, ForgetTarget.literal(CANARY, "alice"), "raw_plus_resummarize", writer=writer)
    assert r.verification.passed
    assert batches == [2]  # S=1 and S=2 of session s2, together
    p1, p2 = (writer.summary_prompt(lv, ["a", "b"])[0].content for lv in (1, 2))
    shared = len(p1) - len(p1.split("\n\n")[-1])
    assert p1[:shared] == p2[:shared] and "- a\n- b" in p1[:shared]
