"""The LlamaIndex scan counts a record's literals without serialising a long list of numbers
(an embedding) when no literal form can lie inside one: the count must be exactly the one of
the record's full text, for every literal, including one that starts before the list and ends
inside it, one made only of characters a list of numbers has, and a non-ASCII one."""

from __future__ import annotations

import numpy as np
import pytest

from traceless.systems import _llamaindex_live as li
from traceless.systems import _sqlite_live as live

RNG = np.random.default_rng(3)
EMB = [float(x) for x in RNG.standard_normal(64)] + [1, -0.0, 1e-7, float("inf"), float("nan")]
RECORDS = [li.JsonRecord("vector_store", "embedding_dict", "u1/s1#0", EMB),
           li.JsonRecord("vector_store", "embedding_dict", "KEY-ZQ9", [0.5] * 40),
           li.JsonRecord("vector_store", "embedding_dict", "short", [0.25, 0.5]),
           li.JsonRecord("docstore", "docstore/data", "u1/s1#0", {"text": "token ZQ9-PLUM-1234 here"})]
LITERALS = [["ZQ9-PLUM-1234"], ["u1/s1#0\", [" + repr(EMB[0])[:4]], ["#0\", ["], ["-0.0, 1e-07"],
            ["KEY-ZQ9\", [0.5, 0.5"], ["dict"], ["Infinity, NaN"], ["é-ZQ9"], ["ZQ9", "KEY-ZQ9", "0.5"], []]


@pytest.mark.parametrize("literals", LITERALS)
def test_the_count_is_the_full_texts(literals: list[str]) -> None:
    for r in RECORDS:
        assert li._record_count(r, literals) == live._count(r.text(), literals), (r.key, literals)
    assert any(li._record_count(r, literals) for r in RECORDS) == any(live._count(r.text(), literals) for r in RECORDS)
