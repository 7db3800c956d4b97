"""Importers: conversation datasets people already have → the generic session format
(JSON Lines, one ``Session`` per line; README "Sessions format").

* ``locomo``: LoCoMo's JSON (Maharana et al., 2024). One user per sample (``user_id`` =
  ``sample_id``), one session per ``session_N`` (date from ``session_N_date_time``). LoCoMo
  is a dialogue between two people: ``speaker_a`` becomes role ``user``, ``speaker_b``
  role ``assistant``, and each turn keeps its speaker's name (``"Caroline: …"``) because
  the questions name them; a shared image is kept as its caption. A turn is
  ``has_answer`` when a QA pair cites its ``dia_id`` as evidence. QA pairs are attached to
  the sample's last session; adversarial questions (category 5) have no answer and are
  skipped (counted in the notes).
* ``longmemeval``: LongMemEval's upstream JSON (one user per instance, its question
  attached to the last session).
* ``openai-messages``: chat logs as OpenAI-style ``messages`` lists: a JSON array or JSON
  Lines of ``{"messages": [{"role", "content"}], "id"?, "user_id"?, "date"?}``, or a bare
  array of messages (one conversation). Each conversation is one session.

Every importer validates the whole file before anything is written; the first offending
record is named with its field.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from traceless._jsonin import decode_utf8, loads
from traceless.datasets._data import instances_to_sessions
from traceless.datasets._longmemeval import parse_longmemeval
from traceless.errors import InputFormatError
from traceless.memory import QA, Session, Turn
from traceless.registry import Registry

__all__ = ["IMPORTERS", "Imported", "Importer", "import_file", "write_sessions_atomic"]


@dataclass
class Imported:
    """What an importer produced."""

    sessions: list[Session]
    """Sessions in the generic format."""
    notes: list[str] = field(default_factory=list)
    """Things the user should know (skipped records and why)."""


Importer = Callable[[Path, str], Imported]
"""``(path, default_user) → Imported``; raises ``InputFormatError`` naming the first bad record."""

IMPORTERS: Registry[Importer] = Registry("import format", hint="see `traceless data import --help`")


def _read_text(path: Path) -> str:
    if not path.is_file():
        raise InputFormatError(f"{path}: no such file")
    try:
        data = path.read_bytes()
    except OSError as e:
        raise InputFormatError(f"{path}: cannot be read ({e.strerror}); check the path and its permissions") from None
    return decode_utf8(data, str(path))


def _read_json(path: Path, text: str | None = None) -> Any:
    return loads(_read_text(path) if text is None else text, str(path),
                 "give the dataset's JSON file (see `traceless data import --help`)")


def _session(source: str, where: str, **kw: Any) -> Session:
    try:
        return Session(**kw)
    except ValidationError as e:
        err = e.errors()[0]
        loc = ".".join(str(x) for x in err["loc"])
        raise InputFormatError(f"{source} {where}: field {loc!r}: {err['msg']}") from None


# ---------------------------------------------------------------- LoCoMo

def _locomo_fail(source: str, i: int, rec: Any, fld: str, msg: str) -> InputFormatError:
    sid = rec.get("sample_id") if isinstance(rec, dict) else None
    which = f"record {i}" + (f" (sample_id {sid!r})" if isinstance(sid, str) else "")
    return InputFormatError(
        f"{source} {which}: field {fld!r}: {msg}. Expected LoCoMo's JSON (an array of samples with "
        "sample_id, conversation {speaker_a, speaker_b, session_N, session_N_date_time}, qa)"
    )


def _locomo_turn(source: str, i: int, rec: Any, fld: str, t: Any, a: str, b: str) -> tuple[str, str, str]:
    if not isinstance(t, dict):
        raise _locomo_fail(source, i, rec, fld, "expected an object {speaker, dia_id, text}")
    for k in ("speaker", "dia_id", "text"):
        if not isinstance(t.get(k), str):
            raise _locomo_fail(source, i, rec, f"{fld}.{k}", "missing or not a string")
    if t["speaker"] not in (a, b):
        raise _locomo_fail(source, i, rec, f"{fld}.speaker", f"{t['speaker']!r} is neither speaker_a nor speaker_b")
    text = t["text"]
    if isinstance(t.get("blip_caption"), str):
        text = f"{text} [shares a photo: {t['blip_caption']}]".strip()
    return ("user" if t["speaker"] == a else "assistant", f"{t['speaker']}: {text}", t["dia_id"])


def _locomo_qa(source: str, i: int, rec: Any) -> tuple[list[QA], set[str], int]:
    qa = rec.get("qa")
    if not isinstance(qa, list):
        raise _locomo_fail(source, i, rec, "qa", "missing or not a list")
    out: list[QA] = []
    evidence: set[str] = set()
    skipped = 0
    for j, q in enumerate(qa):
        if not isinstance(q, dict) or not isinstance(q.get("question"), str):
            raise _locomo_fail(source, i, rec, f"qa[{j}].question", "missing or not a string")
        ans = q.get("answer")
        if ans is None:  # adversarial (category 5): unanswerable by design
            skipped += 1
            continue
        if not isinstance(ans, str | int | float) or isinstance(ans, bool):
            raise _locomo_fail(source, i, rec, f"qa[{j}].answer", "not a string or number")
        ev = q.get("evidence", [])
        if not isinstance(ev, list):
            raise _locomo_fail(source, i, rec, f"qa[{j}].evidence", "not a list of dia_ids")
        evidence.update(str(e) for e in ev)
        out.append(QA(question=q["question"], answer=str(ans), question_id=f"{rec['sample_id']}/qa{j}",
                      question_type=f"category-{q.get('category')}"))
    return out, evidence, skipped


def _locomo_sample(source: str, i: int, rec: Any) -> tuple[list[Session], int]:
    if not isinstance(rec, dict):
        raise _locomo_fail(source, i, rec, "(record)", "expected an object")
    if not isinstance(rec.get("sample_id"), str) or not rec["sample_id"]:
        raise _locomo_fail(source, i, rec, "sample_id", "missing or not a string")
    conv = rec.get("conversation")
    if not isinstance(conv, dict):
        raise _locomo_fail(source, i, rec, "conversation", "missing or not an object")
    a, b = conv.get("speaker_a"), conv.get("speaker_b")
    if not isinstance(a, str) or not isinstance(b, str):
        raise _locomo_fail(source, i, rec, "conversation.speaker_a", "speaker_a and speaker_b must be strings")
    qa, evidence, skipped = _locomo_qa(source, i, rec)
    keys = sorted((k for k in conv if k.startswith("session_") and k.split("_")[1].isdigit()
                   and k.count("_") == 1), key=lambda k: int(k.split("_")[1]))
    if not keys:
        raise _locomo_fail(source, i, rec, "conversation.session_1", "no sessions")
    sessions: list[Session] = []
    for k in keys:
        if not isinstance(conv[k], list):
            raise _locomo_fail(source, i, rec, f"conversation.{k}", "not a list of turns")
        turns = [_locomo_turn(source, i, rec, f"conversation.{k}[{n}]", t, a, b) for n, t in enumerate(conv[k])]
        if not turns:
            continue  # LoCoMo has a few empty sessions
        date = conv.get(f"{k}_date_time")
        sessions.append(_session(source, f"record {i} ({rec['sample_id']}, {k})", user_id=rec["sample_id"],
                                 session_id=k, date=date if isinstance(date, str) else None,
                                 turns=[Turn(role=r, content=c, has_answer=d in evidence) for r, c, d in turns]))
    sessions[-1] = sessions[-1].model_copy(update={"qa": qa})
    return sessions, skipped


@IMPORTERS.register("locomo", help="LoCoMo JSON (array of samples with conversation and qa)")
def import_locomo(path: Path, default_user: str) -> Imported:
    """LoCoMo's JSON → sessions (``default_user`` is unused: each sample is its own user)."""
    data = _read_json(path)
    if not isinstance(data, list) or not data:
        raise InputFormatError(f"{path}: expected LoCoMo's JSON array of samples, got "
                               f"{'an empty array' if data == [] else 'a JSON ' + type(data).__name__}")
    out: list[Session] = []
    skipped = 0
    for i, rec in enumerate(data):
        ss, sk = _locomo_sample(str(path), i, rec)
        out.extend(ss)
        skipped += sk
    notes = [f"skipped {skipped} adversarial question(s) without an answer (LoCoMo category 5)"] if skipped else []
    return Imported(out, notes)


# ---------------------------------------------------------------- LongMemEval

@IMPORTERS.register("longmemeval", help="LongMemEval upstream JSON (array of instances)")
def import_longmemeval(path: Path, default_user: str) -> Imported:
    """LongMemEval's upstream JSON → sessions (one user per instance)."""
    return Imported(instances_to_sessions(parse_longmemeval(_read_json(path), str(path))))


# ---------------------------------------------------------------- OpenAI messages

_ROLE = {"user": "user", "assistant": "assistant", "system": "system", "developer": "system",
         "tool": "tool", "function": "tool"}


def _content(c: Any) -> str | None:
    if isinstance(c, str):
        return c
    if isinstance(c, list) and all(isinstance(p, dict) for p in c):
        parts = [p["text"] for p in c if p.get("type") in ("text", "input_text", "output_text")
                 and isinstance(p.get("text"), str)]
        return "\n".join(parts) if parts else None
    return None


def _openai_records(path: Path) -> list[Any]:
    text = _read_text(path)
    if text.lstrip().startswith("["):
        data = _read_json(path, text)
        if data and all(isinstance(m, dict) and "role" in m for m in data):
            return [{"messages": data}]  # a bare messages list: one conversation
        return list(data)
    recs = []
    for n, line in enumerate(text.splitlines(), 1):
        if line.strip():
            recs.append(loads(line, f"{path} line {n}", 'expected one {"messages": [...]} object per line'))
    return recs


def _openai_session(source: str, i: int, rec: Any, default_user: str) -> Session | None:
    def fail(fld: str, msg: str) -> InputFormatError:
        return InputFormatError(f"{source} record {i}: field {fld!r}: {msg}. Expected "
                                '{"messages": [{"role": "user", "content": "..."}, ...]} per conversation')

    if not isinstance(rec, dict) or not isinstance(rec.get("messages"), list):
        raise fail("messages", "missing or not a list")
    turns: list[Turn] = []
    for j, m in enumerate(rec["messages"]):
        if not isinstance(m, dict) or m.get("role") not in _ROLE:
            raise fail(f"messages[{j}].role", f"expected one of {', '.join(_ROLE)}")
        content = _content(m.get("content"))
        if content is None:
            if m.get("content") is None and (m.get("tool_calls") or m.get("function_call")):
                continue  # a tool call without text: nothing to remember
            raise fail(f"messages[{j}].content", "missing, or neither a string nor a list of text parts")
        turns.append(Turn(role=_ROLE[m["role"]], content=content))
    if not turns:
        return None
    sid = rec.get("session_id", rec.get("id", f"conversation-{i}"))
    user = rec.get("user_id", default_user)
    return _session(source, f"record {i}", user_id=user, session_id=str(sid),
                    date=rec.get("date") if isinstance(rec.get("date"), str) else None, turns=turns)


@IMPORTERS.register("openai-messages", help="OpenAI-style {\"messages\": [...]} conversations (JSON or JSON Lines)")
def import_openai_messages(path: Path, default_user: str) -> Imported:
    """OpenAI chat ``messages`` conversations → one session each (owner ``default_user``
    unless a record has ``user_id``)."""
    recs = _openai_records(path)
    if not recs:
        raise InputFormatError(f"{path}: no conversations")
    out: list[Session] = []
    empty = 0
    for i, rec in enumerate(recs):
        s = _openai_session(str(path), i, rec, default_user)
        if s is None:
            empty += 1
        else:
            out.append(s)
    seen: set[tuple[str, str]] = set()
    for s in out:
        if (s.user_id, s.session_id) in seen:
            raise InputFormatError(f"{path}: session id {s.session_id!r} of user {s.user_id!r} appears twice; "
                                   "give each conversation a unique \"id\"")
        seen.add((s.user_id, s.session_id))
    return Imported(out, [f"skipped {empty} conversation(s) without text"] if empty else [])


# ---------------------------------------------------------------- entry points

def import_file(fmt: str, path: str | Path, *, default_user: str = "user") -> Imported:
    """Parse ``path`` in format ``fmt`` (all or nothing)."""
    importer = IMPORTERS.get(fmt)
    p = Path(path)
    if p.is_dir():
        raise InputFormatError(f"{p} is a directory; pass the {fmt} file")
    res = importer(p, default_user)
    if not res.sessions:
        raise InputFormatError(f"{p}: no sessions with turns found")
    return res


def write_sessions_atomic(sessions: list[Session], out: str | Path) -> None:
    """Write sessions as JSON Lines; the file appears complete or not at all."""
    target = Path(out)
    if target.is_dir():
        raise InputFormatError(f"-o {target} is a directory; pass a file name such as sessions.jsonl")
    if not target.parent.is_dir():
        raise InputFormatError(f"-o {target}: directory {target.parent} does not exist")
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            for s in sessions:
                f.write(s.model_dump_json(exclude_defaults=True) + "\n")
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
