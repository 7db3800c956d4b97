"""The `traceless audit` job (the audit engine on the native store) and the CLI commands on
memory/forget (scripted model)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from traceless.audit import PAPER_LADDER, SystemAuditConfig, make_canary, run_system_audit
from traceless.cli import main
from traceless.models import CachingBackend, ChatMessage, GenerationConfig, HashingEmbedder, ScriptedBackend
from traceless.studies import read_rows
from traceless.systems import SystemRuntime

CANARY = re.compile(r"[A-Z]{2}\d-[A-Z]+-\d{4}")


def _parrot(messages: list[ChatMessage], config: GenerationConfig) -> str:
    """Summaries keep the token; the agent repeats any token in its memory (a leaky model)."""
    last = messages[-1].content
    if "Messages:" in last:
        found = CANARY.findall(last)
        return "- lives in a city\n" + (f"- has token {found[0]}" if found else "")
    found = CANARY.findall(messages[0].content)
    return f"Here you go: {found[0]}" if found else "I do not know."


def _run(tmp_path: Path, S: int, reveal: bool = False) -> tuple[dict[str, dict[str, float]], Path]:
    cfg = SystemAuditConfig(model="scripted", profiles=3, reveal=reveal,
                            system_config={"S": S, "modes": [*PAPER_LADDER, "exact", "lineage_closure"]})
    out = tmp_path / "audit"
    res = run_system_audit(cfg, SystemRuntime(CachingBackend(ScriptedBackend(_parrot)), HashingEmbedder()), out)
    return res.table, out


def test_audit_table_follows_the_papers(tmp_path: Path) -> None:
    table, out = _run(tmp_path, S=1)
    assert table["before"]["AER_max"] == 1.0
    assert table["noop"]["FRS_worst"] == 1.0
    # raw_only and exact remove the raw copy; the summary copy survives (paper 000 §3.3, paper 001)
    for mode in ("raw_only", "exact"):
        assert table[mode]["FRS_raw"] == 0.0 and table[mode]["FRS_summary"] == 1.0
    for mode in ("full_purge", "tombstone", "lineage_closure"):
        assert table[mode]["FRS_worst"] == 0.0 and table[mode]["AER_max"] == 0.0
    rows = [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines()]
    assert {r["phase"] for r in rows} == {"before", *PAPER_LADDER, "exact", "lineage_closure"}
    assert all(r["code_version"] and r["model"]["name"] == "scripted" for r in rows)
    # every forget's signed receipt is in the phase's residue cell (redacted like the rows)
    residue = {r.group: r for r in read_rows(out) if r.key.startswith("residue/")}
    for mode in (*PAPER_LADDER, "exact", "lineage_closure"):
        notes = residue[mode].extra["notes"]
        assert len(notes) == 3 and all(n["receipt"]["mode"] == mode and n["receipt"]["signature"]
                                       for n in notes.values())


def test_audit_at_s0_has_no_summary_tier(tmp_path: Path) -> None:
    table, _ = _run(tmp_path, S=0)
    assert table["raw_only"]["FRS_worst"] == 0.0  # paper 000 Table 2: raw_only at S=0 → 0
    assert table["noop"]["FRS_summary"] == 0.0


def test_audit_redacts_canaries_unless_revealed(tmp_path: Path) -> None:
    _, out = _run(tmp_path, S=1)
    text = (out / "results.jsonl").read_text()
    assert not CANARY.search(text) and "[CANARY]" in text
    _, out2 = _run(tmp_path / "r", S=1, reveal=True)
    assert CANARY.search((out2 / "results.jsonl").read_text())


def test_canary_grammar_is_seeded() -> None:
    import numpy as np

    a = [make_canary(np.random.default_rng(7)) for _ in range(3)]
    b = [make_canary(np.random.default_rng(7)) for _ in range(3)]
    assert a == b and all(CANARY.fullmatch(c) for c in a)


def _cli(args: list[str]) -> int:
    with pytest.raises(SystemExit) as e:
        main(args)
        raise SystemExit(0)
    return int(e.value.code or 0)


def test_cli_memory_and_forget_roundtrip(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    sessions = tmp_path / "s.jsonl"
    sessions.write_text(
        json.dumps(
            {
                "user_id": "u1",
                "session_id": "s1",
                "turns": [
                    {"role": "user", "content": "I love hiking."},
                    {"role": "user", "content": "my private session token is XQ7-VIOLET-3829"},
                ],
            }
        )
        + "\n"
        + json.dumps(
            {"user_id": "u2", "session_id": "s1", "turns": [{"role": "user", "content": "I keep bees."}]}
        )
        + "\n"
    )
    db = tmp_path / "m.db"
    assert _cli(["memory", "add", str(sessions), "--db", str(db), "--embedder", "hashing"]) == 0
    assert _cli(["memory", "lineage", "r-00000001", "--db", str(db)]) == 0
    assert "s-00000001" in capsys.readouterr().out  # the extractive summary is a descendant
    assert _cli(["memory", "search", "hiking", "--db", str(db), "--user", "u2"]) == 0
    assert "hiking" not in capsys.readouterr().out  # never another owner's memory
    receipt = tmp_path / "r.json"
    code = _cli(
        [
            "forget",
            "--db",
            str(db),
            "--mode",
            "lineage_closure",
            "--literal",
            "XQ7-VIOLET-3829",
            "--owner",
            "u1",
            "--receipt",
            str(receipt),
        ]
    )
    assert code == 0
    assert "XQ7-VIOLET-3829" not in receipt.read_text()
    assert _cli(["forget", "verify", str(receipt), "--db", str(db)]) == 0
    assert b"XQ7-VIOLET-3829" not in db.read_bytes()
    # nothing matched → its own exit code; unknown mode → the list of modes
    assert (
        _cli(
            [
                "forget",
                "--db",
                str(db),
                "--mode",
                "exact",
                "--record",
                "r-00000099",
                "--owner",
                "u1",
                "--receipt",
                str(tmp_path / "n.json"),
            ]
        )
        == 7
    )
    assert _cli(["forget", "--db", str(db), "--mode", "nope", "--record", "r-00000001"]) == 2
    assert "lineage_closure" in capsys.readouterr().err


def test_cli_bad_session_line_writes_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text(
        '{"user_id": "u", "session_id": "s", "turns": [{"role": "user", "content": "ok"}]}\n{"user_id": "u"}\n'
    )
    db = tmp_path / "m.db"
    assert _cli(["memory", "add", str(bad), "--db", str(db), "--embedder", "hashing"]) == 5
    assert "line 2" in capsys.readouterr().err
    assert not db.exists()


def test_cli_audit_scripted(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = _cli(
        [
            "audit",
            "--model",
            "scripted",
            "--embedder",
            "hashing",
            "--profiles",
            "1",
            "--modes",
            "noop,full_purge",
            "--out",
            str(tmp_path / "a"),
        ]
    )
    assert code == 0
    out = capsys.readouterr().out
    assert "full_purge" in out and "FRS worst" in out
