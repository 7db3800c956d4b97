"""Hostile input files: `data import` (every importer), `memory add` (the sessions reader) and
`--memory-config` answer with one line that names the file, the place and the fix, exit with
the error hierarchy's code and write nothing; a property-based fuzz test over every importer
and the sessions reader allows no outcome but success or a TracelessError."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import pytest
from _cli import cli
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from traceless.datasets import IMPORTERS, import_file, write_sessions_atomic
from traceless.errors import InputFormatError, TracelessError
from traceless.memory import read_sessions

DEEP = 100_000
DIGITS = "9" * 100_000
MSG = '{"messages": [{"role": "user", "content": "hi"}], "id": %s}'

CASES: dict[str, bytes] = {
    "deep-list": (b"[" * DEEP) + (b"]" * DEEP),
    "deep-object": (b'{"a":' * DEEP) + b"1" + (b"}" * DEEP),
    "deep-in-record": b'[{"messages": ' + (b"[" * DEEP) + (b"]" * DEEP) + b"}]",
    "deep-jsonl": b'{"messages": ' + (b"[" * 500) + (b"]" * 500) + b"}\n",
    "big-integer": ("[" + MSG % DIGITS + "]").encode(),
    "big-integer-jsonl": (MSG % DIGITS + "\n").encode(),
    "lone-surrogate": b'[{"messages": [{"role": "user", "content": "a\\ud800b"}]}]',
    "lone-surrogate-key": b'[{"messages": [{"role": "user", "content": "a", "\\udfff": 1}]}]',
    "lone-surrogate-jsonl": b'{"messages": [{"role": "user", "content": "\\udc00"}]}\n',
    "binary": bytes(range(256)) * 16,
    "invalid-utf8": b'[{"messages": [{"role": "user", "content": "\xff\xfe"}]}]',
    "invalid-utf8-jsonl": b'{"messages": [{"role": "user", "content": "ok"}]}\n{"x": "\xc3\x28"}\n',
}
NEEDLE = {"deep": "nested", "big-integer": "100000 digits", "lone-surrogate": "surrogate",
          "binary": "binary file", "invalid-utf8": "UTF-8"}


def _needle(case: str) -> str:
    return next(v for k, v in NEEDLE.items() if case.startswith(k))


def _one_error_line(err: str, path: Path) -> str:
    lines = [x for x in err.splitlines() if x.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), err[-2000:]
    assert "Traceback" not in err and path.name in lines[0]
    return lines[0]


@pytest.mark.parametrize("fmt", IMPORTERS.names())
@pytest.mark.parametrize("case", list(CASES))
def test_data_import_refuses_hostile_files_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                        fmt: str, case: str) -> None:
    src = tmp_path / f"{case}.json"
    src.write_bytes(CASES[case])
    out = tmp_path / "out.jsonl"
    rc = cli("data", "import", fmt, str(src), "-o", str(out))
    cap = capsys.readouterr()
    line = _one_error_line(cap.err, src)
    assert rc == InputFormatError.exit_code, line
    if fmt == "openai-messages" or not case.endswith("jsonl"):  # the others stop at "not JSON" first
        assert _needle(case) in line, line
    assert not out.exists() and sorted(p.name for p in tmp_path.iterdir()) == [src.name]
    assert cli("data", "import", fmt, str(src)) == InputFormatError.exit_code  # to stdout: nothing printed
    assert capsys.readouterr().out == ""


@pytest.mark.parametrize("case", ["big-integer", "deep", "lone-surrogate", "binary"])
def test_memory_add_refuses_hostile_sessions(tmp_path: Path, capsys: pytest.CaptureFixture[str], case: str) -> None:
    ok = '{"user_id": "u", "session_id": "s1", "turns": [{"role": "user", "content": "hi"}]}\n'
    bad = {"big-integer": f'{{"user_id": {DIGITS}, "session_id": "s", "turns": []}}\n',
           "deep": '{"user_id": "u", "session_id": "s", "turns": ' + "[" * 5000 + "]" * 5000 + "}\n",
           "lone-surrogate": '{"user_id": "u", "session_id": "s", "turns": [{"role": "user", "content": "\\ud800"}]}\n',
           "binary": bytes(range(256)).decode("latin-1")}[case]
    src = tmp_path / "in.jsonl"
    src.write_bytes((ok + bad).encode("utf-8", "surrogatepass") if case != "binary"
                    else ok.encode() + bytes(range(256)))
    db = tmp_path / "m.db"
    rc = cli("memory", "add", str(src), "--db", str(db), "--no-embed", "--no-extractive")
    line = _one_error_line(capsys.readouterr().err, src)
    assert rc == InputFormatError.exit_code and "line 2" in line, line
    assert not db.exists()


@pytest.mark.parametrize("suffix", [".json", ".toml"])
@pytest.mark.parametrize("content", [bytes(range(256)) * 4, b"\xff\xfe{}", ("a = " + DIGITS).encode(),
                                     b"[" * DEEP + b"]" * DEEP])
def test_memory_config_that_is_not_text_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str], suffix: str,
                                                    content: bytes) -> None:
    cfg = tmp_path / f"cfg{suffix}"
    cfg.write_bytes(content)
    out = tmp_path / "audit"
    rc = cli("audit", "--memory-config", str(cfg), "--out", str(out), "--model", "scripted", "--embedder", "hashing")
    line = _one_error_line(capsys.readouterr().err, cfg)
    assert rc == InputFormatError.exit_code and "memory config" in line, line
    assert not out.exists()


# --------------------------------------------------------------------------- fuzz
_text = st.one_of(st.text(st.characters(codec=None, exclude_categories=()), max_size=12),  # surrogates included
                  st.sampled_from(["\ud800", "x\udfffy", "hello", ""]))
_scalar = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=True), _text,
                    st.sampled_from(["user", "assistant", "system", "tool", "text", "session_1", "D1:1"]))
_keys = st.one_of(_text, st.sampled_from(
    ["messages", "role", "content", "id", "user_id", "date", "sample_id", "conversation", "speaker_a", "speaker_b",
     "session_1", "session_1_date_time", "speaker", "dia_id", "text", "qa", "question", "answer", "evidence",
     "question_id", "question_type", "haystack_sessions", "haystack_session_ids", "haystack_dates", "session_id",
     "turns", "has_answer", "type", "tool_calls", "blip_caption", "category", "answer_session_ids"]))
_json = st.recursive(_scalar, lambda kids: st.lists(kids, max_size=4) | st.dictionaries(_keys, kids, max_size=5),
                     max_leaves=25)
_role = st.sampled_from(["user", "assistant", "system", "tool", "robot"]) | _scalar
_turn = st.fixed_dictionaries({"role": _role, "content": _text | _json})
_shaped = st.one_of(  # the importers' own shapes with fuzzed leaves: the fuzz gets past their first checks
    st.fixed_dictionaries({"messages": st.lists(_turn, max_size=3)}, optional={"id": _scalar, "user_id": _scalar}),
    st.fixed_dictionaries({"user_id": _text, "session_id": _text, "turns": st.lists(_turn, max_size=3)},
                          optional={"date": _scalar, "qa": _json}),
    st.fixed_dictionaries({"sample_id": _text, "qa": st.lists(_json, max_size=2), "conversation": st.fixed_dictionaries(
        {"speaker_a": _text, "speaker_b": _text, "session_1": st.lists(st.fixed_dictionaries(
            {"speaker": _text, "dia_id": _text, "text": _text}), max_size=2)})}),
    st.fixed_dictionaries({"question_id": _text, "question": _text, "answer": _scalar,
                           "haystack_sessions": st.lists(st.lists(_turn, max_size=2), max_size=2)},
                          optional={"haystack_session_ids": _json, "haystack_dates": _json}),
)
_FUZZ = settings(max_examples=60, derandomize=True, deadline=None, database=None,
                 suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])


def _encode(value: Any, jsonl: bool) -> bytes:
    if jsonl and isinstance(value, list):
        return "".join(json.dumps(v) + "\n" for v in value).encode()
    return json.dumps(value).encode()  # ensure_ascii: a lone surrogate is written as \\udXXX


def _outcome(reader: str, data: bytes) -> None:
    """Read ``data`` like the CLI does (and write what was read): success or a TracelessError."""
    with tempfile.TemporaryDirectory() as d:
        src = Path(d) / "in.json"
        src.write_bytes(data)
        try:
            sessions = read_sessions(src) if reader == "sessions" else import_file(reader, src).sessions
            write_sessions_atomic(sessions, Path(d) / "out.jsonl")
        except TracelessError as e:
            assert "\n" not in str(e) and str(src) in str(e), str(e)


READERS = [*IMPORTERS.names(), "sessions"]


@pytest.mark.parametrize("reader", READERS)
@_FUZZ
@given(data=st.binary(max_size=200))
def test_fuzz_bytes_give_success_or_a_traceless_error(reader: str, data: bytes) -> None:
    _outcome(reader, data)


@pytest.mark.parametrize("reader", READERS)
@_FUZZ
@given(value=_json | _shaped, jsonl=st.booleans(), wrap=st.booleans())
def test_fuzz_json_values_give_success_or_a_traceless_error(reader: str, value: Any, jsonl: bool, wrap: bool) -> None:
    _outcome(reader, _encode([value] if wrap else value, jsonl))
