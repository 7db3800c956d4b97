"""Export bundles (`traceless study export DIR --out BUNDLE`): the bundle renders the same report
as its results dir, and holds no conversation text: a secret planted in the data, the replies
and the expected answers is absent from the bundle's bytes in every encoding we can think of."""

from __future__ import annotations

import base64
import json
import urllib.parse
from pathlib import Path

import pytest
from _cli import cli
from test_afterdelete import reader
from test_frontier import FIXTURE, cfg, leaky
from test_replay_study import long_lme_fixture, toy_reply

from traceless.errors import StudyError
from traceless.models import ChatMessage, GenerationConfig, HashingEmbedder, ScriptedBackend
from traceless.report import render_report
from traceless.runtime import ToyKVBackend
from traceless.studies import ResultsStore, export_bundle, is_bundle, read_manifest, read_rows, run_study
from traceless.studies.replay import ReplayConfig

SECRET = "Zq7-PLANTED-wombat-3391"


def encodings(s: str) -> list[bytes]:
    """``s`` as it could sit in a file: UTF-8/16/32 both byte orders, hex, base64 at every
    alignment, URL quoting, JSON escaping."""
    raw = s.encode()
    out = [raw, raw.lower(), raw.upper(), s.encode("utf-16-le"), s.encode("utf-16-be"), s.encode("utf-32-le"),
           s.encode("utf-32-be"), raw.hex().encode(), raw.hex().upper().encode(),
           urllib.parse.quote(s).encode(), json.dumps(s, ensure_ascii=True).encode()[1:-1]]
    for shift in range(3):  # base64 of s at each 3-byte alignment: the middle groups are stable
        b = base64.b64encode(b"\0" * shift + raw)[4:-4]
        out += [b, base64.urlsafe_b64encode(b"\0" * shift + raw)[4:-4]]
    return out


def holds(blob: bytes, s: str) -> bool:
    return any(e in blob for e in encodings(s))


def _same_report(d: Path, bundle: Path, tmp: Path) -> None:
    a = render_report(d, tmp / "from_dir")
    b = render_report(bundle, tmp / "from_bundle")
    assert b.read_text() == a.read_text().replace(str(d), str(bundle))
    for f in sorted(a.parent.iterdir()):  # side files: tables, CSV, numbers (figures are PNG bytes)
        if f.suffix in {".md", ".csv", ".json"}:
            assert (b.parent / f.name).read_text() == f.read_text().replace(str(d), str(bundle)), f.name


def secret_fixture(path: Path) -> Path:
    """The tiny LongMemEval file with SECRET in a user turn and in every expected answer."""
    recs = json.loads(FIXTURE.read_text())
    for r in recs:
        r["answer"] = f"{r['answer']} {SECRET}"
        r["haystack_sessions"][0][0]["content"] += f" My locker code is {SECRET}."
    path.write_text(json.dumps(recs))
    return path


def echo_secret(messages: list[ChatMessage], c: GenerationConfig) -> str:
    return leaky(messages, c) + (f" ({SECRET})" if SECRET in messages[0].content else "")


@pytest.fixture(scope="module")
def frontier_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("fb")
    out = tmp / "run"
    run_study("frontier", out, cfg(data=str(secret_fixture(tmp / "lme.json")), k=[1, 3]),
              backend=ScriptedBackend(echo_secret, name="leaky"), model_tag="leaky", embedder=HashingEmbedder(),
              progress=False)
    return out


def test_frontier_bundle_renders_the_same_report(frontier_dir: Path, tmp_path: Path) -> None:
    bundle = tmp_path / "bundle"
    s = export_bundle(frontier_dir, bundle)
    assert is_bundle(bundle) and sorted(p.name for p in bundle.iterdir()) == ["manifest.json", "results.parquet"]
    assert s.rows == len(read_rows(frontier_dir)) > 0
    assert read_manifest(bundle) == read_manifest(frontier_dir)
    rows = read_rows(bundle)
    assert all(r.prompt is None and r.reply is None for r in rows)
    assert [(r.key, r.metrics, r.config, r.timing) for r in rows] == [
        (r.key, r.metrics, r.config, r.timing) for r in read_rows(frontier_dir)]
    _same_report(frontier_dir, bundle, tmp_path)


def test_bundle_bytes_hold_no_planted_secret_or_canary(frontier_dir: Path, tmp_path: Path) -> None:
    rows = read_rows(frontier_dir)
    canaries = sorted({r.extra["canary"] for r in rows})
    db = (frontier_dir / "results.sqlite").read_bytes()
    # the scan can fail: the results dir holds the secret (data, replies, expected answers) and every canary
    assert holds(db, SECRET) and all(holds(db, c) for c in canaries)
    assert any(SECRET in str(r.extra.get("expected")) for r in rows) and any(SECRET in (r.reply or "") for r in rows)
    bundle = tmp_path / "b"
    assert cli("study", "export", str(frontier_dir), "--out", str(bundle)) == 0
    blob = b"".join(p.read_bytes() for p in sorted(bundle.iterdir()))
    for s in (SECRET, *canaries):
        assert not holds(blob, s), s
    # the decoded values (the file is compressed, so its bytes alone would not show a leak)
    import pyarrow.parquet as pq

    decoded = json.dumps(pq.read_table(bundle / "results.parquet").to_pylist(), ensure_ascii=False)
    decoded += (bundle / "manifest.json").read_text()
    for s in (SECRET, *canaries):
        assert not holds(decoded.encode(), s), s


def test_replay_bundle_renders_the_same_report(tmp_path: Path) -> None:
    c = ReplayConfig(suites=["longmemeval", "toolsandbox"], episodes=1, steps=4, samples=2, depths=[0],
                     longmemeval=str(long_lme_fixture(tmp_path / "lme.json")), long_episodes=1, long_steps=16,
                     stochastic_episodes=1)
    run_study("replay", tmp_path / "r", c, backend=ToyKVBackend(toy_reply), model_tag="toy", progress=False)
    export_bundle(tmp_path / "r", tmp_path / "b")
    _same_report(tmp_path / "r", tmp_path / "b", tmp_path)


def test_afterdelete_bundle_renders_the_same_report(tmp_path: Path) -> None:
    run_study("afterdelete", tmp_path / "r", {"n": 6, "n_transformed": 4, "blocks": ["primary", "controls",
                                                                                      "lifecycle", "transformed"]},
              backend=ScriptedBackend(reader), model_tag="scripted", embedder=HashingEmbedder(), progress=False)
    export_bundle(tmp_path / "r", tmp_path / "b")
    blob = (tmp_path / "b" / "results.parquet").read_bytes()
    for r in read_rows(tmp_path / "r")[:50]:  # the auditor's replies and query texts stay behind
        for text in (*r.extra.get("query_texts", []), *(x for x in r.extra.get("replies", []) if len(x) > 12)):
            assert not holds(blob, text), text
    _same_report(tmp_path / "r", tmp_path / "b", tmp_path)


def test_export_refuses_bad_input_and_writes_nothing(frontier_dir: Path, tmp_path: Path) -> None:
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "keep.txt").write_text("x")
    with pytest.raises(StudyError, match="new --out"):
        export_bundle(frontier_dir, busy)
    assert sorted(p.name for p in busy.iterdir()) == ["keep.txt"]
    assert cli("study", "export", str(tmp_path / "nothing"), "--out", str(tmp_path / "o")) != 0
    assert not (tmp_path / "o").exists()
    # a study that put text into a metric: the export stops, and no bundle (or temp folder) is left
    d = tmp_path / "copy"
    d.mkdir()
    (d / "manifest.json").write_text((frontier_dir / "manifest.json").read_text())
    with ResultsStore(d / "results.sqlite") as rs:
        r = read_rows(frontier_dir)[0]
        rs.add(r.model_copy(update={"metrics": {**r.metrics, "note": f"the user said {SECRET}"}}))
    with pytest.raises(StudyError, match="holds text"):
        export_bundle(d, tmp_path / "out")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["busy", "copy"]
