"""Who owns each entry of a live LlamaIndex instance's JSON stores: the owner rule (``_owners``:
a ref doc's metadata ``user_id``, else the ``USER/…`` prefix of its id, inherited by every node
of the doc), read from every entry as columns, and the same rule read for one user only
(``user_keys``, ``owners_for``): the entries whose bytes may say the user (or one of the
user's ref docs) found by a byte search of the owner collections, only those decoded."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import msgspec

from traceless.systems.json_index import JsonIndex

__all__ = ["owners_for", "user_keys"]

_OWNER_COLLS = frozenset({"docstore/ref_doc_info", "docstore/data", "docstore/metadata", "metadata_dict",
                          "text_id_to_ref_doc_id"})
"""The collections ``owners`` reads: every other record's user is the one of its key."""


def _meta(value: Any) -> dict[str, Any]:
    data = value.get("__data__", value) if isinstance(value, dict) else None
    meta = data.get("metadata") if isinstance(data, dict) else None
    return meta if isinstance(meta, dict) else {}


def _owner_colls(ix: JsonIndex) -> list[str]:
    return sorted((c for c in ix.collections if c in _OWNER_COLLS), key=lambda c: ix.members(c).start)


class _Said(msgspec.Struct, gc=False):
    """What ``_meta`` reads of a node's metadata."""

    user_id: Any = None


class _Data(msgspec.Struct, gc=False):
    metadata: _Said | None = None


class _Owned(msgspec.Struct, gc=False):
    """The fields of an entry ``owners`` reads (a value that is no object, or whose fields
    have other types, is read whole instead)."""

    data: _Data | None | msgspec.UnsetType = msgspec.field(name="__data__", default=msgspec.UNSET)
    metadata: _Said | None = None
    node_ids: Any = None
    ref_doc_id: Any = None


Fields = tuple[str, str, "str | None", Any, Any, Any]
"""(collection, key, the metadata's ``user_id`` if a string, ``node_ids``, ``ref_doc_id``, the
value itself when it is no object): what ``owners`` reads of an entry."""


def _fields(coll: str, key: str, value: Any) -> Fields:
    user = _meta(value).get("user_id")
    if isinstance(value, dict):
        return coll, key, user if isinstance(user, str) else None, value.get("node_ids"), value.get("ref_doc_id"), None
    return coll, key, None, None, None, value


@dataclass
class _OwnerColumns:
    """``_fields`` of one collection's entries, as columns (``_owners`` reads them in loops of
    their own: a million entries in well under a second)."""

    coll: str
    keys: list[str]
    users: list[str | None]
    ids: list[Any]
    refs: list[Any]
    values: list[Any]

    @classmethod
    def of(cls, ix: JsonIndex, coll: str) -> _OwnerColumns:
        """Decoded at C speed as ``_Owned`` where the file is indexed as columns and every value
        fits (else as plain values, else entry by entry)."""
        keys = [ix.key(i) for i in ix.members(coll)]
        got = ix.typed(coll, _Owned)
        if got is None:
            plain = ix.typed(coll, Any)
            vals = plain if plain is not None else [ix.value(ix.entry(i)) for i in ix.members(coll)]
            return cls.of_fields(coll, [_fields(coll, k, v) for k, v in zip(keys, vals, strict=True)])
        metas = [v.metadata if v.data is msgspec.UNSET else (v.data.metadata if v.data is not None else None)
                 for v in got]
        users = [u if isinstance(u := (m.user_id if m is not None else None), str) else None for m in metas]
        return cls(coll, keys, users, [v.node_ids for v in got], [v.ref_doc_id for v in got], [None] * len(got))

    @classmethod
    def of_fields(cls, coll: str, fields: Sequence[Fields]) -> _OwnerColumns:
        return cls(coll, [f[1] for f in fields], [f[2] for f in fields], [f[3] for f in fields],
                   [f[4] for f in fields], [f[5] for f in fields])


_OWNED = "owner columns"


def _all_fields(idx: dict[str, JsonIndex]) -> list[_OwnerColumns]:
    """Every store's owner columns, kept with its index (an erasure's rewrite derives the new
    file's from them: ``_spliced_owners``)."""
    for ix in idx.values():
        if _OWNED not in ix.memo:
            ix.memo[_OWNED] = [_OwnerColumns.of(ix, coll) for coll in _owner_colls(ix)]
    return [c for ix in idx.values() for c in ix.memo[_OWNED]]


def _spliced_owners(ix: JsonIndex, owned: list[_OwnerColumns], changes: Mapping[int, str | None]) -> list[_OwnerColumns]:
    """The owner columns of the file ``ix.splice_parts(changes)`` wrote: the removed entries left
    out, a changed one's fields read from its new text."""
    out: list[_OwnerColumns] = []
    for c in owned:
        span = ix.members(c.coll)
        mine = {i - span.start: t for i, t in changes.items() if i in span}
        if not mine:
            out.append(c)
            continue
        new = _OwnerColumns(c.coll, list(c.keys), list(c.users), list(c.ids), list(c.refs), list(c.values))
        for j, text in sorted(mine.items(), reverse=True):
            if text is None:
                for col in (new.keys, new.users, new.ids, new.refs, new.values):
                    del col[j]
                continue
            head = ix.entry(span.start + j).vstart - ix.entry(span.start + j).start
            _, _, new.users[j], new.ids[j], new.refs[j], new.values[j] = _fields(c.coll, c.keys[j], json.loads(text[head:]))
        out.append(new)
    return out


def _owners(columns: Iterable[_OwnerColumns]) -> dict[str, str]:
    """Node or ref doc id -> its user, from the owner collections' fields (in file order): a ref
    doc's metadata ``user_id`` (else the ``USER/…`` prefix of its id), given to every node it
    lists; a node's own metadata ``user_id``; then a node whose ref doc (``text_id_to_ref_doc_id``,
    ``ref_doc_id``) has a user takes that one. Each collection in one comprehension (no frame
    per entry: a million entries in well under a second)."""
    refs: dict[str, str] = {}
    nodes: dict[str, str] = {}
    columns = list(columns)
    for c in columns:
        if c.coll == "docstore/ref_doc_info":
            who = [u if u is not None else (k.split("/", 1)[0] if "/" in k else None)
                   for k, u in zip(c.keys, c.users, strict=True)]
            refs.update({k: o for k, o in zip(c.keys, who, strict=True) if o is not None})
            nodes.update({str(i): o for ids, o in zip(c.ids, who, strict=True) if o is not None for i in ids or ()})
        elif c.coll in ("docstore/data", "metadata_dict"):
            nodes.update({k: u for k, u in zip(c.keys, c.users, strict=True) if u is not None})
    for c in columns:  # a value in ``refs`` is a string (only a string equals a key)
        if c.coll == "text_id_to_ref_doc_id":
            nodes.update({k: refs[v] for k, v in zip(c.keys, c.values, strict=True) if v in refs})
        if c.coll in ("docstore/metadata", "metadata_dict"):
            nodes.update({k: refs[r] for k, r in zip(c.keys, c.refs, strict=True) if r in refs})
    return {**nodes, **refs}


# ---------------------------------------------------------------- the rule for one user
_REF_DOCS = "docstore/ref_doc_info"
_SAID = ("docstore/data", "metadata_dict")
"""Collections whose entry's own metadata ``user_id`` gives its node a user (``_owners``' first loop)."""
_POINTING = ("text_id_to_ref_doc_id", "docstore/metadata", "metadata_dict")
"""Collections whose entry names its node's ref doc (``_owners``' second loop)."""
NARROWED_MAX = 50_000
"""Candidate entries above which ``user_keys`` gives up (the columns read every entry faster
than one ``json.loads`` each)."""

Order = list[tuple[JsonIndex, str]]


def _order(idx: Mapping[str, JsonIndex]) -> Order:
    """The owner collections in the order ``_all_fields`` reads them (``_owners``' order)."""
    return [(ix, c) for ix in idx.values() for c in _owner_colls(ix)]


def _simple(s: str) -> bool:
    """A string JSON writes as itself between quotes, up to ``\\uXXXX`` and ``\\/`` escapes."""
    return '"' not in s and "\\" not in s and all(ord(c) >= 0x20 for c in s)


def _contents(s: str) -> list[str]:
    """The texts a ``_simple`` string takes between its quotes in a JSON file: itself, its
    non-ASCII as ``\\uXXXX`` (lower and upper hex), each with ``/`` as ``\\/``."""
    lower = json.dumps(s)[1:-1]
    out = [s, lower, _upper_hex(lower)]
    return list(dict.fromkeys(out + [f.replace("/", "\\/") for f in out if "/" in f]))


def _upper_hex(text: str) -> str:
    parts = text.split("\\u")
    return parts[0] + "".join("\\u" + p[:4].upper() + p[4:] for p in parts[1:])


def _entries(order: Order, colls: Sequence[str], keys: Iterable[str]) -> list[tuple[JsonIndex, str, int]]:
    """(index, collection, entry) of each entry of ``colls`` whose key is one of ``keys``, in
    the rule's order."""
    want = set(keys)
    out = []
    for ix, c in order:
        if c in colls and want:
            span = ix.members(c)
            out += [(ix, c, i) for i in ix.positions(want) if i in span]
    return out


def _read(ix: JsonIndex, c: str, i: int) -> Fields:
    return _fields(c, ix.key(i), ix.value(ix.entry(i)))


def _who(f: Fields) -> str | None:
    """A ref doc's user as ``_owners`` reads it: its metadata's, else its id's ``USER/`` prefix."""
    return f[2] if f[2] is not None else (f[1].split("/", 1)[0] if "/" in f[1] else None)


def _ref_docs(order: Order, keys: Iterable[str]) -> list[Fields]:
    """The ref doc entries whose id is one of ``keys``, decoded, in the rule's order."""
    return [_read(ix, c, i) for ix, c, i in _entries(order, (_REF_DOCS,), keys)]


def _refs(docs: Iterable[Fields]) -> dict[str, str]:
    """``_owners``' ``refs`` of these ref doc entries: each id's last entry with a user."""
    return {f[1]: who for f in docs if (who := _who(f)) is not None}


def _listed(x: str) -> list[str]:
    """What a ref doc's ``node_ids`` may hold in its bytes for the node ``x`` (``str`` of the
    value: a string's text, a number's, ``true``/``false``/``null`` for ``True``/``False``/``None``)."""
    tokens = {"True": "true", "False": "false", "None": "null"}
    return _contents(x) + ([tokens[x]] if x in tokens else [])


def owners_for(idx: Mapping[str, JsonIndex], keys: Iterable[str]) -> dict[str, str | None] | None:
    """``_owners(...)`` of each of ``keys`` (None: no user), read from the entries that can
    decide it only: the ref docs of that id, the ref docs whose bytes hold the key (a listing in
    ``node_ids``), the key's own entries, and the ref docs they name. None where a file is not
    indexed as columns, a key is not ``_simple``, or there are more than ``NARROWED_MAX`` keys
    (a literal many records hold: every owner read as columns is then faster)."""
    want = set(keys)
    order = _order(idx)
    if len(want) > NARROWED_MAX or not all(ix.columnar for ix in idx.values()) or not all(map(_simple, want)):
        return None
    refs = _refs(_ref_docs(order, want))
    nodes: dict[str, str] = {}
    forms = [t for k in sorted(want) for t in _listed(k)]
    for ix, c in order:
        if c == _REF_DOCS:
            for i in sorted(ix.hit_in(forms, [c]) or ()) if forms else ():
                f = _read(ix, c, i)
                if (who := _who(f)) is not None:
                    nodes.update({str(x): who for x in f[3] or () if str(x) in want})
        elif c in _SAID:
            for _, _, i in _entries([(ix, c)], _SAID, want):
                f = _read(ix, c, i)
                if f[2] is not None:
                    nodes[f[1]] = f[2]
    pointing = [(ix, c, i, _read(ix, c, i)) for ix, c, i in _entries(order, _POINTING, want)]
    named = {f[5] if c == "text_id_to_ref_doc_id" else f[4] for _, c, _, f in pointing}
    named_refs = _refs(_ref_docs(order, {r for r in named if isinstance(r, str)}))
    for _, c, _, f in pointing:
        r = f[5] if c == "text_id_to_ref_doc_id" else f[4]
        if isinstance(r, str) and r in named_refs:
            nodes[f[1]] = named_refs[r]
    return {k: refs[k] if k in refs else nodes.get(k) for k in want}


def user_keys(idx: Mapping[str, JsonIndex], user: str) -> set[str] | None:
    """The keys ``_owners`` gives ``user`` (``{k for k, u in owners.items() if u == user}``),
    found without reading every entry: the owner collections' entries whose bytes hold the
    user as a value (``"user"``) or as an id's prefix (``"user/``), the nodes the user's ref
    docs list, the entries naming one of the user's ref docs; each candidate's owner then
    read by ``owners_for``. None where that cannot be done (a file not indexed as columns, a
    user or ref doc id JSON would escape, more than ``NARROWED_MAX`` candidates): then read
    every entry."""
    order = _order(idx)
    if not all(ix.columnar for ix in idx.values()) or not _simple(user):
        return None
    said = [q + t + end for t in _contents(user) for q, end in (('"', '"'), ('"', "/"), ('"', "\\/"))]
    cand: set[str] = set()
    for ix in idx.values():
        found = ix.hit_in(said, _owner_colls(ix)) or set()
        if len(found) > NARROWED_MAX:
            return None
        cand.update(ix.key(i) for i in found)
    docs = _ref_docs(order, cand)
    refs = {r for r, who in _refs(docs).items() if who == user}
    cand.update(str(x) for f in docs if _who(f) == user for x in f[3] or ())
    if not all(_simple(r) for r in refs):
        return None
    named = [f'"{t}"' for r in sorted(refs) for t in _contents(r)]
    for ix in idx.values():
        if named:
            cand.update(ix.key(i) for i in ix.hit_in(named, [c for c in _owner_colls(ix) if c in _POINTING]) or ())
    if len(cand) > NARROWED_MAX or not all(_simple(k) for k in cand):
        return None
    own = owners_for(idx, cand)
    return None if own is None else {k for k, u in own.items() if u == user}
