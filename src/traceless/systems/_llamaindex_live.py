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

import hashlib
import json
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from traceless.systems import ErasurePlan, PlannedAction, ScanHit, ScanReport, StoreOutcome
from traceless.systems import sqlite as live

__all__ = ["CHAT_TABLE", "JsonRecord", "bystander_digests", "erase_json", "indexed_refs", "json_files", "owned", "plan",
           "records", "scan"]

CHAT_TABLE = "llama_index_memory"
CHAT_STORE = "chat_store"
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


def _load(path: Path) -> dict[str, Any]:
    doc = json.loads(path.read_text(encoding="utf-8"))
    return doc if isinstance(doc, dict) else {}


def _index_nodes(entry: Any) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """(the index struct, its ``nodes_dict``) of an ``index_store/data`` entry."""
    if not isinstance(entry, dict) or not isinstance(entry.get("__data__"), str):
        return None
    data = json.loads(entry["__data__"])
    nodes = data.get(_INDEX_NODES) if isinstance(data, dict) else None
    return (data, nodes) if isinstance(nodes, dict) else None


def _entries(store: str, doc: dict[str, Any]) -> Iterator[JsonRecord]:
    for coll, entries in doc.items():
        if not isinstance(entries, dict):
            yield JsonRecord(store, coll, "", entries)
            continue
        for key, value in entries.items():
            parsed = _index_nodes(value) if coll == "index_store/data" else None
            if parsed is None:
                yield JsonRecord(store, coll, key, value)
                continue
            data, nodes = parsed
            yield JsonRecord(store, coll, key, {k: v for k, v in data.items() if k != _INDEX_NODES})
            for node_id, ref in nodes.items():
                yield JsonRecord(store, f"{coll}/{key}/{_INDEX_NODES}", node_id, ref)


def records(persist: Path) -> dict[str, list[JsonRecord]]:
    """Every record of every JSON store (read-only)."""
    return {store: list(_entries(store, _load(p))) for store, p in json_files(persist).items()}


def _meta(value: Any) -> dict[str, Any]:
    data = value.get("__data__", value) if isinstance(value, dict) else None
    meta = data.get("metadata") if isinstance(data, dict) else None
    return meta if isinstance(meta, dict) else {}


def owned(recs: dict[str, list[JsonRecord]], user: str | None) -> tuple[set[str], set[str]]:
    """(the user's ref doc ids, the user's node ids)."""
    if user is None:
        return set(), set()
    refs: set[str] = set()
    nodes: set[str] = set()
    for r in (r for rs in recs.values() for r in rs):
        mine = _meta(r.value).get("user_id") == user
        if r.collection == "docstore/ref_doc_info" and (mine or r.key.startswith(f"{user}/")):
            refs.add(r.key)
            ids = r.value.get("node_ids") if isinstance(r.value, dict) else None
            nodes.update(str(i) for i in ids or [])
        elif r.collection in ("docstore/data", "metadata_dict") and mine:
            nodes.add(r.key)
    for r in (r for rs in recs.values() for r in rs):
        if r.collection == "text_id_to_ref_doc_id" and r.value in refs:
            nodes.add(r.key)
        ref = r.value.get("ref_doc_id") if isinstance(r.value, dict) else None
        if r.collection in ("docstore/metadata", "metadata_dict") and ref in refs:
            nodes.add(r.key)
    return refs, nodes


def indexed_refs(recs: dict[str, list[JsonRecord]]) -> set[str]:
    """The ref docs the vector stores still hold nodes of (``delete_ref_doc`` raises on the others)."""
    return {str(r.value) for rs in recs.values() for r in rs if r.collection == "text_id_to_ref_doc_id"}


def _is_mine(r: JsonRecord, refs: set[str], nodes: set[str]) -> bool:
    return r.key in refs or r.key in nodes


def _chat_owner(table: str, row: dict[str, Any]) -> str | None:
    key = row.get("key")
    return key if table == CHAT_TABLE and isinstance(key, str) else None


def _chat_store(table: str) -> str:
    return CHAT_STORE if table == CHAT_TABLE else f"chat_db:{table}"


def scan(system: str, chat_db: Path | None, persist: Path, user: str | None, literals: Sequence[str],
         reveal: bool) -> ScanReport:
    """The user's records and every record holding a literal, per store (chat rows and JSON entries)."""
    report = ScanReport(system=system, user=user, literals=len(literals))
    if chat_db is not None and chat_db.is_file():
        sub = live.scan(system, chat_db, _chat_owner, user, literals, reveal)
        report.stores.update({_chat_store(t): n for t, n in sub.stores.items()})
        report.hits += [h.model_copy(update={"store": _chat_store(h.store)}) for h in sub.hits]
    recs = records(persist)
    refs, nodes = owned(recs, user)
    for store, rs in recs.items():
        report.stores[store] = len(rs)
        for r in rs:
            mine, n = _is_mine(r, refs, nodes), _record_count(r, literals)
            if mine or n:
                report.hits.append(ScanHit(store=store, record_id=r.record_id, field="*", owner_match=mine,
                                           literal_count=n, value=r.text() if reveal else None))
    return report


_NUMBER_CHARS = frozenset("0123456789.-+eE[], NaInfity")  # every character of a JSON list of numbers
_MIN_NUMBERS = 32


def _record_count(r: JsonRecord, literals: Sequence[str]) -> int:
    """``live.count_literals(r.text(), literals)``, without serialising a long list of numbers (an
    embedding, most of a vector store's bytes) when no literal form could lie inside one: then
    every occurrence starts before the list, in ``["collection", "key", ``, and ends within its
    first ``len(form) - 1`` characters, so only that head is serialised (exactly the same count)."""
    v = r.value
    forms = [f for lit in literals if lit for f in live.literal_forms(lit)]
    if (type(v) is not list or len(v) < _MIN_NUMBERS or not forms or any(set(f) <= _NUMBER_CHARS for f in forms)
            or not all(type(x) is float or type(x) is int for x in v)):
        return live.count_literals(r.text(), literals)
    m = max(len(f) for f in forms)
    head = json.dumps([r.collection, r.key], ensure_ascii=False)[:-1] + ", "
    part = json.dumps(v[:m])[:-1] if len(v) > m else json.dumps(v) + "]"  # a prefix of the list's text
    return sum((head + part).count(f) for f in forms)


def plan(system: str, chat_db: Path | None, persist: Path, user: str | None, literals: Sequence[str]) -> ErasurePlan:
    """Remove the user's records, rewrite others quoting a literal; VACUUM the chat store, rewrite the JSON files."""
    rep = scan(system, chat_db, persist, user, literals, reveal=False)
    acts = [PlannedAction(store=h.store, record_id=h.record_id, action="remove" if h.owner_match else "rewrite",
                          reason="owned by the user" if h.owner_match else "holds a literal") for h in rep.hits]
    stores = {a.store for a in acts}
    compaction = [f"VACUUM {chat_db.name}"] if chat_db is not None and any(s.startswith("chat") for s in stores) else []
    compaction += [f"rewrite {p.name}" for s, p in json_files(persist).items() if s in stores]
    return ErasurePlan(system=system, user=user, actions=acts, compaction=compaction)


def _scrub(v: Any, literals: Sequence[str]) -> tuple[Any, int]:
    """``v`` with every literal (and its JSON-escaped form) in every string replaced."""
    if isinstance(v, str):
        n = live.count_literals(v, literals)
        return (live.replace_literals(v, literals), n) if n else (v, 0)
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


def _erase_doc(doc: dict[str, Any], refs: set[str], nodes: set[str], literals: Sequence[str],
               o: StoreOutcome) -> dict[str, Any]:
    for coll, entries in doc.items():
        if not isinstance(entries, dict):
            continue
        for key in [k for k in entries if k in refs or k in nodes]:
            del entries[key]
            o.removed += 1
        for key, value in list(entries.items()):
            parsed = _index_nodes(value) if coll == "index_store/data" else None
            if parsed is not None:
                data, idx = parsed
                gone = [k for k in idx if k in refs or k in nodes]
                for k in gone:
                    del idx[k]
                o.removed += len(gone)
                value = {**value, "__data__": json.dumps(data)}
            new, n = _scrub(value, literals)
            o.rewritten += 1 if n else 0
            entries[key] = new
    return doc


def erase_json(persist: Path, user: str | None, literals: Sequence[str]) -> list[StoreOutcome]:
    """Every JSON store without the user's records and the literals, written to a new file that
    replaces the old one (the old file's blocks are the filesystem's: out of scope)."""
    refs, nodes = owned(records(persist), user)
    out: list[StoreOutcome] = []
    for store, path in json_files(persist).items():
        o = StoreOutcome(store=store, compacted=True)
        doc = _erase_doc(_load(path), refs, nodes, literals, o)
        tmp = path.with_name(path.name + ".traceless-tmp")
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(doc, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        out.append(o)
    return out


def erase_chat(chat_db: Path, user: str | None, literals: Sequence[str]) -> list[StoreOutcome]:
    """The chat rows the reset left, rows quoting a literal rewritten, then VACUUM."""
    return [o.model_copy(update={"store": _chat_store(o.store)})
            for o in live.erase_residue(chat_db, _chat_owner, user, literals)]


def _digest(texts: list[str]) -> tuple[int, str]:
    h = hashlib.sha256()
    for t in sorted(texts):
        h.update(t.encode("utf-8") + b"\0")
    return len(texts), h.hexdigest()


def bystander_digests(chat_db: Path | None, persist: Path, user: str | None,
                      literals: Sequence[str] = ()) -> dict[str, tuple[int, str]]:
    """Per store: count and SHA-256 of every record that is not the user's, each with the
    literals replaced as the erasure replaces them (a record the erasure rewrites digests the
    same before and after; any other change to it does not)."""
    out: dict[str, tuple[int, str]] = {}
    if chat_db is not None and chat_db.is_file():
        for table, rows in live.rows(chat_db).items():
            out[_chat_store(table)] = _digest([live.replace_literals(row.text(), literals) for row in rows
                                               if user is None or _chat_owner(table, row.values) != user])
    recs = records(persist)
    refs, nodes = owned(recs, user)
    for store, rs in recs.items():
        out[store] = _digest([JsonRecord(r.store, r.collection, r.key, _scrub(r.value, literals)[0]).text()
                              for r in rs if not _is_mine(r, refs, nodes)])
    return out
