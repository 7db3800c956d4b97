"""CrewAI's bystander digest text made by Arrow (``_crewai._digest_texts``) equals the kernel's
rule row by row (``kernel.bystander_rows``: ``name=value`` by name, tab separated, every form of
every literal replaced in each field): joined once, replaced only in the rows whose joined text
holds a form. Needs only pyarrow (no CrewAI)."""
from __future__ import annotations

import random

import pytest

pa = pytest.importorskip("pyarrow")

from traceless.systems._crewai import _TEXT_COLS, _digest_texts  # noqa: E402
from traceless.systems.kernel import replace_literals  # noqa: E402

LITERALS = ["QX5-OLIVE-9707", "é1-Zürich", "a.b*c", "x\tcontent=y", "(?:)"]
PIECES = ["hello ", "None", "QX5-OLIVE-9707", "QX5-OLIVE", "\\u00e91-Z\\u00fcrich", "\\u00E91-Z\\u00FCrich",
          "é1-Zürich", "a.b*c", "aXbYc", "x", "y", "(?:)", "\t", "=", "/user/u1", ""]


def _table(rng: random.Random, rows: int, cols: tuple[str, ...]) -> pa.Table:
    def value() -> str | None:
        return None if rng.random() < 0.05 else "".join(rng.choice(PIECES) for _ in range(rng.randrange(4)))

    whole = pa.table({c: pa.array([value() for _ in range(rows)], pa.string()) for c in cols})
    cuts = sorted({0, rows, *(rng.randrange(rows + 1) for _ in range(rng.randrange(5)))})
    return pa.concat_tables([whole.slice(a, b - a) for a, b in zip(cuts, cuts[1:], strict=False)])  # chunked as read


def _rule(data: pa.Table, literals: list[str]) -> list[str]:
    rows = data.to_pylist()
    return ["\t".join(f"{c}={replace_literals(str(r.get(c, '')) if c in r else '', literals)}"
                      for c in sorted(_TEXT_COLS)) for r in rows]


@pytest.mark.parametrize("seed", range(30))
def test_the_digest_texts_are_the_kernels_text_with_the_literals_replaced(seed: int) -> None:
    rng = random.Random(seed)
    cols = tuple(c for c in _TEXT_COLS if c == "id" or rng.random() < 0.8)  # a missing column is ""
    data = _table(rng, rng.randrange(1, 60), cols)
    literals = rng.sample(LITERALS, rng.randrange(len(LITERALS) + 1))
    got = _digest_texts(data, literals)
    want = _rule(data, literals)
    assert got == want
    owners = pa.array([rng.choice([None, "u1", "QX5-OLIVE-9707", "é"]) for _ in range(data.num_rows)], pa.string())
    assert _digest_texts(data, literals, owners) == [f"{o}\t{t}" for o, t in zip(owners.to_pylist(), want, strict=True)]


def test_a_form_across_two_fields_is_no_fields_and_stays() -> None:
    """The joined text of this row holds ``x\\tcontent=y`` across the two fields: no field does,
    so nothing is replaced (as the kernel's field-by-field rule)."""
    data = pa.table({"categories_str": ["x"], "content": ["y"], "id": ["1"]})
    assert _digest_texts(data, ["x\tcontent=y"]) == _rule(data, ["x\tcontent=y"])
    assert "x\tcontent=y" in _digest_texts(data, ["x\tcontent=y"])[0]


SCOPES = ["/user/u1/x", "/user/", "/user/a/b/c", "/crew/x", None, "/", "/user/ü€/q", "/users/x", "/user/x"]
METAS = ['{"user_id": "m"}', "{}", None, "not json", '{"user_id": 7}', '{"user_id": ""}', "[1]"]


@pytest.mark.parametrize("seed", range(20))
def test_each_rows_owner_cut_by_arrow_is_the_one_rule(seed: int) -> None:
    """``_owners`` (Arrow) equals ``_owner`` (the one rule: the scope's user, else the metadata's
    ``user_id``) row by row, on chunked tables, with and without a scope column."""
    from traceless.systems._crewai import _owner, _owners

    rng = random.Random(seed)
    n = rng.randrange(0, 60)
    whole = pa.table({"scope": [rng.choice(SCOPES) for _ in range(n)], "metadata_str": [rng.choice(METAS) for _ in range(n)]})
    cut = rng.randrange(n + 1)
    for data in (pa.concat_tables([whole.slice(0, cut), whole.slice(cut)]), whole.select(["metadata_str"])):
        assert _owners(data).to_pylist() == [_owner(r) for r in data.to_pylist()]
