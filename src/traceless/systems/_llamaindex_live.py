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

import json
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from traceless.errors import ConfigError
from traceless.systems import LiveInstance, Op, Record, Remove, StoreOutcome
from traceless.systems import sqlite as live
from traceless.systems.kernel import count_literals, replace_literals

__all__ = ["CHAT_TABLE", "JsonRecord", "LlamaIndexInstance", "erase_json", "indexed_refs", "json_files", "owned_refs",
           "owners", "records"]

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
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise ConfigError(f"llamaindex: {path} is not complete JSON: a running application is writing it (LlamaIndex "
                          "persists the whole index from memory). Stop the application, then run the same command "
                          "again: an interrupted erasure is completed by the re-run") from None
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


def owners(recs: dict[str, list[JsonRecord]]) -> dict[str, str]:
    """Node or ref doc id → its user: a ref doc's metadata ``user_id`` (else the ``USER/…`` prefix
    of its id, the adapter's ids), inherited by every node of the doc."""
    refs: dict[str, str] = {}
    nodes: dict[str, str] = {}
    every = [r for rs in recs.values() for r in rs]
    for r in every:
        user = _meta(r.value).get("user_id")
        if r.collection == "docstore/ref_doc_info":
            owner = user if isinstance(user, str) else (r.key.split("/", 1)[0] if "/" in r.key else None)
            if owner is not None:
                refs[r.key] = owner
                ids = r.value.get("node_ids") if isinstance(r.value, dict) else None
                nodes.update({str(i): owner for i in ids or []})
        elif r.collection in ("docstore/data", "metadata_dict") and isinstance(user, str):
            nodes[r.key] = user
    for r in every:
        if r.collection == "text_id_to_ref_doc_id" and r.value in refs:
            nodes[r.key] = refs[str(r.value)]
        ref = r.value.get("ref_doc_id") if isinstance(r.value, dict) else None
        if r.collection in ("docstore/metadata", "metadata_dict") and ref in refs:
            nodes[r.key] = refs[str(ref)]
    return {**nodes, **refs}


def owned_refs(recs: dict[str, list[JsonRecord]], user: str) -> set[str]:
    """The user's ref doc ids (what ``delete_ref_doc`` takes)."""
    own = owners(recs)
    return {r.key for r in recs.get("docstore", []) if r.collection == "docstore/ref_doc_info" and own.get(r.key) == user}


def indexed_refs(recs: dict[str, list[JsonRecord]]) -> set[str]:
    """The ref docs the vector stores still hold nodes of (``delete_ref_doc`` raises on the others)."""
    return {str(r.value) for rs in recs.values() for r in rs if r.collection == "text_id_to_ref_doc_id"}


def _chat_owner(table: str, row: dict[str, Any]) -> str | None:
    key = row.get("key")
    return key if table == CHAT_TABLE and isinstance(key, str) else None


def _chat_store(table: str) -> str:
    return CHAT_STORE if table == CHAT_TABLE else f"chat_db:{table}"


class LlamaIndexInstance(LiveInstance):
    """A live LlamaIndex instance as the erasure kernel reads and changes it: the chat store's
    rows (``SqliteFile``; table ``llama_index_memory`` is the store ``chat_store``) and every
    entry of every JSON store; ``apply`` removes or rewrites entries and writes each JSON store
    to a new file renamed over the old one."""

    others_policy = "rewrite"

    def __init__(self, chat_db: Path | None, persist: Path) -> None:
        self.chat = live.SqliteFile(chat_db, _chat_owner) if chat_db is not None and chat_db.is_file() else None
        self.persist = persist

    def stores(self) -> list[str]:
        chat = [_chat_store(t) for t in self.chat.stores()] if self.chat is not None else []
        return chat + list(json_files(self.persist))

    def records(self, user: str | None = None, literals: Sequence[str] = ()) -> Iterator[Record]:
        if self.chat is not None:
            for r in self.chat.records():
                yield Record(_chat_store(r.store), r.id, r.owner, r.fields, ref=r)
        recs = records(self.persist)
        own = owners(recs)
        for store, rs in recs.items():
            for j in rs:
                yield Record(store, j.record_id, own.get(j.key), {"entry": j.text()}, ref=j)

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


def _apply_to_doc(doc: dict[str, Any], ops: Sequence[Op], literals: Sequence[str], o: StoreOutcome) -> None:
    for op in ops:
        coll, key = _locate(op)
        base, _, rest = coll.partition(f"/{_INDEX_NODES}")
        if rest == "" and coll != base:  # an index struct's node: ``index_store/data/<struct id>/nodes_dict``
            struct_coll, _, struct_id = base.rpartition("/")
            entry = doc.get(struct_coll, {}).get(struct_id)
            parsed = _index_nodes(entry)
            if parsed is not None and key in parsed[1]:
                data, nodes = parsed
                if isinstance(op, Remove):
                    del nodes[key]
                else:
                    nodes[key] = _scrub(nodes[key], literals)[0]
                doc[struct_coll][struct_id] = {**entry, "__data__": json.dumps(data)}
                o.removed += isinstance(op, Remove)
                o.rewritten += not isinstance(op, Remove)
            continue
        entries = doc.get(coll)
        if not isinstance(entries, dict) or key not in entries:
            continue
        if isinstance(op, Remove):
            del entries[key]
            o.removed += 1
        else:
            entries[key] = _scrub(entries[key], literals)[0]
            o.rewritten += 1


def erase_json(persist: Path, ops: Sequence[Op], literals: Sequence[str]) -> list[StoreOutcome]:
    """The ops on the JSON stores, each store written to a new file that replaces the old one
    (the old file's blocks are the filesystem's: out of scope)."""
    out: list[StoreOutcome] = []
    for store, path in json_files(persist).items():
        mine = [op for op in ops if op.record.store == store]
        if not mine:
            continue
        o = StoreOutcome(store=store, compacted=True)
        doc = _load(path)
        _apply_to_doc(doc, mine, literals, o)
        tmp = path.with_name(path.name + ".traceless-tmp")
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(doc, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        out.append(o)
    return out
