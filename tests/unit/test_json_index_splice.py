"""``JsonIndex.spliced``: the index of a spliced file made from the old one (entries shifted, the
changed entries decoded from their new text) equals the index a parse of the written file makes."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from traceless.systems import json_index
from traceless.systems.json_index import LAZY, JsonIndex


def _store(rng: random.Random) -> dict[str, object]:
    def coll(n: int, prefix: str) -> dict[str, object]:
        out: dict[str, object] = {}
        for i in range(n):
            kind = rng.randrange(3)
            out[f"{prefix}{i}"] = ([rng.uniform(-1, 1) for _ in range(4)] if kind == 0 else
                                   {"text": f"é {i} \"q\"", "n": [i, {"k": "v"}]} if kind == 1 else f"s{i}")
        return out
    return {"a": coll(rng.randrange(0, 6), "x"), "top": rng.randrange(9), "b": coll(rng.randrange(1, 9), "y"),
            "c": coll(rng.randrange(1, 5), "z"), "tail": ["not", "an", "object"]}


def _view(ix: JsonIndex) -> tuple[list[tuple[object, ...]], dict[str, tuple[int, int]], list[str]]:
    entries = [(e.coll, e.key, e.start, e.vstart, e.end, "LAZY" if e.value is LAZY else json.dumps(e.value))
               for e in ix.entries]
    return entries, ix.spans, ix.collections


@pytest.mark.parametrize("seed", range(40))
@pytest.mark.parametrize("ascii_", [True, False])
def test_the_spliced_index_is_the_parse_of_the_written_file(tmp_path: Path, seed: int, ascii_: bool) -> None:
    rng = random.Random(seed)
    path = tmp_path / "store.json"
    path.write_text(json.dumps(_store(rng), ensure_ascii=ascii_), encoding="utf-8")
    ix = JsonIndex(path)
    objects = [i for i, e in enumerate(ix.entries) if e.coll in ix.spans]
    changes: dict[int, str | None] = {}
    for i in rng.sample(objects, rng.randrange(1, len(objects) + 1)):
        e = ix.entries[i]
        changes[i] = None if rng.random() < 0.5 else ix.text[e.start:e.vstart] + json.dumps(
            rng.choice([[0.5, -0.25], {"text": "ré [erased]"}, "new"]), ensure_ascii=ascii_)
    text, entries, spans, ranges = ix.spliced(changes)
    assert text == ix.splice(changes)
    path.write_text(text, encoding="utf-8")
    data = path.read_bytes()
    made, parsed = JsonIndex.of_text(path, data, text, entries, spans, ranges, ix.standard), JsonIndex(path)
    assert _view(made) == _view(parsed)
    assert {c: made.members(c) for c in made.collections} == {c: parsed.members(c) for c in parsed.collections}
    assert json.loads(text)  # still one JSON object


def test_a_change_that_does_not_start_with_the_entrys_key_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "s.json"
    path.write_text(json.dumps({"a": {"k": 1, "j": 2}}))
    ix = JsonIndex(path)
    with pytest.raises(ValueError, match="start with its key"):
        ix.spliced({0: '"other": 3'})


def _parsed(text: str) -> tuple[list[tuple[object, ...]], dict[str, tuple[int, int]], dict[str, tuple[int, int]]]:
    """The entries, spans and ranges of the parse in Python (one step per entry)."""
    ranges: dict[str, tuple[int, int]] = {}
    entries, spans = json_index._parse(text, set(), ranges)
    return ([(e.coll, e.key, e.start, e.vstart, e.end, "LAZY" if e.value is LAZY else json.dumps(e.value))
             for e in entries], spans, ranges)


@pytest.mark.parametrize("seed", range(40))
def test_the_columns_index_what_the_parse_indexes(tmp_path: Path, seed: int) -> None:
    """A file ``json.dump`` wrote (ASCII) is indexed as columns, with the entries, spans and
    collection ranges the parse in Python makes; its splice as bytes is the text splice's."""
    rng = random.Random(seed)
    path = tmp_path / "store.json"
    path.write_text(json.dumps(_store(rng)), encoding="utf-8")
    ix = JsonIndex(path)
    assert ix.columnar
    entries, spans, ranges = _parsed(path.read_text())
    assert _view(ix)[0] == entries and ix.spans == spans
    assert ix.collections == sorted(set(ranges) | set(spans))
    assert {c: ix.members(c) for c in ix.collections if ix.members(c)} == {c: range(*r) for c, r in ranges.items()}
    objects = [i for i, e in enumerate(ix.entries) if e.coll in ix.spans]
    changes: dict[int, str | None] = {}
    for i in rng.sample(objects, rng.randrange(1, len(objects) + 1)):
        e = ix.entries[i]
        changes[i] = None if rng.random() < 0.5 else ix.text[e.start:e.vstart] + json.dumps({"text": "[erased]"})
    data = b"".join(ix.splice_parts(changes))
    assert data == ix.splice(changes).encode()
    made = ix.spliced_index(path, data, changes)  # the new file's columns from the old ones
    path.write_bytes(data)
    parsed = JsonIndex(path)
    assert made.columnar and parsed.columnar
    assert _view(made) == _view(parsed) and made.spans == parsed.spans
    assert {c: made.members(c) for c in made.collections} == {c: parsed.members(c) for c in parsed.collections}


@pytest.mark.parametrize("seed", range(10))
def test_a_columns_hit_is_every_entry_a_form_starts_in(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    path = tmp_path / "store.json"
    path.write_text(json.dumps(_store(rng)), encoding="utf-8")
    ix = JsonIndex(path)
    text = path.read_text()
    forms = rng.sample(['\\"q\\"', "x1", "0.", '"k": "v"', "s3", "y2", "none-such"], 3)
    want = {i for i, e in enumerate(ix.entries)
            for f in forms for at in range(len(text)) if text.startswith(f, at) and e.start <= at < e.end}
    assert ix.hit(forms) == want


@pytest.mark.parametrize("text", [
    '{"a": {"k": 1, "k": 2}}',  # a duplicate key: the decoder keeps one
    '{"a": {"k": 1,  "j": 2}}',  # another separator
    '{"a": {"k\\/x": 1}}',  # an escaped key
    '{"a": {"k": "\u00e9"}}',  # not ASCII
    '{"a": {"k": 1}}\n',  # a newline
    '{"a": {"k": [1, 2]}, "b": 3}',
])
def test_only_json_dumps_default_output_is_indexed_as_columns(tmp_path: Path, text: str) -> None:
    path = tmp_path / "s.json"
    path.write_text(text, encoding="utf-8")
    ix = JsonIndex(path)
    assert ix.columnar is (text == '{"a": {"k": [1, 2]}, "b": 3}')
    assert _view(ix)[0] == _parsed(text)[0]


def test_the_owner_columns_after_a_splice_are_those_of_the_written_file(tmp_path: Path) -> None:
    """``_spliced_owners``: a removed entry left out, a changed one read from its new text (its
    ``user_id`` rewritten here), every other kept: as decoding the written file gives them."""
    from traceless.systems import _llamaindex_owners as li_owners

    def node(user: str, ref: str) -> dict[str, object]:
        return {"__data__": {"metadata": {"user_id": user}, "text": "t", "ref_doc_id": ref}, "__type__": "1"}

    store = {"docstore/ref_doc_info": {f"r{i}": {"node_ids": [f"n{i}"], "metadata": {"user_id": f"u{i % 3}"}}
                                       for i in range(9)},
             "docstore/data": {f"n{i}": node(f"u{i % 3}", f"r{i}") for i in range(9)},
             "docstore/metadata": {f"n{i}": {"doc_hash": "h", "ref_doc_id": f"r{i}"} for i in range(9)}}
    path = tmp_path / "docstore.json"
    path.write_text(json.dumps(store))
    ix = JsonIndex(path)
    owned = [li_owners._OwnerColumns.of(ix, c) for c in li_owners._owner_colls(ix)]
    changes: dict[int, str | None] = {0: None, 12: None}  # r0, docstore/data n3
    for i in (4, 10):  # r4's user and n1's user rewritten
        e = ix.entry(i)
        changes[i] = ix.slice(e.start, e.vstart) + json.dumps(json.loads(ix.slice(e.vstart, e.end).replace('"u1"', '"x"')))
    data = b"".join(ix.splice_parts(changes))
    path.write_bytes(data)
    after = JsonIndex(path)
    want = [li_owners._OwnerColumns.of(after, c) for c in li_owners._owner_colls(after)]
    assert li_owners._spliced_owners(ix, owned, changes) == want
    assert li_owners._owners(want) != li_owners._owners(owned)


def _reference_owners(items: list[tuple[str, str, object]]) -> dict[str, str]:
    """The owners rule read item by item, as written before it was read as columns."""
    def meta(value: object) -> dict[str, object]:
        data = value.get("__data__", value) if isinstance(value, dict) else None
        m = data.get("metadata") if isinstance(data, dict) else None
        return m if isinstance(m, dict) else {}

    refs: dict[str, str] = {}
    nodes: dict[str, str] = {}
    for coll, key, value in items:
        user = meta(value).get("user_id")
        if coll == "docstore/ref_doc_info":
            owner = user if isinstance(user, str) else (key.split("/", 1)[0] if "/" in key else None)
            if owner is not None:
                refs[key] = owner
                ids = value.get("node_ids") if isinstance(value, dict) else None
                nodes.update({str(i): owner for i in ids or []})  # type: ignore[union-attr]
        elif coll in ("docstore/data", "metadata_dict") and isinstance(user, str):
            nodes[key] = user
    for coll, key, value in items:
        if coll == "text_id_to_ref_doc_id" and isinstance(value, str) and value in refs:
            nodes[key] = refs[value]
        ref = value.get("ref_doc_id") if isinstance(value, dict) else None
        if coll in ("docstore/metadata", "metadata_dict") and ref in refs:
            nodes[key] = refs[str(ref)]
    return {**nodes, **refs}


@pytest.mark.parametrize("seed", range(30))
def test_the_owners_read_as_columns_follow_the_rule_read_item_by_item(tmp_path: Path, seed: int) -> None:
    """Conflicting owners (a node listed by two users' refs, its own metadata saying a third, its
    ref doc a fourth's), ids of other types, ``USER/…`` ids, values that are no object: the
    columns (typed where every value fits, else plain) give the item-by-item rule's owners."""
    from traceless.systems import _llamaindex_owners as li_owners

    rng = random.Random(seed)
    users, nodes, refs = ["u1", "u2", "u3", None, 7], [f"n{i}" for i in range(8)], [f"r{i}" for i in range(5)]

    def meta() -> dict[str, object]:
        return {"user_id": rng.choice(users)} if rng.random() < 0.8 else {}

    store = {
        "docstore/ref_doc_info": {rng.choice([r, f"u2/{r}"]): {"node_ids": rng.sample(nodes, 3) + ([5] if rng.random() < 0.2 else []),
                                                             "metadata": meta()} for r in refs},
        "docstore/data": {n: ({"__data__": {"metadata": meta()}} if rng.random() < 0.9 else "odd") for n in nodes},
        "docstore/metadata": {n: {"ref_doc_id": rng.choice(refs + ["u2/r1", "none"])} for n in nodes},
        "metadata_dict": {n: {**meta(), "ref_doc_id": rng.choice(refs)} for n in nodes[:4]},
        "text_id_to_ref_doc_id": {n: rng.choice(refs + ["u2/r3"]) for n in nodes},
    }
    path = tmp_path / "docstore.json"
    path.write_text(json.dumps(store))
    ix = JsonIndex(path)
    items = [(e.coll, e.key, ix.value(e)) for e in ix.entries if e.coll in li_owners._OWNER_COLLS]
    assert li_owners._owners(li_owners._all_fields({"docstore": ix})) == _reference_owners(items)


@pytest.mark.parametrize("seed", range(40))
def test_the_owners_read_for_one_user_follow_the_rule_read_item_by_item(tmp_path: Path, seed: int) -> None:
    """``user_keys`` (the keys the rule gives one user, found from the bytes that may say so)
    and ``owners_for`` (the rule for some keys) equal the item-by-item rule on instances whose
    owners conflict: a node listed by several users' ref docs, its own metadata saying another,
    its ref doc named by ``text_id_to_ref_doc_id`` or ``ref_doc_id`` a third's, ``USER/…`` ids,
    a number among the ``node_ids``, a non-ASCII user (``\\u`` escapes in the file's values), the
    vector store's collections in a file of their own read first (as in an instance)."""
    from traceless.systems import _llamaindex_owners as li_owners

    rng = random.Random(seed)
    users, nodes, refs = ["u1", "u2", "\u00e91", None, 7], [f"n{i}" for i in range(10)], [f"r{i}" for i in range(6)]
    named = [*refs, "u2/r1", "\u00e91/r2", "none"]

    def meta() -> dict[str, object]:
        return {"user_id": rng.choice(users)} if rng.random() < 0.7 else {}

    vector = {"metadata_dict": {n: {**meta(), "ref_doc_id": rng.choice(named)} for n in rng.sample(nodes, 5)},
              "text_id_to_ref_doc_id": {n: rng.choice(named) for n in rng.sample(nodes, 6)}}
    docstore = {
        "docstore/ref_doc_info": {rng.choice([r, f"u2/{r}"]): {
            "node_ids": rng.sample(nodes, rng.choice([0, 3])) + ([5] if rng.random() < 0.3 else []),
            "metadata": meta()} for r in refs},
        "docstore/data": {n: {"__data__": {"metadata": meta()}} for n in nodes},
        "docstore/metadata": {n: {"ref_doc_id": rng.choice(named)} for n in nodes},
    }
    idx = {}
    for store, doc in (("vector_store", vector), ("docstore", docstore)):
        (tmp_path / f"{store}.json").write_text(json.dumps(doc))
        idx[store] = JsonIndex(tmp_path / f"{store}.json")
    assert all(ix.columnar for ix in idx.values())
    items = [(e.coll, e.key, ix.value(e)) for ix in idx.values() for e in ix.entries
             if e.coll in li_owners._OWNER_COLLS]
    want = _reference_owners(items)
    assert li_owners._owners(li_owners._all_fields(idx)) == want
    for user in ("u1", "u2", "\u00e91", "u9"):
        assert li_owners.user_keys(idx, user) == {k for k, u in want.items() if u == user}, user
    keys = [*want, "n99", "r99"]
    assert li_owners.owners_for(idx, keys) == {k: want.get(k) for k in keys}
