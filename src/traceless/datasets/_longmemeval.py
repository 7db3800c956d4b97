"""LongMemEval (Wu et al., 2025) in its upstream JSON format.

The file is one JSON array; each record is one instance::

    {"question_id": "7e974930", "question_type": "knowledge-update",
     "question": "...", "answer": "$420", "question_date": "2023/10/02 (Mon) 04:40",
     "haystack_session_ids": ["s1", "s2"], "haystack_dates": ["2023/04/11 (Tue) 07:47", ...],
     "haystack_sessions": [[{"role": "user", "content": "...", "has_answer": false}, ...], ...],
     "answer_session_ids": ["s2"]}

The oracle split (``longmemeval_oracle.json``, 500 instances) and any subset of it (the
99-instance file in ``../shared/data``) are read the same way. Get it from
https://github.com/xiaowu0162/LongMemEval (file ``longmemeval_oracle.json``).

Conversion to traceless sessions: ``user_id`` = question_id, one ``Session`` per haystack
session (``session_id`` from haystack_session_ids, ``date`` from haystack_dates, turns with
their ``has_answer`` flags; sessions without turns are dropped), and the question–answer
pair as a ``QA`` (non-string answers, e.g. integers, become strings).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from traceless._jsonin import decode_utf8, loads
from traceless.errors import InputFormatError
from traceless.memory import QA, Session, Turn

__all__ = [
    "Instance",
    "LONGMEMEVAL_URL",
    "LONGMEMEVAL_FIELDS",
    "parse_longmemeval",
    "read_longmemeval",
    "longmemeval_instance",
]

LONGMEMEVAL_URL = "https://github.com/xiaowu0162/LongMemEval"
LONGMEMEVAL_FIELDS = ("question_id", "question", "answer", "haystack_sessions", "haystack_session_ids")
"""Required fields of an upstream record (``haystack_dates``, ``question_type``,
``question_date`` and ``answer_session_ids`` are optional)."""


class Instance(BaseModel):
    """One audit instance: a user's sessions plus the questions that test recall."""

    id: str
    """Instance id (LongMemEval question_id, or the user id of a JSONL import)."""
    owner: str
    """Owner (user id) of every session."""
    sessions: list[Session]
    """The user's sessions in order."""
    questions: list[QA] = Field(default_factory=list)
    """Questions needing remembered context (LongMemEval: exactly one)."""
    question_date: str | None = None
    """When the question is asked (free text), if known."""
    evidence_sessions: list[str] = Field(default_factory=list)
    """Sessions holding the answer evidence (LongMemEval answer_session_ids)."""
    source: str = ""
    """Which corpus/format it came from (``longmemeval`` or ``jsonl``)."""


def _fail(source: str, i: int, rec: Any, field: str, msg: str) -> InputFormatError:
    qid = rec.get("question_id") if isinstance(rec, dict) else None
    which = f"record {i}" + (f" (question_id {qid!r})" if isinstance(qid, str) else "")
    return InputFormatError(
        f"{source} {which}: field {field!r}: {msg}. Expected LongMemEval's upstream format (a JSON array of "
        f"records with {', '.join(LONGMEMEVAL_FIELDS)}; see {LONGMEMEVAL_URL}) or the generic JSON Lines "
        "session format (one session per line; docs/frontier.md)."
    )


def longmemeval_instance(rec: Any, i: int = 0, source: str = "<input>") -> Instance:
    """Validate one upstream record and convert it (``InputFormatError`` names the field)."""
    if not isinstance(rec, dict):
        raise _fail(source, i, rec, "(record)", f"expected a JSON object, got {type(rec).__name__}")
    for f in LONGMEMEVAL_FIELDS:
        if f not in rec:
            raise _fail(source, i, rec, f, "missing")
    qid, question, answer = rec["question_id"], rec["question"], rec["answer"]
    if not isinstance(qid, str) or not qid:
        raise _fail(source, i, rec, "question_id", "must be a non-empty string")
    if not isinstance(question, str):
        raise _fail(source, i, rec, "question", "must be a string")
    if isinstance(answer, bool) or not isinstance(answer, str | int | float):
        raise _fail(source, i, rec, "answer", f"must be a string or number, got {type(answer).__name__}")
    hs, ids = rec["haystack_sessions"], rec["haystack_session_ids"]
    if not isinstance(hs, list):
        raise _fail(source, i, rec, "haystack_sessions", "must be a list of sessions (lists of turns)")
    if not isinstance(ids, list) or len(ids) != len(hs) or not all(isinstance(x, str) for x in ids):
        raise _fail(source, i, rec, "haystack_session_ids",
                    f"must be a list of {len(hs)} strings (one per haystack session)")
    dates = rec.get("haystack_dates")
    if dates is not None and (not isinstance(dates, list) or len(dates) != len(hs)):
        raise _fail(source, i, rec, "haystack_dates", f"must be a list of {len(hs)} dates (one per session)")
    sessions: list[Session] = []
    for j, (sid, turns) in enumerate(zip(ids, hs, strict=True)):
        if not isinstance(turns, list):
            raise _fail(source, i, rec, f"haystack_sessions[{j}]", "must be a list of turns")
        out: list[Turn] = []
        for t, turn in enumerate(turns):
            where = f"haystack_sessions[{j}][{t}]"
            if not isinstance(turn, dict):
                raise _fail(source, i, rec, where, "must be an object with role and content")
            role, content = turn.get("role"), turn.get("content")
            if role not in ("user", "assistant", "system", "tool"):
                raise _fail(source, i, rec, f"{where}.role", f"must be user or assistant, got {role!r}")
            if not isinstance(content, str):
                raise _fail(source, i, rec, f"{where}.content", "must be a string")
            out.append(Turn(role=role, content=content, has_answer=bool(turn.get("has_answer", False))))
        if out:
            date = dates[j] if dates is not None else None
            sessions.append(Session(user_id=qid, session_id=sid, date=None if date is None else str(date), turns=out))
    if not sessions:
        raise _fail(source, i, rec, "haystack_sessions", "has no turns at all")
    qa = QA(question=question, answer=str(answer), question_id=qid,
            question_type=rec.get("question_type") if isinstance(rec.get("question_type"), str) else None)
    ev = rec.get("answer_session_ids") or []
    return Instance(
        id=qid, owner=qid, sessions=sessions, questions=[qa],
        question_date=str(rec["question_date"]) if rec.get("question_date") is not None else None,
        evidence_sessions=[str(x) for x in ev] if isinstance(ev, list) else [], source="longmemeval",
    )


def parse_longmemeval(data: Any, source: str = "<input>") -> list[Instance]:
    """Validate and convert a parsed upstream JSON array (all or nothing)."""
    if not isinstance(data, list):
        raise InputFormatError(
            f"{source}: expected a JSON array of LongMemEval records, got a JSON {type(data).__name__}. "
            f"Get longmemeval_oracle.json from {LONGMEMEVAL_URL}, or use the JSON Lines session format."
        )
    if not data:
        raise InputFormatError(f"{source}: the JSON array is empty (no instances)")
    out = [longmemeval_instance(rec, i, source) for i, rec in enumerate(data)]
    seen: set[str] = set()
    for i, inst in enumerate(out):
        if inst.id in seen:
            raise InputFormatError(f"{source} record {i}: duplicate question_id {inst.id!r}")
        seen.add(inst.id)
    return out


def read_longmemeval(path: str | Path) -> list[Instance]:
    """Read an upstream LongMemEval file (oracle split, full or a subset)."""
    p = Path(path)
    if not p.is_file():
        raise InputFormatError(f"{p} does not exist; get longmemeval_oracle.json from {LONGMEMEVAL_URL}")
    data = loads(decode_utf8(p.read_bytes(), str(p)), str(p), f"get longmemeval_oracle.json from {LONGMEMEVAL_URL}")
    return parse_longmemeval(data, str(p))
