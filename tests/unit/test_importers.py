"""``traceless data import``: LoCoMo, LongMemEval and OpenAI-style messages → sessions.
Fixtures are small hand-written files in tests/fixtures (no LoCoMo data in the repo)."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
from _cli import cli

from traceless.datasets import import_file, instances_to_sessions, load_instances, read_longmemeval
from traceless.errors import ConfigError, InputFormatError
from traceless.memory import read_sessions

FIX = Path(__file__).resolve().parents[1] / "fixtures"
LOCOMO = FIX / "locomo_tiny.json"
OPENAI = FIX / "openai_messages_tiny.jsonl"
LME = FIX / "longmemeval_tiny.json"




def test_locomo_sessions_turns_and_qa() -> None:
    res = import_file("locomo", LOCOMO)
    ss = res.sessions
    assert [(s.user_id, s.session_id) for s in ss] == [("tiny-1", "session_1"), ("tiny-1", "session_2"),
                                                        ("tiny-2", "session_1")]  # empty session_3 dropped
    assert ss[0].date == "9:05 am on 3 March, 2024"
    t = ss[0].turns
    assert [x.role for x in t] == ["user", "assistant", "user"]
    assert t[0].content == "Ana: Hi Ben! I finally started pottery classes on Tuesdays."
    assert "[shares a photo: a photo of a green ceramic mug]" in t[2].content
    assert [x.has_answer for x in t] == [True, False, True]  # D1:1 and D1:3 are cited as evidence
    assert [x.has_answer for x in ss[1].turns] == [True, False]
    assert ss[0].qa == []  # QA on the sample's last session
    assert [(q.question, q.answer) for q in ss[1].qa] == [
        ("On which weekday does Ana go to pottery class?", "Tuesday"),
        ("What is the name of Ben's cat?", "Pixel"),
        ("In which year did Ana make her first mug?", "2024"),
    ]
    assert ss[1].qa[0].question_type == "category-4" and ss[1].qa[0].question_id == "tiny-1/qa0"
    assert res.notes == ["skipped 1 adversarial question(s) without an answer (LoCoMo category 5)"]


def test_locomo_cli_roundtrip_feeds_studies(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "sessions.jsonl"
    assert cli("data", "import", "locomo", str(LOCOMO), "-o", str(out)) == 0
    assert "imported 3 session(s) of 2 user(s), 4 QA pair(s)" in capsys.readouterr().err
    assert read_sessions(out) == import_file("locomo", LOCOMO).sessions
    insts = load_instances(out)  # what --data of the frontier study reads
    assert [(i.id, len(i.questions), i.evidence_sessions) for i in insts] == [
        ("tiny-1", 3, ["session_1", "session_2"]), ("tiny-2", 1, ["session_1"])]


def _broken(tmp_path: Path, edit: str) -> Path:
    data = json.loads(LOCOMO.read_text())
    bad = copy.deepcopy(data)
    if edit == "text":
        del bad[1]["conversation"]["session_1"][2]["text"]
    elif edit == "speaker":
        bad[0]["conversation"]["session_2"][0]["speaker"] = "Zoe"
    elif edit == "qa":
        bad[1]["qa"] = {"question": "?"}
    p = tmp_path / f"bad-{edit}.json"
    p.write_text(json.dumps(bad))
    return p


@pytest.mark.parametrize(("edit", "message"), [
    ("text", "record 1 (sample_id 'tiny-2'): field 'conversation.session_1[2].text': missing"),
    ("speaker", "record 0 (sample_id 'tiny-1'): field 'conversation.session_2[0].speaker': 'Zoe'"),
    ("qa", "record 1 (sample_id 'tiny-2'): field 'qa': missing or not a list"),
])
def test_locomo_bad_record_named_nothing_written(edit: str, message: str, tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "sessions.jsonl"
    assert cli("data", "import", "locomo", str(_broken(tmp_path, edit)), "-o", str(out)) == InputFormatError.exit_code
    assert message in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == [tmp_path / f"bad-{edit}.json"]  # no output, no temp file


def test_wrong_format_names_first_record(tmp_path: Path) -> None:
    with pytest.raises(InputFormatError, match="longmemeval_tiny.json record 0: field 'sample_id'"):
        import_file("locomo", LME)
    with pytest.raises(InputFormatError, match="locomo_tiny.json record 0: field 'question_id'"):
        import_file("longmemeval", LOCOMO)
    with pytest.raises(InputFormatError, match="record 0: field 'messages'"):
        import_file("openai-messages", LOCOMO)
    with pytest.raises(ConfigError, match="unknown import format .csv."):
        import_file("csv", LOCOMO)


def test_existing_output_kept_on_error(tmp_path: Path) -> None:
    out = tmp_path / "sessions.jsonl"
    out.write_text("previous\n")
    assert cli("data", "import", "locomo", str(LME), "-o", str(out)) == InputFormatError.exit_code
    assert out.read_text() == "previous\n"


def test_longmemeval_import_matches_loader(tmp_path: Path) -> None:
    ss = import_file("longmemeval", LME).sessions
    assert ss == instances_to_sessions(read_longmemeval(LME))
    out = tmp_path / "s.jsonl"
    assert cli("data", "import", "longmemeval", str(LME), "-o", str(out)) == 0
    assert [i.questions for i in load_instances(out)] == [i.questions for i in read_longmemeval(LME)]


def test_openai_messages(tmp_path: Path) -> None:
    ss = import_file("openai-messages", OPENAI, default_user="u7").sessions
    assert [(s.user_id, s.session_id, s.date) for s in ss] == [("u7", "chat-a", "2024-05-01"), ("u7", "chat-b", None)]
    assert [t.role for t in ss[0].turns] == ["system", "user", "assistant"]
    # list-of-parts content flattened; the tool call without text skipped; the tool result kept
    assert [(t.role, t.content) for t in ss[1].turns] == [
        ("user", "Which lock code did I give you?"), ("tool", "4417"), ("assistant", "It was 4417.")]
    bare = tmp_path / "one.json"
    bare.write_text(json.dumps([{"role": "user", "content": "hi"}, {"role": "developer", "content": "be brief"}]))
    (one,) = import_file("openai-messages", bare).sessions
    assert [t.role for t in one.turns] == ["user", "system"] and one.session_id == "conversation-0"
    dup = tmp_path / "dup.jsonl"
    dup.write_text('{"id": "x", "messages": [{"role": "user", "content": "a"}]}\n' * 2)
    with pytest.raises(InputFormatError, match="session id 'x' of user 'user' appears twice"):
        import_file("openai-messages", dup)
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"messages": [{"role": "user", "content": "a"}]}\n{"messages": [{"role": "robot", "content": "b"}]}\n')
    with pytest.raises(InputFormatError, match=r"record 1: field 'messages\[0\].role'"):
        import_file("openai-messages", bad)
