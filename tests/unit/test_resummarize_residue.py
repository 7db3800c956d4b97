"""raw_plus_resummarize models paper 000's residue mechanism ("pre-existing summary
artifacts are not fully removed before regeneration"): the cleaned session is
re-summarized, the new chunks are added, and an old chunk is retired only when a new chunk
supersedes it (cosine >= SUPERSEDE_COSINE). Scripted summarizers decide what the old and
the new summaries say; the residue follows from that, at S=1 and at S=2."""

from __future__ import annotations

import pytest
from _forget_helpers import CANARY, alice_sessions, copies, make_summarizer

from traceless.forget import ForgetTarget, forget
from traceless.forget._modes import SUPERSEDE_COSINE
from traceless.memory import MemoryStore, MemoryWriter, Tier, WriteConfig
from traceless.models import ChatMessage, GenerationConfig, HashingEmbedder, ScriptedBackend

pytestmark = pytest.mark.usefixtures("_home")  # TRACELESS_HOME in this test's tmp dir (conftest)


def _focus_summarizer(*, mention_token_after: bool = False) -> ScriptedBackend:
    """S=1: same number of facts before and after cleaning (the token fact is replaced by an
    unrelated one, so no slot is left over by position). S=2: while the session holds the
    canary the sentence is about the token; after cleaning it is about the rest of the
    session. ``mention_token_after``: the regenerated output still talks about the token
    (without its value), the way a summarizer reporting 'user has a private token' would."""

    def reply(messages: list[ChatMessage], cfg: GenerationConfig) -> str:
        prompt = messages[-1].content
        has = CANARY in prompt
        lisbon = "Lisbon" in prompt
        if "key personal facts" in prompt:
            facts = ["lives in Lisbon"] if lisbon else []
            if has:
                facts.append(f"private session token is {CANARY}")
            elif mention_token_after:
                facts.append("private session token is withheld")
            else:
                facts.append("enjoys weekend hiking trips outdoors")
            return "\n".join(f"- {f}" for f in facts)
        if has:
            return f"User shared private session token {CANARY} for safekeeping."
        if mention_token_after:
            return "User shared private session token for safekeeping."
        return "Alice moved to Lisbon last spring and began piano lessons." if lisbon else "Alice chatted."

    return ScriptedBackend(reply, name="focus-sum")


def _store(where: str, level: int, summarizer: ScriptedBackend) -> tuple[MemoryStore, MemoryWriter]:
    store = MemoryStore(where)
    writer = MemoryWriter(store, summarizer=summarizer, embedder=HashingEmbedder(64),
                          config=WriteConfig(levels=(level,)))
    writer.write_sessions(alice_sessions())
    return store, writer


@pytest.mark.parametrize("level", [1, 2])
def test_residue_when_the_old_summary_kept_the_canary(store_url: str, level: int) -> None:
    store, writer = _store(store_url, level, _focus_summarizer())
    assert copies(store, CANARY)[Tier.SUMMARY] == 1  # the old summary kept it
    slots = store.artifacts(owner="alice", tier=Tier.SUMMARY, session_id="s2")
    receipt = forget(store, ForgetTarget.literal(CANARY, "alice"), "raw_plus_resummarize", writer=writer)
    after = copies(store, CANARY)
    assert receipt.verification.passed  # the mode claims the raw tier only
    assert after[Tier.RAW] == 0
    assert after[Tier.SUMMARY] == 1 and after[Tier.EMBEDDING] == 1  # the chunk and its vector
    (left,) = [a for a in store.containing(CANARY, owner="alice") if a.tier == Tier.SUMMARY]
    assert left.id in {s.id for s in slots} and (left.text, left.vector, left.meta) == next(
        (s.text, s.vector, s.meta) for s in slots if s.id == left.id)  # unchanged (digests are keyed by a rotated key)
    # the regenerated summary was written next to it
    new = [a for a in store.artifacts(owner="alice", tier=Tier.SUMMARY, session_id="s2") if a.id not in
           {s.id for s in slots}]
    assert new and all(CANARY not in (a.text or "") for a in new)
    assert receipt.tiers["summary"].target_copies_after == 1
    assert any("no regenerated chunk superseded" in n for n in receipt.notes)


@pytest.mark.parametrize("level", [1, 2])
def test_full_purge_leaves_no_residue_on_the_same_memory(store_url: str, level: int) -> None:
    store, writer = _store(store_url, level, _focus_summarizer())
    assert copies(store, CANARY)[Tier.SUMMARY] == 1
    forget(store, ForgetTarget.literal(CANARY, "alice"), "full_purge", writer=writer)
    assert copies(store, CANARY) == dict.fromkeys(Tier, 0)


@pytest.mark.parametrize("level", [1, 2])
def test_a_regenerated_chunk_that_resembles_the_old_one_replaces_it(store_url: str, level: int) -> None:
    """The same pipeline leaves nothing when the new summary still speaks of the token: the
    mechanism depends on what the summarizer writes, it is not residue by construction."""
    store, writer = _store(store_url, level, _focus_summarizer(mention_token_after=True))
    forget(store, ForgetTarget.literal(CANARY, "alice"), "raw_plus_resummarize", writer=writer)
    assert copies(store, CANARY) == dict.fromkeys(Tier, 0)


def test_no_residue_when_the_old_summary_dropped_the_canary(store_url: str) -> None:
    store, writer = _store(store_url, 1, make_summarizer(keep=False))
    forget(store, ForgetTarget.literal(CANARY, "alice"), "raw_plus_resummarize", writer=writer)
    assert copies(store, CANARY) == dict.fromkeys(Tier, 0)


def test_supersede_threshold_is_the_papers_same_meaning_threshold() -> None:
    from traceless.metrics import PR_COSINE_THRESHOLD

    assert SUPERSEDE_COSINE == PR_COSINE_THRESHOLD
