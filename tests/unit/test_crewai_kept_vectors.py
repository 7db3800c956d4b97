"""``_crewai._same_vectors``: of an erased row's vectors, those a remaining row holds itself,
found by their first 8 bytes and compared whole (issue 39), equal to the set of every row's
bytes; vectors sharing their first 8 bytes, of another width, and null rows included."""

from __future__ import annotations

import numpy as np
import pytest

pa = pytest.importorskip("pyarrow")

from traceless.systems import _crewai as cr  # noqa: E402


@pytest.mark.parametrize("dim", [1, 2, 384])
def test_the_vectors_a_row_holds_are_those_of_every_rows_bytes(dim: int) -> None:
    rng = np.random.default_rng(dim)
    rows = rng.standard_normal((500, dim)).astype("<f4")
    rows[7] = rows[3]  # two rows alike
    twin = rows[10].copy()
    twin[-1] += 1.0  # same first 8 bytes (dim > 2), another vector
    erased = {rows[3].tobytes(), rows[10].tobytes(), twin.tobytes(),
              rng.standard_normal(dim).astype("<f4").tobytes(),  # held by no row
              rng.standard_normal(dim + 1).astype("<f4").tobytes()}  # another width
    values = [r.tolist() for r in rows]
    values[20] = None
    column = pa.chunked_array([pa.array(values[:250], pa.list_(pa.float32(), dim)),
                               pa.array(values[250:], pa.list_(pa.float32(), dim))])
    every = {r.tobytes() for k, r in enumerate(rows) if k != 20}
    got = cr._same_vectors(column, erased)
    assert got == every & erased
    assert rows[3].tobytes() in got and rows[10].tobytes() in got and twin.tobytes() not in got


def test_a_sliced_chunk_is_read_from_its_offset() -> None:
    rng = np.random.default_rng(5)
    rows = rng.standard_normal((300, 16)).astype("<f4")
    whole = pa.array([r.tolist() for r in rows], pa.list_(pa.float32(), 16))
    erased = {rows[k].tobytes() for k in (0, 4, 5, 299)}
    assert cr._same_vectors(pa.chunked_array([whole.slice(5, 290)]), erased) == {rows[5].tobytes()}
    listed = pa.chunked_array([pa.array([r.tolist() for r in rows[:10]], pa.list_(pa.float32()))])
    assert cr._same_vectors(listed, erased) == {rows[k].tobytes() for k in (0, 4, 5)}
