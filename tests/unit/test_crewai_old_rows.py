"""``_crewai._old_rows``: the rows only an older LanceDB version holds, read from a real table's
history (an add, a deletion, an update keeping the row's id, a version of the same rows), equal
the rows of every older version less the current ones, whichever way a version is read: the
same rows as another (skipped) or other rows (told from the current ones by Arrow). ``_erased_rows``: an erased id's vectors and texts as every version
shows them. Each runs twice: with the versions a version's fragments cover left unread
(``_crewai_lance``, pylance) and with every version read (no pylance)."""

from __future__ import annotations

import importlib
import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pa = pytest.importorskip("pyarrow")
lancedb = pytest.importorskip("lancedb")

from traceless.systems import _crewai as cr  # noqa: E402
from traceless.systems import _crewai_lance as lf  # noqa: E402


@pytest.fixture(autouse=True, params=["fragments", "every version"])
def how(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    if request.param == "every version":
        monkeypatch.setattr(lf, "fragments", lambda uri, versions: None)
    elif os.environ.get("TRACELESS_REQUIRE_CREWAI"):
        importlib.import_module("lance")  # the crewai extra installs pylance: absence fails in CI
    else:
        pytest.importorskip("lance")
    return str(request.param)


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
    its rows are compared whole, not only by id."""
    db = lancedb.connect(str(tmp_path))
    tbl = db.create_table("memories", data=_rows(range(30)))
    tbl.update(where="id = '7'", values={"content": "memory 7 changed"})
    tbl.delete("id = '8'")
    got = cr._old_rows(tbl, tbl.version, cr._text_cols(tbl))
    assert {(r["id"], r["content"]) for r in got} == {("7", "memory 7"), ("8", "memory 8")} == {
        (r[0], r[1]) for r in _reference(tbl)}


def _history(tmp_path: Path) -> Any:
    """A table's history: two adds, an index, an update keeping an id, deletions, an add."""
    db = lancedb.connect(str(tmp_path))
    tbl = db.create_table("memories", data=_rows(range(40)))
    tbl.add(_rows(range(40, 70)))
    tbl.create_scalar_index("id")
    tbl.update(where="id IN ('5', '45')", values={"content": "memory changed", "vector": [9.0, 9.0]})
    tbl.delete("id IN ('6', '46', '47')")
    tbl.add(_rows(range(70, 75)))
    tbl.delete("id = '71'")
    return tbl


def test_the_erased_rows_vectors_and_texts_are_those_every_version_shows(tmp_path: Path) -> None:
    tbl = _history(tmp_path)
    ids = {"5", "6", "45", "46", "71", "72", "none"}
    want: dict[str, tuple[set[bytes], set[str]]] = {}
    for v in [int(x["version"]) for x in tbl.list_versions()]:
        tbl.checkout(v)
        for r in tbl.to_arrow().to_pylist():
            if r["id"] in ids:
                got = want.setdefault(r["id"], (set(), set()))
                got[0].add(np.asarray(r["vector"], dtype="<f4").tobytes())
                got[1].update(str(r[c]) for c in cr._CHECKED if r[c])
    tbl.checkout_latest()
    assert len(want["5"][0]) == 2 and len(want["6"][0]) == 1 and "none" not in want  # an update's old vector
    assert cr._erased_rows(tmp_path, ids) == want


def test_a_version_is_left_unread_only_where_another_read_shows_each_of_its_rows(tmp_path: Path, how: str) -> None:
    """``to_read`` of the history: the adds and the index are covered by the version after them
    (the same fragments, more of them, no deletion file), a version before a deletion is not
    covered by the one after it; without pylance every version is read."""
    tbl = _history(tmp_path)
    versions = [int(x["version"]) for x in tbl.list_versions()]
    latest = tbl.version
    read = lf.to_read(tbl.uri, versions, read=[latest])
    if how == "every version":
        assert read == [v for v in versions if v != latest]
        return
    frags = lf.fragments(tbl.uri, versions)
    assert frags is not None
    for v in versions:  # each version is covered by one read or by the current version
        assert any(lf.covered(frags[v], frags[r]) for r in [*read, latest])
    assert len(read) < len(versions) - 2
    tbl.checkout(latest - 1)  # the version before the last deletion: its row 71 the current one lacks
    assert "71" in tbl.to_arrow()["id"].to_pylist() and not lf.covered(frags[latest - 1], frags[latest])
    tbl.checkout_latest()


def test_a_fragment_is_covered_only_by_the_same_files_with_no_or_the_same_deletions() -> None:
    files = ((("a.lance", None),), None, "[]")
    gone = ((("a.lance", None),), ("array", 3, 7, None), "[]")
    assert lf.covered({0: gone}, {0: files}) and lf.covered({0: gone}, {0: gone}) and lf.covered({}, {0: files})
    assert not lf.covered({0: files}, {0: gone})  # the deletion hides rows the older version shows
    assert not lf.covered({0: gone}, {0: ((("a.lance", None),), ("array", 4, 8, None), "[]")})
    assert not lf.covered({0: files}, {0: ((("b.lance", None),), None, "[]")})
    assert not lf.covered({0: files}, {1: files}) and not lf.covered({0: files, 1: files}, {0: files})
    assert not lf.covered({0: files}, {0: ((("a.lance", None),), None, "[overlay]")})


def _table(rows: list[tuple[str | None, str]]) -> Any:
    """Rows of these ids and contents, every other column the same."""
    n = len(rows)
    return pa.table({"id": pa.array([i for i, _ in rows], pa.string()), "content": [c for _, c in rows],
                     "scope": ["/user/u1"] * n, "categories_str": ['["c"]'] * n, "metadata_str": ["{}"] * n,
                     "source": [None] * n, "vector": pa.array([[1.0, 2.0]] * n, pa.list_(pa.float32(), 2))})


@pytest.mark.parametrize("ids", [("1", "1", "7"), (None, None, "3")])
def test_a_row_whose_id_a_current_row_has_is_old_only_if_no_current_row_holds_its_text(
        tmp_path: Path, ids: tuple[str | None, ...]) -> None:
    """Two current rows share an id (LanceDB keeps no id unique), or have none: an older row of
    that id is a current row where the second holds its text (not where the first does not)."""
    one, _, other = ids
    db = lancedb.connect(str(tmp_path))
    tbl = db.create_table("memories", data=_table([(one, "b"), (other, "k"), (one, "z")]))  # an old version
    tbl.delete("content IN ('b', 'k', 'z')")
    tbl.add(_table([(one, "a"), (one, "b")]))  # the current rows: the first of that id "a", the second "b"
    want = _reference(tbl)
    assert {(r[0], r[1]) for r in want} == {(other, "k"), (one, "z")}
    got = cr._old_rows(tbl, tbl.version, cr._text_cols(tbl))
    assert {(r["id"], r["content"]) for r in got} == {(other, "k"), (one, "z")}


def _compacted(tmp_path: Path, indexed: bool = False) -> Any:
    """A history with a compaction: appends (a fragment each), a deletion the compaction then
    reads (its rows not copied), the compaction (a ``Rewrite``; with ``indexed``, of a table with
    a scalar index, as CrewAI's), a deletion after it."""
    db = lancedb.connect(str(tmp_path))
    tbl = db.create_table("memories", data=_rows(range(10)))
    if indexed:
        tbl.create_scalar_index("scope", index_type="BTREE")
    for k in range(1, 5):
        tbl.add(_rows(range(10 * k, 10 * k + 10)))
    tbl.delete("id IN ('3', '13')")  # before the compaction: the versions before it show these
    tbl.optimize()  # a Rewrite: the fragments' rows copied into one, without 3 and 13
    tbl.delete("id = '25'")
    return tbl


@pytest.mark.parametrize("indexed", [False, True])
def test_a_compaction_covers_the_versions_it_copied_and_not_the_rows_it_did_not(tmp_path: Path, how: str,
                                                                                indexed: bool) -> None:
    tbl = _compacted(tmp_path, indexed)
    want = _reference(tbl)
    assert {r[0] for r in want} == {"3", "13", "25"}
    got = cr._old_rows(tbl, tbl.version, cr._text_cols(tbl))
    assert {tuple(r[c] for c in cr._TEXT_COLS) for r in got} == want
    ids = {"3", "13", "25", "31"}
    erased = cr._erased_rows(tmp_path, ids)
    assert set(erased) == ids and all(len(v) == 1 for v, _ in erased.values())
    if how == "fragments":
        versions = [int(x["version"]) for x in tbl.list_versions()]
        assert len(lf.rewrites(tbl.uri)) == 1  # the compaction's group, read from its transaction file
        read = lf.to_read(tbl.uri, versions, read=[tbl.version])
        assert len(read) <= 3 < len(versions) - 1  # the appends are covered by the compaction's version


def test_the_compactions_read_from_the_transaction_files_are_those_pylance_decodes(tmp_path: Path) -> None:
    """Where pylance decodes a compaction, its groups equal the ones read field by field from
    the transaction file (pylance is the reference here, in both runs)."""
    lance = importlib.import_module("lance")

    tbl = _compacted(tmp_path)
    ds = lance.dataset(str(tbl.uri))
    want = []
    for v in [int(x["version"]) for x in tbl.list_versions()]:
        op = getattr(ds.read_transaction(v), "operation", None)
        for g in getattr(op, "groups", ()) if type(op).__name__ == "Rewrite" else ():
            gone = [(f.deletion_file.read_version, f.deletion_file.id) if f.deletion_file else None
                    for f in g.old_fragments]
            want.append((tuple((f.id, tuple(d.path for d in f.files), d) for f, d in zip(g.old_fragments, gone,
                                                                                        strict=True)),
                         tuple((f.id, tuple(d.path for d in f.files)) for f in g.new_fragments)))
    assert want and lf.rewrites(tbl.uri) == want
    assert any(o[2] is not None for o in want[0][0])  # a fragment the compaction read with a deletion file


def test_a_compacted_fragment_is_covered_only_by_its_new_fragments_shown_whole() -> None:
    old = ((("a.lance", None),), None, "[]")
    gone = ((("a.lance", None),), ("array", 3, 7, None), "[]")
    new = {5: ((("n.lance", None),), None, "[]")}
    group = (((0, ("a.lance",), None),), ((5, ("n.lance",)),))
    read_less = (((0, ("a.lance",), (3, 7)),), ((5, ("n.lance",)),))
    assert lf.covered({0: old}, new, [group]) and lf.covered({0: gone}, new, [group])
    assert not lf.covered({0: old}, new)  # without the compaction: other fragments
    assert not lf.covered({0: old}, {5: ((("n.lance", None),), ("array", 9, 1, None), "[]")}, [group])
    assert not lf.covered({0: old}, {6: new[5]}, [group]) and not lf.covered({0: old}, {5: new[5]}, [read_less])
    assert lf.covered({0: gone}, new, [read_less])  # it read what that version shows
    assert not lf.covered({1: old}, new, [group])


def test_a_file_that_is_no_transaction_records_no_compaction(tmp_path: Path) -> None:
    (tmp_path / "_transactions").mkdir()
    for name, data in (("a.txn", b"\xff\xff\xff"), ("b.txn", b"\x0a\x50abc"), ("c.txn", b"")):
        (tmp_path / "_transactions" / name).write_bytes(data)
    assert lf.rewrites(tmp_path) == [] and lf.rewrites(tmp_path / "none") == []


def test_a_column_added_to_every_fragment_makes_each_earlier_row_old(tmp_path: Path) -> None:
    """A column added (Lance writes a data file more into each fragment, the fragment ids kept):
    the same address is no longer the same row, so every row of the version before is read and
    told by its texts (a row's ``source`` was none, now a text)."""
    db = lancedb.connect(str(tmp_path))
    tbl = db.create_table("memories", data=_rows(range(20)).drop_columns(["source"]))
    tbl.delete("id = '3'")
    tbl.add_columns({"source": "'app'"})
    want = _reference(tbl)
    assert len(want) == 20  # every row the versions before showed, with no source
    got = cr._old_rows(tbl, tbl.version, cr._text_cols(tbl))
    assert {r["id"] for r in got} == {r[0] for r in want}
    assert all(r.get("source") is None for r in got)


def test_of_a_version_read_only_the_rows_the_current_one_does_not_show_are_taken(tmp_path: Path, how: str) -> None:
    """``not_shown``: of a version before two deletions and an update, only the rows they
    removed are taken (the rows the current version shows at the same address are not read)."""
    db = lancedb.connect(str(tmp_path))
    tbl = db.create_table("memories", data=_rows(range(50)))
    tbl.add(_rows(range(50, 80)))
    first = tbl.version
    tbl.delete("id IN ('4', '55')")
    tbl.update(where="id = '60'", values={"content": "memory 60 changed"})
    got = lf.not_shown(tbl.uri, first, tbl.version)
    if how == "every version":
        assert got is None  # no fragments: the caller reads the version whole
        return
    assert got is not None
    ds, addresses = got
    for whole_from in (0, 20_000):  # the whole version read and filtered, or the rows read by their addresses
        taken = lf.rows_at(ds, addresses, ["id", "content", "no such column"], whole_from=whole_from).to_pylist()
        assert sorted(r["id"] for r in taken) == ["4", "55", "60"]
        assert {"id": "60", "content": "memory 60"} in taken
    assert lf.rows_at(ds, addresses[:0], ["id"]).num_rows == 0


def test_rows_are_told_from_the_current_ones_by_their_whole_text_even_where_an_id_holds_a_tab() -> None:
    """``_unheld`` compares only with the current rows of the same ids, except where an id holds
    the tab that joins a row's columns: there two rows of other ids can have the same text."""
    def table(rows: list[tuple[str, str]]) -> Any:
        return pa.table({"id": [r[0] for r in rows], "content": [r[1] for r in rows],
                         "scope": ["/user/u"] * len(rows)})

    current = table([("a", "b\tc"), ("x", "y"), ("z", "w")])
    for data, want in ((table([("a\tb", "c")]), [False]), (table([("x", "y"), ("x", "v")]), [False, True])):
        _, fresh = cr._unheld(data, current)
        assert fresh.to_pylist() == want


def test_a_pylance_that_cannot_take_rows_by_address_reads_the_version_whole(tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """``rows_at`` failing (a pylance whose filter does not know ``_rowaddr``) leaves each
    version read whole: the same rows as reading every version."""
    tbl = _history(tmp_path)

    def refused(*_: Any, **__: Any) -> Any:
        raise RuntimeError("No field named _rowaddr")

    monkeypatch.setattr(cr, "rows_at", refused)
    got = cr._old_rows(tbl, tbl.version, cr._text_cols(tbl))
    assert {tuple(r[c] for c in cr._TEXT_COLS) for r in got} == _reference(tbl) != set()
