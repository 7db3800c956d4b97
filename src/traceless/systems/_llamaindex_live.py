"""Scan and erase of a live LlamaIndex instance: the ``Memory`` chat store (SQLite, table
``llama_index_memory``, a row's user is its ``key``: the memory's ``session_id``) and the
JSON stores ``StorageContext.persist`` writes (``docstore.json``, ``index_store.json``,
``*vector_store.json``, ``graph_store.json``).

A JSON record is one entry of one collection (``docstore/data`` node, ``docstore/ref_doc_info``,
``docstore/metadata``, a vector store's ``embedding_dict``/``metadata_dict``/
``text_id_to_ref_doc_id`` entry, one node id in an index struct's ``nodes_dict``). It is the
user's when its node or ref doc is: a ref doc whose metadata ``user_id`` is the user (or whose
id is ``USER/…``, the adapter's ids), and every node of such a doc. Files are only read here;
``rewrite_json`` writes a new file and renames it over the old one.
"""

from __future__ import annotations

import functools
import itertools
import json
import os
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from traceless.errors import ConfigError
from traceless.systems import LiveInstance, Op, Record, Remove, StoreOutcome
from traceless.systems import _llamaindex_chat as li_chat
from traceless.systems import sqlite as live
from traceless.systems._llamaindex_owners import (
    _OWNED,
    _OWNER_COLLS,
    _all_fields,
    _fields,
    _OwnerColumns,
    _owners,
    _spliced_owners,
    owners_for,
    user_keys,
)
from traceless.systems.json_index import LAZY, Entry, JsonIndex
from traceless.systems.kernel import (
    StoreDigest,
    count_literals,
    digest,
    literal_forms,
    record_hash,
    replace_literals,
    stream_hash,
)

__all__ = ["CHAT_TABLE", "JsonRecord", "LlamaIndexInstance", "clear_kept", "erase_json", "indexed_refs", "json_files", "owned_refs",
           "owners", "records"]

CHAT_TABLE = "llama_index_memory"
CHAT_STORE = "chat_store"
INDEX_COLL = "index_store/data"
_INDEX_NODES = "nodes_dict"

@dataclass(frozen=True)
class JsonRecord:
    """One entry of one collection of one JSON store."""

    store: str
    collection: str
    key: str
    value: Any

    @property
    def record_id(self) -> str:
        return f"{self.collection}:{self.key}"

    def text(self) -> str:
        return json.dumps([self.collection, self.key, self.value], ensure_ascii=False, sort_keys=True)


def json_files(persist: Path) -> dict[str, Path]:
    """Store name → file of every JSON store in the persist dir (``default__vector_store.json`` →
    ``vector_store``, as the audit names it; another vector store keeps its file's stem)."""
    out: dict[str, Path] = {}
    for p in sorted(persist.glob("*.json")) if persist.is_dir() else []:
        out["vector_store" if p.name == "default__vector_store.json" else p.stem] = p
    return out


def _index(path: Path) -> JsonIndex:
    try:
        return JsonIndex(path)
    except (ValueError, UnicodeDecodeError, IndexError):
        raise ConfigError(f"llamaindex: {path} is not complete JSON: a running application is writing it (LlamaIndex "
                          "persists the whole index from memory). Stop the application, then run the same command "
                          "again: an interrupted erasure is completed by the re-run") from None


_CACHE: dict[Path, tuple[tuple[int, int, int], JsonIndex]] = {}
_CACHED_FILES = 8
"""Files whose index is kept (an instance has five JSON stores): an audit of many instances keeps
only the last one's."""


def _stamp(path: Path) -> tuple[int, int, int]:
    st = path.stat()
    return st.st_size, st.st_mtime_ns, st.st_ino


def cached(path: Path) -> JsonIndex:
    """The file's index, kept (one per path) while its size, mtime and inode stay the same: an
    erasure reads the instance a dozen times (plan, scope check, digests, rounds, re-scan), and
    changes a file only by renaming a new one over it."""
    stamp = _stamp(path)
    hit = _CACHE.get(path)
    if hit is None or hit[0] != stamp:
        hit = _keep(path, stamp, _index(path))
    return hit[1]


def _keep(path: Path, stamp: tuple[int, int, int], ix: JsonIndex) -> tuple[tuple[int, int, int], JsonIndex]:
    _CACHE.pop(path, None)
    while len(_CACHE) >= _CACHED_FILES:  # the oldest first: one instance's stores at a time
        _CACHE.pop(next(iter(_CACHE)))
    _CACHE[path] = (stamp, ix)
    return _CACHE[path]


_OWNERS: dict[tuple[tuple[Path, tuple[int, int, int]], ...], dict[str, str]] = {}


def _kept_key(idx: dict[str, JsonIndex]) -> tuple[tuple[Path, tuple[int, int, int]], ...] | None:
    """What an answer read from these indexes is kept by: each file's path and stamp; None where
    an index is not the one kept for its file (nothing to key it by)."""
    if not all(ix.path in _CACHE and _CACHE[ix.path][1] is ix for ix in idx.values()):
        return None
    return tuple((ix.path, _CACHE[ix.path][0]) for ix in idx.values())


def owners_of(idx: dict[str, JsonIndex]) -> dict[str, str]:
    """``owners`` of the indexed stores, kept (the last one) while no file changed."""
    key = _kept_key(idx)
    if key is None:
        return _owners(_all_fields(idx))
    if key not in _OWNERS:
        _OWNERS.clear()
        _OWNERS[key] = _owners(_all_fields(idx))
    return _OWNERS[key]


def clear_kept() -> None:
    """Forget every index, owners, struct and chat answer kept: what an attached instance read is
    read again by the next one (``LlamaIndexSystem.close``)."""
    _CACHE.clear()
    _OWNERS.clear()
    _MINE.clear()
    _MEMO.clear()
    _struct.cache_clear()
    li_chat.clear_kept()


def indexes(persist: Path) -> dict[str, JsonIndex]:
    """Every JSON store, indexed by entry (read-only)."""
    return {store: _index(p) for store, p in json_files(persist).items()}


def _index_nodes(entry: Any) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """(the index struct, its ``nodes_dict``) of an ``index_store/data`` entry: read-only, one
    decode kept per struct text (``_struct``: a struct of a million nodes is read by every
    scan, plan and digest of an erasure)."""
    if not isinstance(entry, dict) or not isinstance(entry.get("__data__"), str):
        return None
    return _struct(entry["__data__"])


@functools.lru_cache(maxsize=4)
def _struct(text: str) -> tuple[dict[str, Any], dict[str, Any]] | None:
    data = json.loads(text)
    nodes = data.get(_INDEX_NODES) if isinstance(data, dict) else None
    return (data, nodes) if isinstance(nodes, dict) else None


def _records_of(store: str, idx: JsonIndex, e: Entry, node: Callable[[str, Any], bool] | None = None,
                whole: bool = True) -> Iterator[JsonRecord]:
    """The records of one entry: itself, or an index struct (unless not ``whole``) and (those
    ``node`` keeps of) its nodes."""
    value = idx.value(e)
    parsed = _index_nodes(value) if e.coll == INDEX_COLL and e.coll in idx.spans else None
    if parsed is None:
        yield JsonRecord(store, e.coll, e.key, value)
        return
    data, nodes = parsed
    if whole:
        yield JsonRecord(store, e.coll, e.key, {k: v for k, v in data.items() if k != _INDEX_NODES})
    for node_id, ref in nodes.items():
        if node is None or node(node_id, ref):
            yield JsonRecord(store, f"{e.coll}/{e.key}/{_INDEX_NODES}", node_id, ref)


def records(persist: Path, idx: dict[str, JsonIndex] | None = None) -> dict[str, list[JsonRecord]]:
    """Every record of every JSON store (read-only)."""
    idx = indexes(persist) if idx is None else idx
    return {store: [r for e in ix.entries for r in _records_of(store, ix, e)] for store, ix in idx.items()}


def owner_records(idx: dict[str, JsonIndex]) -> dict[str, list[JsonRecord]]:
    """The records ``owners`` reads (the collections that say a node's or a ref doc's user)."""
    return {store: [JsonRecord(store, e.coll, e.key, ix.value(e)) for e in ix.entries if e.coll in _OWNER_COLLS]
            for store, ix in idx.items()}


def owners(recs: dict[str, list[JsonRecord]]) -> dict[str, str]:
    """Node or ref doc id → its user: a ref doc's metadata ``user_id`` (else the ``USER/…`` prefix
    of its id, the adapter's ids), inherited by every node of the doc."""
    runs = (run for rs in recs.values() for run in itertools.groupby(rs, key=lambda r: r.collection))
    return _owners(_OwnerColumns.of_fields(c, [_fields(c, r.key, r.value) for r in run]) for c, run in runs)


def owned_refs(recs: dict[str, list[JsonRecord]], user: str) -> set[str]:
    """The user's ref doc ids (what ``delete_ref_doc`` takes)."""
    own = owners(recs)
    return {r.key for r in recs.get("docstore", []) if r.collection == "docstore/ref_doc_info" and own.get(r.key) == user}


def indexed_refs(recs: dict[str, list[JsonRecord]]) -> set[str]:
    """The ref docs the vector stores still hold nodes of (``delete_ref_doc`` raises on the others)."""
    return {str(r.value) for rs in recs.values() for r in rs if r.collection == "text_id_to_ref_doc_id"}


def _plain(literals: Sequence[str], names: Iterable[str]) -> bool:
    """Every literal found by its forms in a file's text exactly where a record's text
    (``JsonRecord.text``) holds it: none holds a character JSON escapes or writes as syntax
    (``"``, ``\\``, a control character, a bracket), nor a number list's comma, nor occurs in
    a store's or collection's name (which every record's text repeats)."""
    names = list(names)
    for lit in literals:
        if any(c in lit for c in '"\\{}[]') or any(ord(c) < 0x20 for c in lit):
            return False
        if "," in lit and not lit.strip("0123456789.,-+eE "):
            return False
        if any(f in n for f in literal_forms(lit) for n in names):
            return False
    return True


def text_forms(literals: Sequence[str]) -> list[str]:
    """The forms a plain literal takes in a JSON file's text: the kernel's (``literal_forms``),
    and each with ``/`` escaped (``\\/``, which JSON allows)."""
    out = [f for lit in literals for f in literal_forms(lit)]
    return list(dict.fromkeys(out + [f.replace("/", "\\/") for f in out if "/" in f]))


def _structs(ix: JsonIndex) -> range:
    """The entries of the index structs' collection (``index_store/data``) when it is an object."""
    return ix.members(INDEX_COLL) if INDEX_COLL in ix.spans else range(0)


def _count(ix: JsonIndex, e: Entry) -> int:
    """The records of one entry (an index struct: itself and each of its nodes)."""
    parsed = _index_nodes(e.value) if e.coll == INDEX_COLL and e.coll in ix.spans else None
    return 1 if parsed is None else 1 + len(parsed[1])


def _narrowed(idx: dict[str, JsonIndex], mine: set[str],
              literals: Sequence[str]) -> dict[str, list[JsonRecord]]:
    """The records of the user (``mine``: the keys the owner rule gives the user) and those whose
    entry's text holds a literal's form."""
    forms = text_forms(literals)
    out: dict[str, list[JsonRecord]] = {}
    for store, ix in idx.items():
        hits = ix.hit(forms)
        recs = out.setdefault(store, [])
        for i in sorted(hits | set(ix.positions(mine)) | set(_structs(ix))):
            e = ix.entry(i)
            if e.coll == INDEX_COLL and e.coll in ix.spans and (i in hits or mine):
                hit = i in hits

                def node(k: str, v: Any, hit: bool = hit) -> bool:
                    return k in mine or (hit and any(f in k or f in json.dumps(v, ensure_ascii=False) for f in forms))
                recs += _records_of(store, ix, e, node, whole=hit or e.key in mine)
            elif i in hits or e.key in mine:
                recs += _records_of(store, ix, e)
    return out


_MEMO: dict[tuple[str, str], list[tuple[str, str, str]]] = {}
"""The last digest's texts per (store, entry as the file holds it): the digest after an erasure
makes again only those of the entries it changed."""


def _digest_texts(store: str, ix: JsonIndex, e: Entry, memo: dict[tuple[str, str], list[tuple[str, str, str]]],
                  ) -> list[tuple[str, str, str]]:
    """``_entry_texts``, taken from the last digest's where the entry's bytes are the same."""
    raw = (store, ix.raw(e))
    got = _MEMO.get(raw)
    if got is None:
        got = list(_entry_texts(store, ix, e))
    memo[raw] = got
    return got


def _entry_texts(store: str, ix: JsonIndex, e: Entry) -> Iterator[tuple[str, str, str]]:
    """(record id, key, ``JsonRecord.text``) of each record of an entry; an embedding's text
    from its bytes (what ``json.dumps`` makes of it in a file ``json.dump`` wrote)."""
    if e.value is LAZY:
        head = json.dumps([e.coll, e.key], ensure_ascii=False)[:-1]
        yield f"{e.coll}:{e.key}", e.key, f"{head}, {ix.slice(e.vstart, e.end)}]"
        return
    for r in _records_of(store, ix, e):
        yield r.record_id, r.key, r.text()


def _left_out(store: str, ix: JsonIndex, own: dict[str, str], user: str | None, mine: set[str],
              skip: set[tuple[str, str]]) -> set[int]:
    """Indexes of the entries the bystander digest leaves out: the user's and those ``skip`` names."""
    keys = mine | {rid.rpartition(":")[2] for s, rid in skip if s == store}
    return {i for i in ix.positions(keys) if (user is not None and own.get(ix.key(i)) == user)
            or (store, f"{ix.entry(i).coll}:{ix.key(i)}") in skip}


def _parts(coll: str, parts: Sequence[tuple[int, str]]) -> list[str]:
    """A stream's digest entries: its first part (``coll``, entries, hash), the entries after
    the part an interrupted run digested (``+``: what was only added meanwhile)."""
    first, *rest = parts
    return [f"{coll}\t{first[0]}\t{first[1]}", *(f"+{coll}\t{first[0]}\t{n}\t{sha}" for n, sha in rest)]


def stream_counts(digest: Sequence[str]) -> dict[str, int]:
    """Collection → the entries its stream digest covered (``stream_digest``'s first parts)."""
    out: dict[str, int] = {}
    for d in digest:  # a digest per record (the chat store's, a JSON store's read per entry): no count
        if d[:1] not in ("+", "#") and d.count("\t") >= 2:
            coll, n, _ = d.rsplit("\t", 2)
            out[coll] = int(n)
    return out


def _struct_parts(store: str, ix: JsonIndex, e: Entry, own: dict[str, str], user: str | None,
                  skip: set[tuple[str, str]], literals: Sequence[str], split: Mapping[str, int]) -> list[str] | None:
    """One index struct's digest entries: the struct less its nodes with the nodes that are not
    the user's nor in ``skip`` (in their order, the literals replaced; the first ``split[coll]``
    apart from those after them); None for an entry that is no index struct."""
    parsed = _index_nodes(e.value)
    if parsed is None:
        return None
    data, nodes = parsed
    coll = f"{e.coll}/{e.key}/{_INDEX_NODES}"
    kept = [(k, v) for k, v in nodes.items()
            if not (user is not None and own.get(k) == user) and (store, f"{coll}:{k}") not in skip]
    head = {k: v for k, v in data.items() if k != _INDEX_NODES}

    def sha(items: list[tuple[str, Any]], *more: Any) -> str:
        h = stream_hash()
        h.update(replace_literals(json.dumps([*more, items], ensure_ascii=False), literals).encode("utf-8"))
        return str(h.hexdigest())

    n = split.get(coll, len(kept))
    parts = [(min(n, len(kept)), sha(kept[:n], e.coll, e.key, head))]
    if len(kept) > n:
        parts.append((len(kept) - n, sha(kept[n:])))
    return _parts(coll, parts)


def stream_digest(store: str, ix: JsonIndex, own: dict[str, str], user: str | None, mine: set[str],
                  skip: set[tuple[str, str]], literals: Sequence[str], split: Mapping[str, int]) -> StoreDigest:
    """The bystander digest of one JSON store written as ``json.dump`` writes (``standard``), the
    literals plain, without per-entry work: per collection the SHA-256 of its bystander entries'
    bytes as the file joins them (``collection_digest``), an entry holding a literal's form as
    ``json.dump`` writes its value with the literals replaced (a planned rewrite: the same text
    before and after); per index struct one of its nodes. ``erase_json`` splices the file, every
    entry it does not change keeping its bytes and its place: a removed, changed or moved
    bystander changes its collection's digest. ``split`` (a re-run: ``stream_counts`` of the
    interrupted run's digest): each collection's first entries apart from those the
    application appended since. A collection that is no object: a digest per entry."""
    out: list[str] = []
    texts: dict[int, str | None] = dict.fromkeys(_left_out(store, ix, own, user, mine, skip))
    for i in ix.hit(text_forms(literals)) - texts.keys():
        e = ix.entry(i)
        texts[i] = replace_literals(_entry_text(ix, e, ix.value(e)), literals)
    for i in ix.members(INDEX_COLL) if INDEX_COLL in ix.spans else ():
        parts = None if texts.get(i, "") is None else _struct_parts(store, ix, ix.entry(i), own, user, skip,
                                                                    literals, split)
        if parts is not None:
            out += parts
            texts[i] = None
    for coll in ix.collections:
        if coll in ix.spans:
            out += _parts(coll, ix.collection_digest(coll, texts, split.get(coll)))
            continue
        for i in ix.members(coll):
            for rid, key, text in _entry_texts(store, ix, ix.entry(i)):
                if (store, rid) not in skip and not (user is not None and own.get(key) == user):
                    row = f"{own.get(key)}\tentry={replace_literals(text, literals)}"
                    out.append("#" + record_hash(row))
    return tuple(sorted(out))


def _entry_rows(idx: dict[str, JsonIndex], own: dict[str, str], user: str | None, literals: Sequence[str],
                skip: set[tuple[str, str]], plain: bool) -> list[tuple[tuple[str, str], str]]:
    """The JSON stores' bystander rows, one per record, as ``kernel.bystander_rows`` makes them
    (the literals replaced only in an entry whose text holds one when ``plain``)."""
    out: list[tuple[tuple[str, str], str]] = []
    memo: dict[tuple[str, str], list[tuple[str, str, str]]] = {}
    for store, ix in idx.items():
        hits = ix.hit(text_forms(literals)) if plain else None
        for i, e in enumerate(ix.entries):
            for rid, key, text in _digest_texts(store, ix, e, memo):
                who = own.get(key)
                if (store, rid) in skip or (user is not None and who == user):
                    continue
                if hits is None or i in hits:
                    text = replace_literals(text, literals)
                out.append(((store, rid), f"{who}\tentry={text}"))
    _MEMO.clear()
    _MEMO.update(memo)
    return out


def _user_owners(idx: dict[str, JsonIndex], user: str | None) -> tuple[set[str], dict[str, str]]:
    """(the keys the owner rule gives ``user``, an owners mapping exact for them): read for the
    user only (``user_keys``) where it can be, else every owner (``owners_of``)."""
    if user is None:
        return set(), {}
    key = _kept_key(idx)
    if key is not None and (key, user) in _MINE:
        mine: set[str] | None = _MINE[(key, user)]
    else:
        mine = user_keys(idx, user)
        if key is not None and mine is not None:
            _MINE.clear()
            _MINE[(key, user)] = mine
    if mine is None:
        own = owners_of(idx)
        return {k for k, u in own.items() if u == user}, own
    return set(mine), dict.fromkeys(mine, user)


_MINE: dict[tuple[tuple[tuple[Path, tuple[int, int, int]], ...], str], set[str]] = {}
"""``user_keys`` of the last user read, kept while no file changed (an erasure reads the user's
records to plan, to check its scope, to digest the bystanders, after each round)."""


def _chat_owner(table: str, row: dict[str, Any]) -> str | None:
    key = row.get("key")
    return key if table == CHAT_TABLE and isinstance(key, str) else None


def _chat_store(table: str) -> str:
    return CHAT_STORE if table == CHAT_TABLE else f"chat_db:{table}"


class LlamaIndexInstance(LiveInstance):
    """A live LlamaIndex instance as the erasure kernel reads and changes it: the chat store's
    rows (``SqliteFile``; table ``llama_index_memory`` is the store ``chat_store``) and every
    entry of every JSON store; ``apply`` removes or rewrites entries and writes each JSON store
    to a new file renamed over the old one.

    Given a user or literals, only the user's records and those that may hold a literal are
    read: the chat store's by the key index and the file's pages (``_llamaindex_chat``), the
    JSON stores' found in each file's bytes (``JsonIndex``: every entry's span, from msgspec's
    columns for a file ``json.dump`` wrote; an embedding never decoded) and only those decoded
    into records; the counts come from the same index (``counts``)."""

    others_policy = "rewrite"

    def __init__(self, chat_db: Path | None, persist: Path) -> None:
        self.chat = live.SqliteFile(chat_db, _chat_owner) if chat_db is not None and chat_db.is_file() else None
        self.persist = persist

    def stores(self) -> list[str]:
        chat = [_chat_store(t) for t in self.chat.stores()] if self.chat is not None else []
        return chat + list(json_files(self.persist))

    def indexes(self) -> dict[str, JsonIndex]:
        """The JSON stores indexed (``cached``: read again only when a file changed)."""
        return {store: cached(p) for store, p in json_files(self.persist).items()}

    def counts(self) -> dict[str, int]:
        chat = {_chat_store(t): n for t, n in li_chat.counts(self.chat.path).items()} if self.chat is not None else {}
        return chat | {store: len(ix) - len(_structs(ix)) + sum(_count(ix, ix.entry(i)) for i in _structs(ix))
                       for store, ix in self.indexes().items()}

    def _plain(self, idx: dict[str, JsonIndex], literals: Sequence[str]) -> bool:
        """The literals found in the files' text where the records' texts hold them (``_plain``)."""
        names = [*self.stores(), *(c for ix in idx.values() for c in ix.collections),
                 *(f"{INDEX_COLL}/{ix.key(i)}/{_INDEX_NODES}" for ix in idx.values() for i in ix.members(INDEX_COLL))]
        return _plain(literals, names) and all(ix.standard for ix in idx.values())

    def records(self, user: str | None = None, literals: Sequence[str] = ()) -> Iterator[Record]:
        idx = self.indexes()
        narrow = (user is not None or bool(literals)) and self._plain(idx, literals)
        if self.chat is not None:
            rows = (li_chat.records(self.chat.path, _chat_owner, {CHAT_TABLE: "key"}, user, literals) if narrow
                    else self.chat.records())
            for r in rows:
                yield Record(_chat_store(r.store), r.id, r.owner, r.fields, ref=r)
        if not narrow:
            own = owners_of(idx)
            recs = records(self.persist, idx)
        else:
            mine, own = _user_owners(idx, user)
            recs = _narrowed(idx, mine, literals)
            rest = owners_for(idx, {j.key for rs in recs.values() for j in rs} - mine)
            own = owners_of(idx) if rest is None else {**{k: u for k, u in rest.items() if u is not None}, **own}
        for store, rs in recs.items():
            for j in rs:
                yield Record(store, j.record_id, own.get(j.key), {"entry": j.text()}, ref=j)

    def server_bystanders(self, user: str | None, literals: Sequence[str],
                          removed: Iterable[tuple[str, str]]) -> list[tuple[tuple[str, str], str]]:
        """``kernel.bystander_rows``' texts, made where they are cheap: the chat rows' by SQLite,
        an embedding's from its bytes in the file (never decoded), the literals replaced only in
        an entry whose text holds one (every entry when a literal is not ``_plain``)."""
        skip = set(removed)
        idx = self.indexes()
        return self._chat_rows(user, literals, skip) + _entry_rows(idx, owners_of(idx), user, literals, skip,
                                                                   self._plain(idx, literals))

    def _chat_rows(self, user: str | None, literals: Sequence[str],
                   skip: set[tuple[str, str]]) -> list[tuple[tuple[str, str], str]]:
        return (li_chat.bystander_rows(self.chat.path, _chat_owner, {CHAT_TABLE: "key"}, user, literals, skip,
                                       _chat_store) if self.chat is not None else [])

    def bystander_digests(self, user: str | None, literals: Sequence[str], removed: Iterable[tuple[str, str]],
                          resumed: Mapping[str, Mapping[str, int]] | None = None) -> dict[str, StoreDigest]:
        """Per store, the bystander digest the erasure compares, as containers where it can: the
        chat table one hash of its rows in rowid order (``table_streams``; a table without a
        rowid per row, ``kernel.digest``); each JSON store written as ``json.dump`` writes,
        the literals plain, ``stream_digest`` (no per-entry work); otherwise per entry.
        ``resumed``: per store, the counts an interrupted run's digest holds (``stream_counts``)."""
        skip = set(removed)
        idx = self.indexes()
        plain = self._plain(idx, literals)
        # the digest texts name owners only in a collection that is no object, or when not plain
        named = not plain or any(c not in ix.spans for ix in idx.values() for c in ix.collections)
        resumed = resumed or {}
        with ThreadPoolExecutor(1) as pool:  # SQLite and the JSON digests' hashing run beside each other
            chat = (pool.submit(li_chat.table_streams, self.chat.path, {CHAT_TABLE: "key"}, user, literals, skip,
                                _chat_store, {s: dict(c) for s, c in resumed.items()}) if self.chat is not None else None)
            if named:
                own = owners_of(idx)
                mine = {k for k, u in own.items() if u == user} if user is not None else set()
            else:
                mine, own = _user_owners(idx, user)
            json_digests = {store: stream_digest(store, ix, own, user, mine, skip, literals, resumed.get(store, {}))
                            for store, ix in idx.items()} if plain else {}
            streams = chat.result() if chat is not None else {}
        rows = (self._chat_rows(user, literals, skip) if None in streams.values() else []) + (
            [] if plain else _entry_rows(idx, own, user, literals, skip, False))
        texts: dict[str, list[str]] = {s: [] for s in self.stores()}
        for (store, _), text in rows:
            if streams.get(store) is None:
                texts.setdefault(store, []).append(text)
        out = {store: digest(ts) for store, ts in texts.items()}
        out.update({store: tuple(_parts(store, parts)) for store, parts in streams.items() if parts is not None})
        out.update(json_digests)
        return out

    def compaction(self) -> list[str]:
        chat = self.chat.compaction() if self.chat is not None else []
        return chat + [f"rewrite {p.name}" for p in json_files(self.persist).values()]

    def files(self) -> list[Path]:
        chat = self.chat.files() if self.chat is not None else []
        return chat + (sorted(p for p in self.persist.rglob("*") if p.is_file()) if self.persist.is_dir() else [])

    def apply(self, ops: Sequence[Op], literals: Sequence[str]) -> list[StoreOutcome]:
        json_stores = json_files(self.persist)
        chat_ops = [o for o in ops if o.record.store not in json_stores]
        out: list[StoreOutcome] = []
        if self.chat is not None and chat_ops:
            inner = [type(o)(o.record.ref or Record(CHAT_TABLE if o.record.store == CHAT_STORE else
                                                    o.record.store.removeprefix("chat_db:"), o.record.id, None, {}),
                             o.reason) for o in chat_ops]
            out += [o.model_copy(update={"store": _chat_store(o.store)}) for o in self.chat.apply(inner, literals)]
        return out + erase_json(self.persist, [o for o in ops if o.record.store in json_stores], literals)


def _scrub(v: Any, literals: Sequence[str]) -> tuple[Any, int]:
    """``v`` with every literal (every form the kernel matches) in every string replaced."""
    if isinstance(v, str):
        n = count_literals(v, literals)
        return (replace_literals(v, literals), n) if n else (v, 0)
    if isinstance(v, list):
        pairs = [_scrub(x, literals) for x in v]
        return [p[0] for p in pairs], sum(p[1] for p in pairs)
    if isinstance(v, dict):
        out, total = {}, 0
        for k, x in v.items():
            out[k], n = _scrub(x, literals)
            total += n
        return out, total
    return v, 0


def _locate(op: Op) -> tuple[str, str]:
    if isinstance(op.record.ref, JsonRecord):
        return op.record.ref.collection, op.record.ref.key
    coll, _, key = op.record.id.rpartition(":")
    return coll, key


def _entry_text(ix: JsonIndex, e: Entry, value: Any) -> str:
    """``"key": value`` as the file writes its entry (its own key and separator), the value as
    ``json.dump`` writes it (``\\uXXXX`` escapes unless the entry held a non-ASCII byte)."""
    return ix.slice(e.start, e.vstart) + json.dumps(value, ensure_ascii=ix.raw(e).isascii())


def _struct_change(ix: JsonIndex, e: Entry, ops: Sequence[Op], literals: Sequence[str], o: StoreOutcome) -> str | None:
    """The new text of an index struct entry after ``ops`` on its nodes (None: no node changed)."""
    parsed = _index_nodes(e.value)
    if parsed is None:
        return None
    nodes = dict(parsed[1])  # changed here: the decode ``_index_nodes`` keeps is read-only
    data = {**parsed[0], _INDEX_NODES: nodes}
    changed = False
    for op in ops:
        key = _locate(op)[1]
        if key not in nodes:
            continue
        if isinstance(op, Remove):
            del nodes[key]
        else:
            nodes[key] = _scrub(nodes[key], literals)[0]
        changed = True
        o.removed += isinstance(op, Remove)
        o.rewritten += not isinstance(op, Remove)
    return _entry_text(ix, e, {**e.value, "__data__": json.dumps(data)}) if changed else None


def _changes(ix: JsonIndex, ops: Sequence[Op], literals: Sequence[str], o: StoreOutcome) -> dict[int, str | None]:
    """Entry index → its new text (None: removed) for ``ops`` on one JSON store."""
    keys = set()
    for op in ops:  # the entries the ops name: an entry's key, or an index struct's id
        coll, key = _locate(op)
        base, _, rest = coll.partition(f"/{_INDEX_NODES}")
        keys.add(base.rpartition("/")[2] if rest == "" and coll != base else key)
    where = {(ix.entry(i).coll, ix.key(i)): i for i in ix.positions(keys) if ix.entry(i).coll in ix.spans}
    changes: dict[int, str | None] = {}
    structs: dict[int, list[Op]] = {}
    for op in ops:
        coll, key = _locate(op)
        base, _, rest = coll.partition(f"/{_INDEX_NODES}")
        if rest == "" and coll != base:  # an index struct's node: ``index_store/data/<struct id>/nodes_dict``
            struct_coll, _, struct_id = base.rpartition("/")
            if (struct_coll, struct_id) in where:
                structs.setdefault(where[struct_coll, struct_id], []).append(op)
            continue
        i = where.get((coll, key))
        if i is None or (i in changes and changes[i] is None):
            continue
        if isinstance(op, Remove):
            changes[i] = None
            o.removed += 1
        else:
            changes[i] = _entry_text(ix, ix.entry(i), _scrub(ix.value(ix.entry(i)), literals)[0])
            o.rewritten += 1
    for i, struct_ops in structs.items():
        new = _struct_change(ix, ix.entry(i), struct_ops, literals, o)
        if new is not None and i not in changes:
            changes[i] = new
    return changes


def erase_json(persist: Path, ops: Sequence[Op], literals: Sequence[str]) -> list[StoreOutcome]:
    """The ops on the JSON stores, each store written to a new file that replaces the old one
    (the old file's blocks are the filesystem's: out of scope): the file's text with the
    changed entries spliced in, every other entry's bytes as they were."""
    out: list[StoreOutcome] = []
    for store, path in json_files(persist).items():
        mine = [op for op in ops if op.record.store == store]
        if not mine:
            continue
        o = StoreOutcome(store=store, compacted=True)
        ix = cached(path)
        changes = _changes(ix, mine, literals, o)
        if ix.columnar and all(t is None or t.isascii() for t in changes.values()):
            parts = ix.splice_parts(changes)
            _write(path, parts)
            if (back := _read_back(path, parts)) is not None:
                new = ix.spliced_index(path, back[1], changes)
                if _OWNED in ix.memo:
                    new.memo[_OWNED] = _spliced_owners(ix, ix.memo[_OWNED], changes)
                _keep(path, back[0], new)
        else:
            text, entries, spans, ranges = ix.spliced(changes)
            data = text.encode("utf-8")
            _write(path, [data])
            if (back := _read_back(path, [data])) is not None:
                _keep(path, back[0], JsonIndex.of_text(path, data, text, entries, spans, ranges, ix.standard))
        out.append(o)
    return out


def _write(path: Path, parts: Sequence[bytes | memoryview]) -> None:
    """``parts`` written one after another to a new file renamed over ``path`` (fsynced first)."""
    tmp = path.with_name(path.name + ".traceless-tmp")
    with open(tmp, "wb") as f:
        for piece in parts:
            f.write(piece)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def _read_back(path: Path, parts: Sequence[bytes | memoryview]) -> tuple[tuple[int, int, int], bytes] | None:
    """(stamp, bytes) of a file just written when, read back, it holds exactly ``parts`` one after
    another and did not change meanwhile: the index kept for it (made from what was written, not
    decoded again) is then the index of what is on disk; else None (read again when next used)."""
    stamp = _stamp(path)
    held = path.read_bytes()
    pos = 0
    for piece in parts:
        if not held.startswith(piece, pos):  # a memcmp (a memoryview's == compares item by item)
            return None
        pos += len(piece)
    return (stamp, held) if pos == len(held) and _stamp(path) == stamp else None
