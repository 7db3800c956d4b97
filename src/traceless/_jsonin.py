"""JSON that users hand to traceless (sessions, datasets, memory-system configs), read so that
every way it can be unreadable is one ``InputFormatError`` that names the file, where in it,
and what to do: bytes that are not UTF-8 (a binary file), text that is not JSON, nesting
deeper than ``MAX_DEPTH``, an integer longer than Python converts (4300 digits), a lone
UTF-16 surrogate (``"\\ud800"``: valid JSON, not text, and not writable as UTF-8)."""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable
from typing import Any

from traceless.errors import InputFormatError

__all__ = ["MAX_DEPTH", "check_value", "decode_utf8", "has_surrogate", "loads"]

MAX_DEPTH = 64
"""Deepest nesting of arrays/objects accepted (a session is 4 levels deep; LoCoMo 5)."""


def _max_digits() -> int:
    get = getattr(sys, "get_int_max_str_digits", None)
    return int(get()) if get is not None and get() else 4300


def _line_col(text: str, pos: int) -> str:
    col = f"column {pos - (text.rfind(chr(10), 0, pos) + 1) + 1}"
    return f"line {text.count(chr(10), 0, pos) + 1}, {col}" if "\n" in text.rstrip("\r\n") else col


def decode_utf8(data: bytes, source: str) -> str:
    """``data`` as text (a leading BOM dropped), or an error naming the first bad byte."""
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        col = e.start - (data.rfind(b"\n", 0, e.start) + 1) + 1
        kind = "a binary file" if b"\0" in data[:8192] else "not valid UTF-8"
        raise InputFormatError(f"{source} line {line}, column {col}: {kind} (byte 0x{data[e.start]:02x}); "
                               "give a UTF-8 text file (save it as UTF-8)") from None


def loads(text: str, source: str, fix: str,
          object_pairs_hook: Callable[[list[tuple[str, Any]]], Any] | None = None) -> Any:
    """Parse ``text`` (from ``source``, e.g. ``FILE`` or ``FILE line 3``); ``fix`` says what the
    input should be. The value is checked with ``check_value``."""
    try:
        obj = json.loads(text, object_pairs_hook=object_pairs_hook)
    except json.JSONDecodeError as e:
        raise InputFormatError(f"{source}: not valid JSON ({e.msg} at {_line_col(text, e.pos)}); {fix}") from None
    except RecursionError:
        raise InputFormatError(f"{source}: JSON nested too deeply (more than {MAX_DEPTH} levels); {fix}") from None
    except ValueError as e:  # an integer longer than int() converts
        if "digits" not in str(e):
            raise  # the caller's object_pairs_hook refused something: the caller names it
        limit = _max_digits()
        m = re.search(r"\d{" + str(limit + 1) + ",}", text)
        where = f" at {_line_col(text, m.start())}" if m else ""
        n = len(m.group()) if m else limit + 1
        raise InputFormatError(f"{source}: an integer of {n} digits{where} (at most {limit} are read); write it as "
                               "a string or remove it") from None
    check_value(obj, source)
    return obj


def _record(path: list[str | int]) -> str:
    """`` record 3, field 'messages[0].content'`` for a path into a top-level array."""
    head, rest = (f" record {path[0]}", path[1:]) if path and isinstance(path[0], int) else ("", path)
    name = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in rest).lstrip(".")
    return head + ("," if head and name else "") + (f" field {name!r}" if name else "")


def check_value(obj: Any, source: str) -> None:
    """No nesting deeper than ``MAX_DEPTH``, no lone surrogate in a string or key (iterative:
    a deep value cannot exhaust the stack here)."""
    stack: list[tuple[Any, list[str | int]]] = [(obj, [])]
    while stack:
        v, path = stack.pop()
        if isinstance(v, str):
            if not v.isascii() and has_surrogate(v):
                raise InputFormatError(f"{source}{_record(path)}: holds a lone UTF-16 surrogate (such as \\ud800), "
                                       "which is not text; remove it or fix the program that wrote the file")
            continue
        if not isinstance(v, dict | list):
            continue
        if len(path) >= MAX_DEPTH:
            raise InputFormatError(f"{source}{_record(path[:3])}: nested more than {MAX_DEPTH} levels deep; "
                                   "no traceless input is nested like that: check the file")
        items = v.items() if isinstance(v, dict) else enumerate(v)
        for k, x in items:
            if isinstance(k, str) and not k.isascii() and has_surrogate(k):
                raise InputFormatError(f"{source}{_record(path)}: a key holds a lone UTF-16 surrogate (such as "
                                       "\\ud800), which is not text; remove it or fix the program that wrote the file")
            stack.append((x, [*path, k]))


def has_surrogate(s: str) -> bool:
    """Whether ``s`` holds a lone surrogate (a ``str`` that UTF-8 cannot encode)."""
    try:
        s.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False
