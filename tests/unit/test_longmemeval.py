"""LongMemEval loader, the generic JSON Lines importer, format detection and errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from traceless.datasets import (
    DATA_ENV,
    export_jsonl,
    load_instances,
    parse_longmemeval,
    read_longmemeval,
    resolve_longmemeval,
    sessions_to_instances,
)
from traceless.errors import InputFormatError

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "longmemeval_tiny.json"
SHARED = Path(__file__).resolve().parents[2] / ".." / "shared" / "data"
SUBSET = SHARED / "longmemeval_oracle_subset99.json"
LOCOMO = SHARED / "locomo10.json"


def records() -> list[dict]:  # type: ignore[type-arg]
    return json.loads(FIXTURE.read_text())


def test_fixture_converts_to_sessions() -> None:
    insts = read_longmemeval(FIXTURE)
    assert [i.id for i in insts] == ["tiny_pet", "tiny_job", "tiny_bike"]
    pet = insts[0]
    assert pet.owner == "tiny_pet" and all(s.user_id == "tiny_pet" for s in pet.sessions)
    assert [s.session_id for s in pet.sessions] == ["tiny_pet_s1", "tiny_pet_s2"]
    assert pet.sessions[0].date == "2024/01/05 (Fri) 09:12"
    assert pet.sessions[0].turns[0].has_answer and not pet.sessions[0].turns[1].has_answer
    assert pet.questions[0].question == "What is the name of my dog?" and pet.questions[0].answer == "Biscuit"
    assert pet.questions[0].question_type == "single-session-user"
    assert pet.evidence_sessions == ["tiny_pet_s1"] and pet.source == "longmemeval"
    bike = insts[2]
    assert len(bike.sessions) == 1, "a session without turns is dropped"
    assert bike.questions[0].answer == "42", "numeric answers become strings"


@pytest.mark.skipif(not SUBSET.exists(), reason="shared LongMemEval subset not present")
def test_real_subset_loads() -> None:
    insts = load_instances(SUBSET)
    assert len(insts) == 99 and len({i.id for i in insts}) == 99
    assert all(i.sessions and len(i.questions) == 1 for i in insts)
    assert sum(t.has_answer for i in insts for s in i.sessions for t in s.turns) > 99
    assert {i.questions[0].question_type for i in insts} >= {"multi-session", "temporal-reasoning"}


@pytest.mark.skipif(not LOCOMO.exists(), reason="shared LoCoMo file not present")
def test_locomo_is_refused_naming_record_and_field() -> None:
    with pytest.raises(InputFormatError, match=r"record 0: field 'question_id': missing"):
        load_instances(LOCOMO)


@pytest.mark.parametrize(
    ("mutate", "pattern"),
    [
        (lambda r: r[1].pop("question"), r"record 1 \(question_id 'tiny_job'\): field 'question': missing"),
        (lambda r: r[0].update(answer=None), r"record 0 .*field 'answer': must be a string or number"),
        (lambda r: r[2]["haystack_session_ids"].pop(), r"record 2 .*'haystack_session_ids': must be a list of 2"),
        (lambda r: r[0]["haystack_sessions"][1][0].update(role="bot"),
         r"field 'haystack_sessions\[1\]\[0\].role': must be user or assistant, got 'bot'"),
        (lambda r: r[1]["haystack_sessions"][0][2].pop("content"),
         r"field 'haystack_sessions\[0\]\[2\].content': must be a string"),
        (lambda r: r[0].update(haystack_dates=["x"]), r"'haystack_dates': must be a list of 2 dates"),
        (lambda r: r[2].update(question_id="tiny_pet"), r"record 2: duplicate question_id 'tiny_pet'"),
        (lambda r: r.append(["not", "a", "record"]), r"record 3: field '\(record\)': expected a JSON object"),
    ],
)
def test_bad_records_name_record_and_field(tmp_path: Path, mutate, pattern: str) -> None:  # type: ignore[no-untyped-def]
    recs = records()
    mutate(recs)
    p = tmp_path / "bad.json"
    p.write_text(json.dumps(recs))
    with pytest.raises(InputFormatError, match=pattern):
        load_instances(p)


def test_whole_file_errors(tmp_path: Path) -> None:
    cases = {
        "empty.json": ("[]", "empty"),
        "obj.json": ('{"conversation": {}, "qa": []}', r"line 1 \(record 0\): field 'turns': missing.*neither"),
        "multi.json": ('{"conversation": {},\n "qa": []}', r"record 0: a single JSON object \(keys \['conversation'"),
        "text.txt": ("hello world", "neither a LongMemEval JSON array nor JSON Lines"),
        "broken.json": ('[{"question_id": ', "not valid JSON"),
    }
    for name, (text, pattern) in cases.items():
        p = tmp_path / name
        p.write_text(text)
        with pytest.raises(InputFormatError, match=pattern):
            load_instances(p)
    with pytest.raises(InputFormatError, match="does not exist"):
        load_instances(tmp_path / "missing.json")
    with pytest.raises(InputFormatError, match="expected a JSON array"):
        parse_longmemeval({"a": 1})


def test_jsonl_roundtrip_and_grouping(tmp_path: Path) -> None:
    insts = load_instances(FIXTURE)
    p = tmp_path / "sessions.jsonl"
    export_jsonl(insts, p)
    lines = p.read_text().splitlines()
    assert len(lines) == sum(len(i.sessions) for i in insts)
    back = load_instances(p)
    assert [i.id for i in back] == [i.id for i in insts]
    for a, b in zip(insts, back, strict=True):
        assert [s.model_dump() for s in a.sessions] == [s.model_dump() for s in b.sessions]
        assert [(q.question, q.answer) for q in a.questions] == [(q.question, q.answer) for q in b.questions]
        assert b.source == "jsonl"
    # a user without QA still becomes an instance (AER works; PR cells are simply absent)
    from traceless.memory import Session, Turn

    only = sessions_to_instances([Session(user_id="u", session_id="s", turns=[Turn(role="user", content="hi")])])
    assert only[0].questions == [] and only[0].id == "u"


def test_jsonl_bad_line_is_named(tmp_path: Path) -> None:
    p = tmp_path / "bad.jsonl"
    good = {"user_id": "u", "session_id": "s1", "turns": [{"role": "user", "content": "hi"}]}
    bad = {"user_id": "u", "session_id": "s2", "turns": [{"role": "user"}]}
    p.write_text(json.dumps(good) + "\n" + json.dumps(bad) + "\n")
    with pytest.raises(InputFormatError, match=r"line 2: field 'turns.0.content'"):
        load_instances(p)


def test_resolve_data(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert resolve_longmemeval(FIXTURE) == FIXTURE
    with pytest.raises(InputFormatError, match="--data .*no such file"):
        resolve_longmemeval(tmp_path / "nope.json")
    monkeypatch.setenv(DATA_ENV, str(FIXTURE))  # read at the edge only (`study run --longmemeval`)
    monkeypatch.chdir(tmp_path)
    import traceless.datasets._data as d

    monkeypatch.setattr(d, "_candidates", lambda: [tmp_path / "x" / "missing.json"])
    with pytest.raises(InputFormatError, match=r"github.com/xiaowu0162/LongMemEval.*longmemeval_oracle.json|"
                                               r"longmemeval_oracle.json.*github.com/xiaowu0162/LongMemEval"):
        resolve_longmemeval()
