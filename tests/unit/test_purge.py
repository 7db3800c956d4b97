"""``traceless study purge DIR``: prompts and replies leave the results dir; the metrics
and the report stay."""

from __future__ import annotations

import json
import random
import re
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from _cli import cli
from test_frontier import FIXTURE, cfg, leaky  # noqa: E402  (same folder)
from test_system_audit import CANARY, _parrot  # noqa: E402  (same folder)

from traceless.audit import SystemAuditConfig, plant_canaries, run_system_audit
from traceless.datasets import redact_canaries
from traceless.errors import StudyError
from traceless.models import CachingBackend, ChatMessage, GenerationConfig, HashingEmbedder, ScriptedBackend
from traceless.report import render_report
from traceless.studies import export_bundle, purge_results, read_rows, run_study
from traceless.systems import SystemRuntime


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("purge") / "run"
    run_study("frontier", out, cfg(k=[1, 3], keep_memory=True), backend=ScriptedBackend(leaky, name="leaky"),
              model_tag="leaky", embedder=HashingEmbedder(), progress=False)
    return out


def _texts() -> list[bytes]:
    """Conversation sentences of the fixture (long enough to be unambiguous)."""
    data = json.loads(FIXTURE.read_text())
    return sorted({t["content"].encode() for r in data for s in r["haystack_sessions"] for t in s
                   if len(t["content"]) >= 40})


def _found(d: Path, needles: list[bytes]) -> set[str]:
    hits = set()
    for p in d.rglob("*"):
        if p.is_file() and p.parent.name != "report":
            blob = p.read_bytes()
            hits |= {str(p.relative_to(d)) for n in needles if n in blob}
    return hits


def test_purge_removes_prompts_keeps_metrics(run_dir: Path, tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    d = tmp_path / "run"
    shutil.copytree(run_dir, d)
    before_rows = read_rows(d)
    replies = sorted({r.reply.encode() for r in before_rows if r.reply and len(r.reply) >= 40})
    needles = _texts() + replies
    assert {"results.sqlite", "generations.sqlite"} <= _found(d, needles)  # the check can fail
    numbers = json.loads((render_report(d).parent / "numbers.json").read_text())

    assert cli("study", "purge", str(d)) == 0
    assert f"prompt/reply cleared in {len(before_rows)} row(s)" in capsys.readouterr().out
    assert _found(d, needles) == set()
    assert not (d / "generations.sqlite").exists() and not (d / "work").exists()
    after = read_rows(d)
    assert all(r.prompt is None and r.reply is None for r in after)
    assert [r.metrics for r in after] == [r.metrics for r in before_rows]
    assert json.loads((render_report(d).parent / "numbers.json").read_text()) == numbers
    assert purge_results(d).rows_cleared == 0  # idempotent


def test_purge_refuses_a_dir_that_is_not_a_results_dir(tmp_path: Path) -> None:
    (tmp_path / "x.txt").write_text("keep me")
    with pytest.raises(StudyError, match="not a study results dir"):
        purge_results(tmp_path)
    assert (tmp_path / "x.txt").read_text() == "keep me"


# --------------------------------------------------------------------------- every layout
CANARY_RE = re.compile(rb"[A-Z]{2}\d-[A-Z]+-\d{4}")


def _audit(out: Path, *, reveal: bool, reply: Callable[[list[ChatMessage], GenerationConfig], str] = _parrot,
           ) -> Path:
    runtime = SystemRuntime(CachingBackend(ScriptedBackend(reply)), HashingEmbedder(), "scripted")
    run_system_audit(SystemAuditConfig(system_config={"S": 1, "modes": ["noop", "full_purge"]}, model="scripted",
                                       profiles=2, reveal=reveal), runtime, out)
    return out


def _jsonl_texts(d: Path) -> list[bytes]:
    rows = [json.loads(x) for x in (d / "results.jsonl").read_text().splitlines()]
    texts = {r["reply"] for r in rows} | {m["content"] for r in rows for m in r["prompt"]}
    return sorted(t.encode() for t in texts if len(t) >= 12)


def _all_bytes(d: Path) -> bytes:
    return b"".join(p.read_bytes() for p in sorted(d.rglob("*")) if p.is_file())


@pytest.mark.parametrize("reveal", [True, False])
def test_purge_clears_an_audit_dir(tmp_path: Path, capsys: pytest.CaptureFixture[str], reveal: bool) -> None:
    """An audit dir (results.sqlite of runner cells, results.jsonl, summary.json, work/):
    no prompt, no reply and (with --reveal) no canary survives in any file; the report's
    numbers stay."""
    d = _audit(tmp_path / "a", reveal=reveal)
    needles = _jsonl_texts(d)
    assert len(needles) > 10 and {"results.jsonl", "results.sqlite"} <= _found(d, needles)  # the check can fail
    assert bool(CANARY_RE.search(_all_bytes(d))) == reveal
    report = render_report(d).read_text()
    n_rows = len(read_rows(d))

    assert cli("study", "purge", str(d)) == 0
    out = capsys.readouterr().out
    assert "(audit dir)" in out and f"cleared in {2 * (n_rows - 3)} row(s)" in out  # store + results.jsonl
    assert _found(d, needles) == set() and not CANARY_RE.search(_all_bytes(d))
    rows = [json.loads(x) for x in (d / "results.jsonl").read_text().splitlines()]
    assert rows and all(r["prompt"] is None and r["reply"] is None for r in rows)
    assert all(r.prompt is None and r.reply is None for r in read_rows(d))
    assert render_report(d).read_text() == report
    assert purge_results(d).rows_cleared == 0


def test_purge_clears_an_audit_dir_written_as_parquet(tmp_path: Path) -> None:
    """`traceless audit --format parquet` keeps the probe rows in results.parquet instead."""
    import pyarrow.json as pj
    import pyarrow.parquet as pq

    d = _audit(tmp_path / "a", reveal=True)
    replies = {json.loads(x)["reply"] for x in (d / "results.jsonl").read_text().splitlines()}
    pq.write_table(pj.read_json(d / "results.jsonl"), d / "results.parquet")  # what the CLI does
    (d / "results.jsonl").unlink()
    assert set(pq.read_table(d / "results.parquet").column("reply").to_pylist()) == replies
    n = len(replies and pq.read_table(d / "results.parquet"))
    s = purge_results(d)
    t = pq.read_table(d / "results.parquet")
    assert t.num_rows == n and t.column("reply").null_count == n and t.column("prompt").null_count == n
    assert t.column("extracted").to_pylist().count(True) > 0  # the metrics stay
    assert s.rows_cleared == 2 * n and not CANARY_RE.search(_all_bytes(d))


def test_purge_of_a_bundle_changes_nothing(run_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bundle = tmp_path / "b"
    export_bundle(run_dir, bundle)
    before = {p.name: p.read_bytes() for p in bundle.iterdir()}
    assert cli("study", "purge", str(bundle)) == 0
    assert "export bundle" in capsys.readouterr().out
    assert {p.name: p.read_bytes() for p in bundle.iterdir()} == before


def test_purge_drops_the_canary_kept_in_a_study_rows_extra(run_dir: Path, tmp_path: Path) -> None:
    d = tmp_path / "run"
    shutil.copytree(run_dir, d)
    canaries = {r.extra["canary"].encode() for r in read_rows(d) if "canary" in r.extra}
    assert canaries and any(c in (d / "results.sqlite").read_bytes() for c in canaries)
    s = purge_results(d)
    assert s.extra_trimmed > 0 and s.texts_checked > 0
    assert not any(c in _all_bytes(d) for c in canaries)


def test_purge_names_a_file_that_still_holds_a_reply(tmp_path: Path) -> None:
    d = _audit(tmp_path / "a", reveal=True)
    reply = next(json.loads(x)["reply"] for x in (d / "results.jsonl").read_text().splitlines()
                 if len(json.loads(x)["reply"]) >= 24)
    (d / "notes").mkdir()
    (d / "notes" / "copy.txt").write_text(f"pasted: {reply}\n")
    with pytest.raises(StudyError, match=r"notes/copy\.txt \(1\)"):
        purge_results(d)


# --------------------------------------------------------------------------- near copies
def _near(messages: list[ChatMessage], config: GenerationConfig) -> str:
    """Summaries keep the token; the agent misremembers it: two characters changed, one dropped
    and the case lowered, one copy of each."""
    last = messages[-1].content
    if "Messages:" in last:
        found = CANARY.findall(last)
        return "- lives in a city\n" + (f"- has token {found[0]}" if found else "")
    found = CANARY.findall(messages[0].content)
    if not found:
        return "I do not know."
    c = found[0]
    return f"Maybe {'AM' + c[2:]} or {c[:-1]}, or {c.lower()}; not {_far(c)}."


def _far(c: str) -> str:
    """Three substitutions away: not a copy."""
    return "".join("Q" if i in (0, 1) else ("0" if ch != "0" else "1") if i == len(c) - 1 else ch
                   for i, ch in enumerate(c)).replace("-", "_", 1)


def test_audit_redacts_near_copies_of_a_canary(tmp_path: Path) -> None:
    d = _audit(tmp_path / "a", reveal=False, reply=_near)
    rows = [json.loads(x) for x in (d / "results.jsonl").read_text().splitlines()]
    replies = [r["reply"] for r in rows if r["reply"].startswith("Maybe")]
    assert replies and all(r.count("[CANARY]") == 3 for r in replies)
    assert all(re.search(r"not QQ\d_[A-Z]+-\d{4}\.$", r) for r in replies)  # 3 edits away: kept
    blob = _all_bytes(d).decode("utf-8", "replace")
    for p in plant_canaries(SystemAuditConfig(system_config={"S": 1}, profiles=2)):
        assert not [m for m in re.findall(r"[A-Za-z0-9-]{10,16}", blob) if _lev(m.upper(), p.canary) <= 2]


def _lev(a: str, b: str) -> int:
    prev = list(range(len(b) + 1))
    for i, x in enumerate(a, 1):
        cur = [i]
        for j, y in enumerate(b, 1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (x != y)))
        prev = cur
    return prev[-1]


@pytest.mark.parametrize(("text", "want"), [
    ("Here you go: HV6-AMBER-3941.", "Here you go: [CANARY]."),
    ("token AM6-AMBER-3941 ok", "token [CANARY] ok"),  # the near copy the audit kept
    ("hv6-amber-3941", "[CANARY]"),
    ("HV6AMBER3941!", "[CANARY]!"),
    ("(HV6-AMBER-394)", "([CANARY])"),
    ("HV6-AMBER-3941 and HV6-AMBER-3914", "[CANARY] and [CANARY]"),
    ("word-HV6-AMBER-3941", "word-[CANARY]"),
    ("XX1-AMBER-1111 is another user's", "XX1-AMBER-1111 is another user's"),
    ("the amber number 3941 is not it", "the amber number 3941 is not it"),
])
def test_redact_canaries_catches_copies_within_two_edits(text: str, want: str) -> None:
    assert redact_canaries(text, ["HV6-AMBER-3941"]) == want
    assert all(_lev(m, "HV6-AMBER-3941") > 2 for m in re.findall(r"[A-Za-z0-9-]{10,16}", want.upper()))


def test_redact_canaries_against_brute_force() -> None:
    """Every window within two edits of the canary is gone, on random near copies in noise."""
    rng = random.Random(7)
    canary, alphabet = "QX2-SAGE-7051", "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789- "
    for _ in range(200):
        c = list(canary)
        for _ in range(rng.randint(0, 2)):
            op, i = rng.choice("sid"), rng.randrange(len(c))
            if op == "s":
                c[i] = rng.choice(alphabet)
            elif op == "i":
                c.insert(i, rng.choice(alphabet))
            else:
                del c[i]
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 20))) + "".join(c) + " tail"
        out = redact_canaries(text, [canary])
        assert "[CANARY]" in out, text
        plain = out.replace("[CANARY]", "\0")
        for n in range(len(canary) - 2, len(canary) + 3):
            assert all(_lev(plain[i:i + n], canary) > 2 for i in range(len(plain) - n + 1)), (text, out)
