"""mem0's history table as a bystander store of a server deployment (``_mem0_pgvector``): the
first digest marks the rows it covers and the rows the erasure may delete; every digest counts
the rows up to the mark but those and reads the rows beside them (``NEIGHBOURS``)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from traceless.systems._mem0_pgvector import (
    NEIGHBOURS,
    HistoryMark,
    history_kept,
    history_mark,
    history_tally,
)


def _history(path: Path, n: int = 300) -> list[str]:
    """A history table as mem0 writes it: one ADD row a memory; every 50th memory is the user's."""
    mine = [f"m-{i}" for i in range(n) if i % 50 == 7]
    with sqlite3.connect(path) as con:
        con.execute("CREATE TABLE history (id TEXT PRIMARY KEY, memory_id TEXT, old_memory TEXT, new_memory TEXT, "
                    "event TEXT, created_at DATETIME, updated_at DATETIME, is_deleted INTEGER, actor_id TEXT, role TEXT)")
        con.executemany("INSERT INTO history VALUES (?, ?, NULL, ?, 'ADD', '2026-12-06', NULL, 0, NULL, NULL)",
                        [(f"h-{i}", f"m-{i}", f"memory {i}") for i in range(n)])
    return mine


def test_the_mark_reads_back_as_written_and_its_neighbours_merge() -> None:
    mark = HistoryMark(210, "h-209", (5, 10, 200))
    assert HistoryMark.parse(mark.text()) == mark
    assert HistoryMark.parse("0::") is None
    assert mark.neighbours() == [(1, 10 + NEIGHBOURS), (200 - NEIGHBOURS, 210)]


def test_the_digest_sees_a_removed_row_anywhere_and_a_changed_row_beside_an_erased_one(tmp_path: Path) -> None:
    path = tmp_path / "history.db"
    mine = _history(path)
    mark = history_mark(path, mine, ["h-100"])
    assert mark is not None and mark.id == "h-299" and len(mark.targets) == len(mine) + 1
    before = history_tally(path, mark)
    assert before[0] == 300 - len(mine) - 1

    def after(sql: str, *args: object) -> tuple[int, int]:
        copy = tmp_path / "copy.db"
        copy.write_bytes(path.read_bytes())
        with sqlite3.connect(copy) as con:
            con.execute("DELETE FROM history WHERE memory_id IN (SELECT value FROM json_each(?)) OR id = 'h-100'",
                        (json.dumps(mine),))
            if sql:
                con.execute(sql, args)
            con.execute("INSERT INTO history (id, memory_id, new_memory) VALUES ('h-new', 'm-new', 'the app')")
        assert history_kept(copy, mark)
        return history_tally(copy, mark)

    assert after("") == before  # the erased rows gone, the application's later row its own
    assert after("DELETE FROM history WHERE id = 'h-250'")[0] == before[0] - 1  # a removed row: one fewer
    assert after("UPDATE history SET new_memory = 'x' WHERE id = 'h-8'") != before  # beside m-7's row
    assert after("UPDATE history SET event = 'UPDATE' WHERE id = 'h-101'") != before  # beside h-100


def test_a_gone_mark_row_cannot_pass(tmp_path: Path) -> None:
    path = tmp_path / "history.db"
    mine = _history(path, 60)
    mark = history_mark(path, mine, [])
    assert mark is not None
    with sqlite3.connect(path) as con:
        con.execute("DELETE FROM history WHERE rowid = ?", (mark.row,))
        con.execute("INSERT INTO history (rowid, id, memory_id) VALUES (?, 'h-other', 'm-other')", (mark.row,))
    assert not history_kept(path, mark)


@pytest.mark.parametrize("n", [0, 1])
def test_a_history_without_bystanders_has_no_mark(tmp_path: Path, n: int) -> None:
    path = tmp_path / "history.db"
    _history(path, n)
    assert history_mark(path, ["m-0"], []) is None
