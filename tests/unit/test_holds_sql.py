"""``holds_sql`` selects the same rows by ``instr`` calls and by its registered function (the
two paths it chooses between by their count, ``INSTR_CALLS_MAX``), and both select exactly
the rows a byte search in Python finds: texts, BLOBs with NULs, numbers (as their text),
NULLs, forms with and without NUL bytes, a form spanning two columns (found in neither)."""

from __future__ import annotations

import random
import sqlite3

import pytest

from traceless.systems import _sqlite_live
from traceless.systems.sqlite import holds_sql

COLS = ["a", "b", "c"]


def _value(rng: random.Random, alphabet: bytes) -> object:
    kind = rng.randrange(5)
    raw = bytes(rng.choice(alphabet) for _ in range(rng.randrange(0, 12)))
    if kind == 0:
        return None
    if kind == 1:
        return rng.choice([7, -12, 3.5, 10**6])
    if kind == 2:
        return raw  # a BLOB, NULs included
    return raw.replace(b"\0", b"").decode("latin-1")  # a TEXT (its UTF-8 bytes are searched)


def _bytes(v: object) -> bytes:
    if v is None:
        return b""
    if isinstance(v, bytes):
        return v
    if isinstance(v, float):
        return repr(v).encode()
    return str(v).encode("utf-8")


@pytest.mark.parametrize("seed", range(6))
def test_instr_and_the_function_select_the_rows_python_finds(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(seed)
    alphabet = b"ab\0-7.5"
    con = sqlite3.connect(":memory:")
    con.execute("CREATE TABLE t (a, b, c)")
    rows = [tuple(_value(rng, alphabet) for _ in COLS) for _ in range(400)]
    con.executemany("INSERT INTO t VALUES (?, ?, ?)", rows)
    for n in (1, 2, 5):
        forms = [bytes(rng.choice(alphabet) for _ in range(rng.randrange(1, 4))) for _ in range(n)]
        want = {i + 1 for i, r in enumerate(rows) if any(f in _bytes(v) for v in r for f in forms)}
        got = {}
        for path, limit in (("instr", 10**6), ("function", 0)):
            monkeypatch.setattr(_sqlite_live, "INSTR_CALLS_MAX", limit)
            cond, args = holds_sql(con, COLS, forms)
            assert ("instr(" in cond) == (path == "instr"), cond
            got[path] = {r[0] for r in con.execute(f"SELECT rowid FROM t WHERE {cond}", args)}  # noqa: S608
        assert got["instr"] == got["function"] == want, (forms, got, want)


def test_a_form_across_two_columns_is_in_neither() -> None:
    con = sqlite3.connect(":memory:")
    con.execute("CREATE TABLE t (a, b)")
    con.execute("INSERT INTO t VALUES ('xx-ab', 'cd-yy')")
    for limit in (10**6, 0):
        _sqlite_live.INSTR_CALLS_MAX, old = limit, _sqlite_live.INSTR_CALLS_MAX
        try:
            cond, args = holds_sql(con, ["a", "b"], [b"abcd", b"ab\0cd"])
            assert con.execute(f"SELECT count(*) FROM t WHERE {cond}", args).fetchone()[0] == 0  # noqa: S608
        finally:
            _sqlite_live.INSTR_CALLS_MAX = old
