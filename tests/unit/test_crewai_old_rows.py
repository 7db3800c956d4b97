"""``_crewai._old_rows``: the rows only an older LanceDB version holds, read from a real table's
history (an add, a deletion, an update keeping the row's id, a version of the same rows), equal
the rows of every older version less the current ones, whichever way a version is read: the
same rows as another (skipped), the current rows and more in order (``_beyond``), or other
rows (every row made a key)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pa = pytest.importorskip("pyarrow")
lancedb = pytest.importorskip("lancedb")

from traceless.systems import _crewai as cr  # noqa: E402


def _rows(ids: range, tag: str = "") -> Any:
    return pa.table({"id": [str(i) for i in ids], "content": [f"memory {i}{tag}" for i in ids],
                     "scope": [f"/user/u{i % 3}" for i in ids], "categories_str": ['["c"]'] * len(ids),
                     "metadata_str": ["{}"] * len(ids), "source": [None] * len(ids),
                     "vector": pa.array([[float(i), 1.0] for i in ids], pa.list_(pa.float32(), 2))})


def _texts(tbl: Any) -> set[tuple[Any, ...]]:
    data = cr._text_cols(tbl)
    return set(zip(*(data[c].to_pylist() for c in data.column_names), strict=True))


def _reference(tbl: Any) -> set[tuple[Any, ...]]:
    latest = tbl.version
    now = _texts(tbl)
    older: set[tuple[Any, ...]] = set()
    for v in [int(x["version"]) for x in tbl.list_versions()]:
        if v != latest:
            tbl.checkout(v)
            older |= _texts(tbl)
    tbl.checkout_latest()
    return older - now


@pytest.mark.parametrize("last", ["delete", "update", "add", "update, delete"])
def test_the_rows_only_older_versions_hold(tmp_path: Path, last: str) -> None:
    db = lancedb.connect(str(tmp_path))
    tbl = db.create_table("memories", data=_rows(range(60)))
    tbl.add(_rows(range(60, 90)))
    tbl.create_scalar_index("id")  # a version of the same rows
    tbl.update(where="id = '5'", values={"content": "memory 5 changed"})  # a version: the same ids, one text changed
    tbl.delete("id IN ('70', '71')")  # an older version: the current rows and these, in order
    tbl.add(_rows(range(90, 95)))
    tbl.delete("id IN ('91', '92')")
    if last == "delete":
        tbl.delete("id = '40'")
    elif last == "update":
        tbl.update(where="id = '41'", values={"content": "memory 41 changed"})
    elif last == "add":
        tbl.add(_rows(range(95, 97), tag=" again"))
    else:  # the version before: the current ids and one more, but one of their texts another
        tbl.update(where="id = '41'", values={"content": "memory 41 changed"})
        tbl.delete("id = '40'")
    want = _reference(tbl)
    assert ("5", "memory 5", "/user/u2", '["c"]', "{}", None) in want  # the text an update replaced
    assert {r[0] for r in want} >= {"5", "70", "71", "91", "92"}
    latest = tbl.version
    got = cr._old_rows(tbl, latest, cr._text_cols(tbl))
    assert tbl.version == latest
    rows = [tuple(r[c] for c in cr._TEXT_COLS) for r in got]
    assert len(rows) == len(set(rows))  # each distinct row once
    assert set(rows) == want


def test_a_version_of_the_current_ids_and_more_whose_text_differs_is_read_whole(tmp_path: Path) -> None:
    """The first version holds every current id and one more, but an older text of one of them:
    not the current rows and more (``_beyond`` compares the rows, not only the ids)."""
    db = lancedb.connect(str(tmp_path))
    tbl = db.create_table("memories", data=_rows(range(30)))
    tbl.update(where="id = '7'", values={"content": "memory 7 changed"})
    tbl.delete("id = '8'")
    got = cr._old_rows(tbl, tbl.version, cr._text_cols(tbl))
    assert {(r["id"], r["content"]) for r in got} == {("7", "memory 7"), ("8", "memory 8")} == {
        (r[0], r[1]) for r in _reference(tbl)}
