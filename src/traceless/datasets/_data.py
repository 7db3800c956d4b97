"""Audit datasets: one loader for LongMemEval's upstream JSON and the generic JSON Lines
session format, so users can audit their own conversations.

``load_instances(path)`` detects the format:

* a JSON array → LongMemEval records (``_longmemeval``);
* one JSON object per line → generic sessions (``traceless.memory.read_sessions``):
  ``{"user_id", "session_id", "date"?, "turns": [{"role", "content", "has_answer"?}],
  "qa"?: [{"question", "answer"}]}``. Sessions are grouped by ``user_id`` (file order); each
  user becomes one instance whose questions are the ``qa`` pairs of its sessions.

Anything else raises ``InputFormatError`` naming the first offending record and field.

``resolve_longmemeval(data)`` finds the default data file: ``data`` (``--data PATH``), else
``../shared/data/longmemeval_oracle_subset99.json`` next to the working directory or the
source checkout (``$TRACELESS_LONGMEMEVAL`` is read at the edge, which passes it as ``data``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from pathlib import Path

from traceless.datasets._longmemeval import LONGMEMEVAL_URL, Instance, parse_longmemeval
from traceless.errors import InputFormatError
from traceless.memory import QA, Session, parse_session_lines, write_sessions_jsonl

__all__ = [
    "DEFAULT_DATA_NAME",
    "DATA_ENV",
    "load_instances",
    "sessions_to_instances",
    "instances_to_sessions",
    "export_jsonl",
    "resolve_longmemeval",
]

DEFAULT_DATA_NAME = "longmemeval_oracle_subset99.json"
DATA_ENV = "TRACELESS_LONGMEMEVAL"


def sessions_to_instances(sessions: Sequence[Session]) -> list[Instance]:
    """Group generic sessions by user (first-seen order) into instances."""
    by_user: dict[str, list[Session]] = {}
    for s in sessions:
        by_user.setdefault(s.user_id, []).append(s)
    out = []
    for user, ss in by_user.items():
        qs: list[QA] = [q for s in ss for q in s.qa]
        clean = [s.model_copy(update={"qa": []}) for s in ss]
        evidence = [s.session_id for s in ss if any(t.has_answer for t in s.turns)]
        out.append(Instance(id=user, owner=user, sessions=clean, questions=qs, evidence_sessions=evidence,
                            source="jsonl"))
    return out


def instances_to_sessions(instances: Iterable[Instance]) -> list[Session]:
    """The inverse: sessions in the generic format, questions attached to each user's last session."""
    out: list[Session] = []
    for inst in instances:
        for j, s in enumerate(inst.sessions):
            last = j == len(inst.sessions) - 1
            out.append(s.model_copy(update={"qa": list(inst.questions) if last else []}))
    return out


def export_jsonl(instances: Iterable[Instance], path: str | Path) -> None:
    """Write instances in the generic JSON Lines session format."""
    write_sessions_jsonl(instances_to_sessions(instances), path)


def load_instances(path: str | Path) -> list[Instance]:
    """LongMemEval JSON or generic JSON Lines sessions → instances (format detected)."""
    p = Path(path)
    if not p.is_file():
        raise InputFormatError(f"{p} does not exist")
    text = p.read_text(encoding="utf-8")
    head = text.lstrip()[:1]
    if head == "[":
        try:
            data = json.loads(text)
        except json.JSONDecodeError as e:
            raise InputFormatError(f"{p}: starts like a JSON array but is not valid JSON "
                                   f"({e.msg} at line {e.lineno}, column {e.colno})") from None
        return parse_longmemeval(data, str(p))
    if head == "{":
        lines = text.splitlines()
        first = next(ln for ln in lines if ln.strip())
        try:
            obj = json.loads(first)
        except json.JSONDecodeError:
            obj = None
        if isinstance(obj, dict) and not ({"turns", "user_id", "session_id"} & set(obj)):
            raise InputFormatError(
                f"{p} line 1 (record 0): field 'turns': missing; the object (keys {sorted(obj)[:8]}) is neither a "
                f"JSON Lines session (user_id, session_id, turns) nor LongMemEval (a JSON array of records; "
                f"{LONGMEMEVAL_URL})"
            )
        if not isinstance(obj, dict):
            try:
                whole = json.loads(text)
            except json.JSONDecodeError:
                whole = None
            keys = sorted(whole)[:8] if isinstance(whole, dict) else []
            raise InputFormatError(
                f"{p} record 0: a single JSON object (keys {keys}) is neither LongMemEval (a JSON array of "
                f"records; {LONGMEMEVAL_URL}) nor JSON Lines sessions (one session object per line with "
                "user_id, session_id, turns)"
            )
        return sessions_to_instances(parse_session_lines(lines, str(p)))
    raise InputFormatError(
        f"{p}: neither a LongMemEval JSON array nor JSON Lines sessions (the file starts with "
        f"{text.lstrip()[:20]!r}). See docs/frontier.md for both formats."
    )


def _candidates() -> list[Path]:
    here = Path(__file__).resolve()
    bases = [Path.cwd(), *here.parents[:5]]
    seen: list[Path] = []
    for b in bases:
        c = (b / ".." / "shared" / "data" / DEFAULT_DATA_NAME).resolve()
        if c not in seen:
            seen.append(c)
    return seen


def resolve_longmemeval(data: str | Path | None = None) -> Path:
    """The data file to use (``--data``, else ``../shared/data``; ``$TRACELESS_LONGMEMEVAL`` is
    read at the edge, which passes it as ``data``)."""
    if data is not None:
        p = Path(data).expanduser()
        if not p.is_file():
            raise InputFormatError(f"--data {p}: no such file")
        return p
    for c in _candidates():
        if c.is_file():
            return c
    raise InputFormatError(
        f"no LongMemEval data found. Download longmemeval_oracle.json from {LONGMEMEVAL_URL} "
        f"(see its README for the data link) and pass --data PATH (the CLI: or set ${DATA_ENV}); "
        f"looked for {DEFAULT_DATA_NAME} in ../shared/data"
    )
