"""The generic JSON Lines session format (one session per line) and its reader.

Each line::

    {"user_id": "u1", "session_id": "s1", "date": "2023/05/20 (Sat) 02:21",
     "turns": [{"role": "user", "content": "...", "has_answer": false}, ...],
     "qa": [{"question": "...", "answer": "..."}]}   # qa optional

Reading is all-or-nothing: a bad line raises ``InputFormatError`` naming the line and
field, before anything is written.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from traceless._jsonin import loads
from traceless.errors import InputFormatError
from traceless.memory._types import Session

__all__ = ["read_sessions", "parse_session_lines", "write_sessions_jsonl"]


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    keys = [k for k, _ in pairs]
    dup = next((k for k in keys if keys.count(k) > 1), None)
    if dup is not None:
        raise _DuplicateKey(dup)
    return dict(pairs)


class _DuplicateKey(ValueError):
    pass


def _load_line(line: str, source: str, n: int) -> Any:
    try:
        return loads(line, f"{source} line {n}", "each line must be one JSON object describing one session",
                     object_pairs_hook=_no_duplicate_keys)
    except _DuplicateKey as e:
        raise InputFormatError(
            f"{source} line {n}: key {e.args[0]!r} appears twice in one object; keep one of them"
        ) from None


def parse_session_lines(lines: Iterable[str], source: str = "<input>") -> list[Session]:
    out: list[Session] = []
    seen: set[tuple[str, str]] = set()
    for n, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        obj = _load_line(line, source, n)
        if not isinstance(obj, dict):
            raise InputFormatError(f"{source} line {n}: expected a JSON object, got {type(obj).__name__}")
        try:
            s = Session.model_validate(obj)
        except ValidationError as e:
            err = e.errors()[0]
            loc = ".".join(str(x) for x in err["loc"])
            raise InputFormatError(
                f"{source} line {n}: field {loc!r}: {err['msg']}. "
                "See `traceless memory add --help` for the session format."
            ) from None
        key = (s.user_id, s.session_id)
        if key in seen:
            raise InputFormatError(f"{source} line {n}: duplicate session {s.session_id!r} for user {s.user_id!r}")
        seen.add(key)
        out.append(s)
    if not out:
        raise InputFormatError(f"{source}: no sessions found (empty input)")
    return out


def _decoded_lines(raw: Iterable[bytes], source: str) -> Iterator[str]:
    for n, b in enumerate(raw, start=1):
        try:
            yield b.decode("utf-8-sig" if n == 1 else "utf-8")
        except UnicodeDecodeError as e:
            raise InputFormatError(
                f"{source} line {n}: not valid UTF-8 (bad byte at column {e.start + 1}); "
                "save the file as UTF-8"
            ) from None


def read_sessions(path: str | Path) -> list[Session]:
    p = Path(path)
    if not p.exists():
        raise InputFormatError(f"{p} does not exist")
    if not p.is_file():
        raise InputFormatError(f"{p} is not a file; give the path of a .jsonl file with one session per line")
    with p.open("rb") as f:
        return parse_session_lines(_decoded_lines(f, str(p)), str(p))


def write_sessions_jsonl(sessions: Iterable[Session], path: str | Path) -> None:
    with Path(path).open("w", encoding="utf-8") as f:
        for s in sessions:
            f.write(s.model_dump_json() + "\n")
