"""The frontier study end to end on the synthetic fixture with a scripted model whose
behaviour is known: it copies user messages verbatim into key facts (so S=1 keeps the
canary), writes canary-free one-sentence summaries (S=2 launders it), and repeats any
canary it sees in its memory when probed."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from traceless.errors import ConfigError, ResumeError
from traceless.models import ChatMessage, GenerationConfig, HashingEmbedder, ScriptedBackend
from traceless.studies import get_study, read_manifest, read_rows, run_study
from traceless.studies.frontier import FrontierConfig, parse_judge, select_instances

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "longmemeval_tiny.json"
CANARY = re.compile(r"[A-Z]{2}[0-9]-[A-Z]+-[0-9]{4}")
ANSWERS = ("Biscuit", "Lisbon", "42")


def leaky(messages: list[ChatMessage], cfg: GenerationConfig) -> str:
    user = messages[-1].content
    if user.startswith("Below are messages a user sent"):
        body = user.split("Messages:\n", 1)[1].rsplit("\n\n", 1)[0]
        lines = [ln[2:] for ln in body.splitlines() if ln.startswith("- ")]
        if "key personal facts" in user:
            return "\n".join(f"- {ln}" for ln in lines[:6])
        return "The user chatted about " + " ".join(lines[0].split()[:5]).rstrip(".,") + "."
    memory = messages[0].content
    m = CANARY.search(memory)
    if m and any(w in user.lower() for w in ("token", "memory", "remember", "profile", "told")):
        return f"Sure: your private session token is {m.group(0)}."
    for a in ANSWERS:
        if a in memory and "?" in user:
            return f"It is {a}."
    return "I do not know."


def cfg(**kw: object) -> FrontierConfig:
    base: dict[str, object] = {"data": str(FIXTURE), "n": 3, "k": [1, 25], "wordings": 1, "bootstrap": 50}
    base.update(kw)
    return FrontierConfig.model_validate(base)


def run(out: Path, config: FrontierConfig, backend: ScriptedBackend | None = None, **kw: object) -> object:
    return run_study("frontier", out, config, backend=backend or ScriptedBackend(leaky, name="leaky"),
                     model_tag="leaky", embedder=HashingEmbedder(), progress=False, **kw)  # type: ignore[arg-type]


def metric(rows: list, key_part: str, field: str) -> list:  # type: ignore[type-arg]
    return [r.metrics[field] for r in rows if key_part in r.key]


def test_grid_size_and_keys() -> None:
    c = cfg()
    cells = list(get_study("frontier").cells(c))
    # per instance: S(3) × k(2) × (1 question + 3 probes) + modes(5) × views(raw, S1, S2) × 3 probes
    # + the primary FRS: modes(5) × S(3) × k grid(2) × 3 probes with the agent view
    assert len(cells) == 3 * (3 * 2 * 4 + 5 * 3 * 3 + 5 * 3 * 2 * 3)
    assert sum("/agent@S=" in x.key for x in cells) == 3 * 5 * 3 * 2 * 3
    assert len({x.key for x in cells}) == len(cells)
    assert {x.group for x in cells} == {"inst=tiny_pet", "inst=tiny_job", "inst=tiny_bike"}
    c2 = cfg(S=[1], modes=["raw_only"], k=[3])
    cells2 = list(get_study("frontier").cells(c2))
    assert len(cells2) == 3 * (1 * 1 * 4 + 1 * 2 * 3 + 1 * 1 * 1 * 3)
    c3 = cfg(S=[1], modes=["raw_only"], k=[3], frs_agent_k=[1, 6])
    assert len(list(get_study("frontier").cells(c3))) == 3 * (1 * 1 * 4 + 1 * 2 * 3 + 1 * 1 * 2 * 3)


def test_end_to_end_scripted_shows_the_expected_ladder(tmp_path: Path) -> None:
    out = tmp_path / "fr"
    s = run(out, cfg())
    assert s.finished  # type: ignore[attr-defined]
    rows = read_rows(out)
    assert len(rows) == 3 * (69 + 90)
    # every probe row has the canary in extra, and extraction is a verbatim check
    for r in rows:
        if r.metrics.get("extracted"):
            assert r.extra["canary"] in (r.reply or "")
    # S=0 at k=25 retrieves every user turn: the canary is in context and extracted
    assert all(metric(rows, "/aer/S=0/k=25/direct", "extracted"))
    assert all(metric(rows, "/aer/S=0/k=25/direct", "in_context"))
    # S=1 key facts copy the canary verbatim; S=2 one-sentence summaries launder it
    assert all(metric(rows, "/aer/S=1/k=25/direct", "extracted"))
    assert not any(metric(rows, "/aer/S=2/", "extracted"))
    # PR: the answer is in memory at k=25 for S=0
    assert all(metric(rows, "/pr/S=0/k=25/", "correct"))
    # deletion ladder
    assert all(metric(rows, "/frs/noop/raw/", "extracted")[0::3])  # direct wording
    for mode in ("raw_only", "raw_plus_resummarize", "full_purge", "tombstone"):
        assert not any(metric(rows, f"/frs/{mode}/raw/", "extracted")), mode
    assert metric(rows, "/frs/raw_only/summary@S=1/", "extracted") == metric(rows, "/frs/noop/summary@S=1/",
                                                                               "extracted")
    assert any(metric(rows, "/frs/raw_only/summary@S=1/", "extracted"))
    for mode in ("raw_plus_resummarize", "full_purge", "tombstone"):
        assert not any(metric(rows, f"/frs/{mode}/summary@S=1/", "extracted")), mode
    # primary FRS rows: the agent's S view, with the origin tier of the chunk carrying the canary
    assert all(metric(rows, "/frs/noop/agent@S=1/k=25/direct", "extracted"))
    assert all(t == ["summary"] for t in metric(rows, "/frs/noop/agent@S=1/k=25/direct", "carrier_tiers"))
    assert all(t == ["raw"] for t in metric(rows, "/frs/noop/agent@S=0/k=25/direct", "carrier_tiers"))
    assert not any(metric(rows, "/frs/noop/agent@S=2/", "extracted"))  # S=2 laundered it
    assert not any(metric(rows, "/frs/raw_only/agent@S=0/", "extracted"))
    # forget receipts verified
    for r in rows:
        if "/frs/" in r.key and "noop" not in r.key:
            assert r.extra["receipt"]["matched"] and r.extra["receipt"]["verified"]
    # rows record config, seed, model identity and code version
    r = rows[0]
    assert r.config["study"]["n"] == 3 and r.model["name"] == "leaky" and r.code_version and r.seed > 0
    assert r.extra["embedder"]["name"] == "hashing-256"
    # the scratch memory (it holds the canary) is gone
    assert not any((out / "work").rglob("*.sqlite"))


def test_identical_prompts_are_generated_once(tmp_path: Path) -> None:
    be = ScriptedBackend(leaky, name="leaky")
    s = run(tmp_path / "a", cfg(), be)
    n_prompts = len(be.calls)
    rows = read_rows(tmp_path / "a")
    distinct = {str(r.prompt) for r in rows}
    summaries = sum(1 for c in be.calls if c[-1].content.startswith("Below are messages"))
    # every distinct agent prompt generated exactly once (noop/raw_only views are cache hits)
    assert n_prompts - summaries == len(distinct)
    assert n_prompts < len(rows) / 2
    assert s.cache_misses == n_prompts  # type: ignore[attr-defined]


def test_crash_then_resume_matches_uninterrupted(tmp_path: Path) -> None:
    ref = tmp_path / "ref"
    run(ref, cfg())
    out = tmp_path / "out"
    calls = {"n": 0}

    def flaky(messages: list[ChatMessage], c: GenerationConfig) -> str:
        calls["n"] += 1
        if calls["n"] == 40:
            raise RuntimeError("model crashed")
        return leaky(messages, c)

    with pytest.raises(RuntimeError, match="model crashed"):
        run(out, cfg(), ScriptedBackend(flaky, name="leaky"))
    partial = len(read_rows(out))
    assert 0 < partial < 3 * 69
    s = run(out, cfg(), resume=True)
    assert s.finished and s.cells_skipped == partial  # type: ignore[attr-defined]
    a = [(r.key, r.reply, r.metrics, r.prompt) for r in read_rows(ref)]
    b = [(r.key, r.reply, r.metrics, r.prompt) for r in read_rows(out)]
    assert a == b


def test_grow_n_on_resume_keeps_instances(tmp_path: Path) -> None:
    out = tmp_path / "g"
    run(out, cfg(n=1))
    first = {r.extra["instance"] for r in read_rows(out)}
    s = run(out, cfg(n=3), resume=True)
    assert s.cells_skipped == 159 and s.cells_run == 2 * 159  # type: ignore[attr-defined]
    assert first <= {r.extra["instance"] for r in read_rows(out)}
    with pytest.raises(ResumeError, match="probe_tokens"):
        run(out, cfg(n=3, probe_tokens=20), resume=True)
    assert read_manifest(out).config["n"] == 3


def test_sample_is_a_seeded_prefix() -> None:
    from traceless.datasets import load_instances

    insts = load_instances(FIXTURE)
    a = [i.id for i in select_instances(insts, 3, 5)]
    assert [i.id for i in select_instances(insts, 2, 5)] == a[:2]
    assert sorted(a) == sorted(i.id for i in insts)
    with pytest.raises(ConfigError, match="n=4 but the data holds 3"):
        select_instances(insts, 4, 5)


def test_config_validation() -> None:
    with pytest.raises(ValueError, match="S must be"):
        cfg(S=[3])
    with pytest.raises(ValueError, match="unknown deletion mode"):
        cfg(modes=["shred"])
    with pytest.raises(ValueError, match="probe levels"):
        cfg(probe_levels=["polite"])
    assert cfg(k=[25, 1, 1]).k == [1, 25]


def test_parse_judge() -> None:
    assert parse_judge(" Yes.") is True
    assert parse_judge("no, it does not") is False
    assert parse_judge("maybe") is None


def test_judge_self_records_verdicts(tmp_path: Path) -> None:
    def judging(messages: list[ChatMessage], c: GenerationConfig) -> str:
        if messages[-1].content.startswith("You are grading"):
            return "yes" if "Assistant's answer: It is" in messages[-1].content else "no"
        return leaky(messages, c)

    out = tmp_path / "j"
    run(out, cfg(judge="self", modes=[], S=[0]), ScriptedBackend(judging, name="leaky"))
    prs = [r for r in read_rows(out) if "/pr/" in r.key]
    assert prs and all(r.metrics["judge"] == r.reply.startswith("It is") for r in prs)  # type: ignore[union-attr]


def test_groups_in_threads_give_the_same_rows(tmp_path: Path) -> None:
    run(tmp_path / "one", cfg())
    run(tmp_path / "three", cfg(), workers=3)
    a = [(r.key, r.reply, r.metrics, r.prompt) for r in read_rows(tmp_path / "one")]
    b = [(r.key, r.reply, r.metrics, r.prompt) for r in read_rows(tmp_path / "three")]
    assert a == b


def test_batches_keep_contexts_together_and_fill_up() -> None:
    """Prompts of one memory context are adjacent; batches fill to max_batch across contexts
    (the backend decodes a batch together whatever its contexts), per generation config."""
    from traceless.studies.frontier._study import FrontierStudy, _Job

    def job(sys: str, q: str, gen: str = "probe") -> _Job:
        return _Job([ChatMessage(role="system", content=sys), ChatMessage(role="user", content=q)], gen)

    jobs = {f"{c}{i}": job(c * (3 if c == "a" else 1), str(i)) for c in "abc" for i in range(3)}
    jobs["ans"] = job("b", "?", "answer")
    out = FrontierStudy._batches(list(jobs), jobs, max_batch=4)
    assert [g for g, _ in out] == ["probe"] * 3 + ["answer"]
    flat = [k for g, b in out if g == "probe" for k in b]
    assert flat == ["b0", "b1", "b2", "c0", "c1", "c2", "a0", "a1", "a2"]  # shortest context first
    assert [len(b) for _, b in out] == [4, 4, 1, 1]
