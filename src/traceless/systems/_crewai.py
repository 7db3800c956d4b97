"""The ``crewai`` memory system: CrewAI's unified ``Memory`` on its default ``LanceDBStorage``,
on the real ``crewai`` package, offline.

* one LanceDB database, ``memory/`` in the work dir (table ``memories``: one Lance dataset
  with its ``data/`` fragments, ``_versions/`` manifests, ``_transactions/`` and
  ``_deletions/`` files), created by CrewAI itself;
* a user turn is one ``Memory.remember(content, scope="/user/USER", categories, importance,
  metadata={user_id, session_id}, source=USER)``: every field is given, so CrewAI's
  LLM analysis is skipped (its documented LLM-free use); it still calls its LLM to
  consolidate a new memory with a stored one more similar than 0.85 — that LLM is the
  audit's served model over the OpenAI API (``--model llamacpp:NAME``), or a loopback
  placeholder that nothing answers when the audit's model is not served;
* embeddings: the audit's local embedder (a callable on lists of texts, CrewAI's embedder
  interface);
* what the agent reads: ``Memory.recall(query, scope="/user/USER", depth="shallow")`` (a
  vector search; ``deep`` recall calls the LLM to plan the search);
* telemetry and tracing off (``CREWAI_DISABLE_TELEMETRY``, ``OTEL_SDK_DISABLED`` and
  ``CREWAI_TRACING_ENABLED=false``, read by ``crewai_core``'s telemetry check).

Native deletions: ``forget`` (``Memory.forget(record_ids=...)`` of each of the user's memories
that holds the secret), ``forget_scope`` (``Memory.forget(scope="/user/USER")``), ``reset``
(``Memory.reset(scope="/user/USER")``) and ``reset_all`` (``Memory.reset_all()``: drops the
table, every user's memories). LanceDB deletes by writing a deletion file and a new table
version; the old versions (and their data files) stay until ``optimize`` cleans versions
older than its threshold (7 days by default), so the stores are every table's current rows
(``memories``) and each distinct row only an older version still holds (``memories@versions``).

traceless's erasure (``CrewAIInstance.apply``) reads the erased rows' vectors (the float32
bytes LanceDB stores, ``fixed_size_list<float>``) and texts from every version first, removes
them with CrewAI's own ``forget``, then compacts and removes every older version
(``optimize(cleanup_older_than=0)``), and looks for each erased vector and text in every file
of the instance: ``clear`` stays possible only when none is left (issue 38.1; a vector holds no
byte of its text, so the literal's byte scan cannot see it).
"""

from __future__ import annotations

import json
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from datetime import timedelta
from itertools import compress
from pathlib import Path
from typing import TYPE_CHECKING, Any

from traceless.errors import ConfigError
from traceless.forget import scan_bytes
from traceless.memory import Session
from traceless.systems import (
    Capability,
    ContextItem,
    DeletionTarget,
    ErasurePlan,
    MemorySystem,
    StoreOutcome,
    SystemConfig,
    SystemRuntime,
    memory_system,
    unsafe_at_finalization,
)
from traceless.systems._crewai_env import _console_off, _Embed, _llm, _NoEmbed, _quiet_env
from traceless.systems._crewai_lance import compact_deleted, not_shown, rows_at, to_read
from traceless.systems._crewai_native import Child
from traceless.systems.contract import LiveInstance, Op, Record, Remove
from traceless.systems.kernel import ERASED, StoreDigest, digest, literal_forms

if TYPE_CHECKING:
    import numpy as np

__all__ = ["CrewAIConfig", "CrewAISystem"]

unsafe_at_finalization(
    "lancedb._lancedb",
    "lancedb 0.30's Tokio workers can call into Python while the interpreter finalizes "
    "(Fatal Python error: PyGILState_Release; lancedb#4175, not in the lancedb<0.30.1 crewai pins)")

CREWAI_VERSION = "1.15.28"
DIR_NAME = "memory"
TABLE = "memories"
OLD = "@versions"
_DELETIONS = ("forget", "forget_scope", "reset", "reset_all")
_TEXT_COLS = ("id", "content", "scope", "categories_str", "metadata_str", "source")  # CrewAI 1.15's columns
_CHECKED = ("content", "scope")
"""The texts of an erased row looked for in the files after the erasure (with its vector)."""


class CrewAIConfig(SystemConfig):
    """Settings of the CrewAI adapter."""

    k: int = 5
    """Memories recalled per query (``Memory.recall(limit=k)``)."""
    storage_path: str | None = None
    """A live instance's LanceDB directory (``scan``/``forget --memory crewai``); the audit uses its work dir."""


def scope_of(user: str) -> str:
    return f"/user/{user}"


def _owner(row: dict[str, Any]) -> str | None:
    """Whose memory a row is: its scope ``/user/USER/…``, else its metadata's ``user_id`` (a
    crew run that remembers at ``/`` or ``/crew/…`` still says the user in the metadata it is
    given), else nobody's (found only by a literal)."""
    scope = row.get("scope")
    if isinstance(scope, str) and scope.startswith("/user/"):
        return scope[len("/user/"):].split("/", 1)[0]
    try:
        meta = json.loads(str(row.get("metadata_str") or "{}"))
    except ValueError:
        return None
    uid = meta.get("user_id") if isinstance(meta, dict) else None
    return str(uid) if isinstance(uid, (str, int)) and str(uid) else None


def _text(row: dict[str, Any]) -> str:
    return "\t".join(str(row.get(c, "")) for c in _TEXT_COLS)


def _tables(db: Any) -> list[str]:
    """Every table of a LanceDB database (``list_tables`` pages its answer)."""
    names: list[str] = []
    token = None
    while True:
        page = db.list_tables(page_token=token)
        names += list(page.tables)
        token = page.page_token
        if not token or not page.tables:
            return sorted(names)


def narrowable(user: str | None, literals: Sequence[str]) -> bool:
    """Whether the rows of the user and of the literals can be told by their columns' texts
    (``_selected``): a user or a literal given, no literal's form in ``None`` (a missing value's
    text), no user id that JSON escapes (its text in ``metadata_str`` would not be its own)."""
    forms = [f for lit in literals for f in literal_forms(lit)]
    if (user is None and not forms) or any(f in "None" for f in forms):
        return False
    return user is None or not (any(c in user for c in '"\\') or any(ord(c) < 0x20 for c in user))


def _key_array(data: Any) -> Any:
    """Each row's ``_text`` of an Arrow table, joined by Arrow (C speed), as an Arrow array."""
    import pyarrow as pa
    import pyarrow.compute as pc

    parts = [pc.fill_null(data[c].cast(pa.string()), "None") if c in data.column_names else pa.scalar("")
             for c in _TEXT_COLS]
    return pc.binary_join_element_wise(*parts, "\t")


def _text_cols(tbl: Any) -> Any:
    """The checked-out version's rows, the text columns only (read alone: an older version that
    holds the whole table read with its vectors took 1.63 s at 10^6 rows, its text columns 0.55 s)."""
    return tbl.search().select([c for c in _TEXT_COLS if c in tbl.schema.names]).limit(None).to_arrow()


def _old_rows(tbl: Any, latest: int, current: Any) -> list[dict[str, Any]]:
    """Each distinct row that only an older version holds (``current``: the current rows' text
    columns), read from the versions ``to_read`` names (a version whose rows another read one
    shows whole is not read). Of a version read, only the rows the current one does not show at
    the same address of the same data files (``not_shown``: at 10^6 rows 0.1 s against 2 s for
    its text columns read and compared, measured) are read (``rows_at``) and told from the current rows by
    their text (``_unheld``). Where pylance cannot say, a version is read whole: one whose rows
    equal, in order, the current ones or those of the version read just before (Arrow's
    ``equals``) adds none; another's rows are told from the current ones by Arrow (each row's
    ``_text`` looked up among the current rows' by ``is_in``). Only the rows no current row
    equals are made Python keys."""
    out: list[dict[str, Any]] = []
    seen: set[str] = set()
    last = current
    for v in to_read(tbl.uri, [int(x["version"]) for x in tbl.list_versions()], read=[latest]):
        try:
            diff = not_shown(tbl.uri, v, latest)
            data = _rows_at(diff)
            if data is None:
                diff = None
                tbl.checkout(v)
                data = _text_cols(tbl)
        except (RuntimeError, OSError, ValueError) as e:
            if "Not found" not in str(e):
                raise
            continue  # another writer's cleanup removed that version's files meanwhile: it holds nothing
        if diff is None and any(data.num_rows == t.num_rows and data.equals(t) for t in (last, current)):
            last = data
            continue  # the same rows in the same order: every one held by a version already read
        last = data
        keys, fresh = _unheld(data, current)
        new = []
        for i, k in zip(_true_at(fresh), keys.filter(fresh).to_pylist(), strict=True):
            if k not in seen:
                seen.add(k)
                new.append(i)
        out += data.take(new).to_pylist() if new else []
    tbl.checkout_latest()
    return out


def _rows_at(diff: tuple[Any, Any] | None) -> Any:
    """The text columns of ``not_shown``'s rows (``rows_at``); None where ``not_shown`` could
    not say or pylance cannot take them by address (the version is then read whole)."""
    if diff is None:
        return None
    try:
        return rows_at(*diff, _TEXT_COLS)
    except Exception:  # noqa: BLE001 - a pylance that cannot filter by row address: read the version whole
        return None


def _unheld(data: Any, current: Any) -> tuple[Any, Any]:
    """(each row's ``_text`` as ``_key_array`` joins it, whether no row of ``current`` has the
    same): compared only with the current rows of the same ids (``_text`` begins with the id) where
    both tables have one and no id of ``data`` holds the tab that joins the columns."""
    import pyarrow as pa
    import pyarrow.compute as pc

    def ids(t: Any) -> Any:
        return pc.fill_null(t["id"].cast(pa.string()), "None")

    keys = _key_array(data)
    if ("id" in data.column_names and "id" in current.column_names and data.num_rows < current.num_rows
            and not pc.any(pc.match_substring(ids(data), "\t")).as_py()):
        current = current.filter(pc.is_in(ids(current), value_set=ids(data)))
    return keys, pc.invert(pc.is_in(keys, value_set=_key_array(current)))


def _true_at(mask: Any) -> list[int]:
    """The positions where an Arrow boolean array is true."""
    import pyarrow.compute as pc

    return list(pc.indices_nonzero(mask).to_pylist())


def _selected(data: Any, user: str | None, literals: Sequence[str]) -> list[dict[str, Any]]:
    """The rows of a table's current text columns (Arrow) that ``narrow``'s filter selects,
    evaluated by Arrow's kernels on the columns the count already read (C speed; DataFusion
    planned the same filter at 5.9 s for 10 literals at 10^5 rows, measured)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if data is None or not data.num_rows:
        return []
    cols = data.column_names
    forms = [f for lit in literals for f in literal_forms(lit)]
    mask = pa.array([False] * data.num_rows)
    for c in cols:
        for f in forms:
            mask = pc.or_kleene(mask, pc.fill_null(pc.match_substring(data[c], f), False))
    if user is not None and "scope" in cols:
        scope = data["scope"]
        mine = pc.or_kleene(pc.equal(scope, scope_of(user)), pc.starts_with(scope, scope_of(user) + "/"))
        mask = pc.or_kleene(mask, pc.fill_null(mine, False))
    if user is not None and "metadata_str" in cols:
        other = pc.invert(pc.fill_null(pc.starts_with(data["scope"], "/user/"), False)) if "scope" in cols else None
        for f in literal_forms(user):
            hit = pc.fill_null(pc.match_substring(data["metadata_str"], f), False)
            mask = pc.or_kleene(mask, hit if other is None else pc.and_kleene(hit, other))
    return list(data.filter(mask).to_pylist())


def _digest_texts(data: Any, literals: Sequence[str], first: Any = None) -> list[str]:
    """Each row's fields' digest text (``kernel.bystander_rows``': ``name=value`` by name, tab
    separated, the literals replaced), after ``first`` (an Arrow string array, None as
    ``None``, and a tab) where given: joined once by Arrow, made strings once, and made again
    with the literals replaced field by field only for the rows whose joined text holds a form
    of one (a field's occurrence is one of the joined text's). A whole digest of 10^6 rows took
    1.7–2.2 s this way and 1.7–2.6 s as an Arrow column joined to the owners and filtered (side
    by side, 3 reps each: no faster, one join and one copy fewer)."""
    import numpy as np
    import pyarrow.compute as pc

    forms = [f for lit in literals for f in literal_forms(lit)]
    joined = _fields_joined(data, (), first)
    texts: list[str] = joined.to_pylist()
    if not forms or not data.num_rows:
        return texts
    hit = pc.fill_null(pc.match_substring_regex(joined, "|".join(map(_re2_literal, forms))), False)
    rows = pc.indices_nonzero(hit).to_numpy().astype(np.int64)
    if len(rows):
        fixed = _fields_joined(data.take(rows), forms, None if first is None else first.take(rows)).to_pylist()
        for i, t in zip(rows.tolist(), fixed, strict=True):
            texts[i] = t
    return texts


def _fields_joined(data: Any, forms: Sequence[str], first: Any = None) -> Any:
    """``name=value`` of each text column by name, tab separated, ``forms`` replaced in each
    value; after ``first`` (None as ``None``) and a tab where given."""
    import pyarrow as pa
    import pyarrow.compute as pc

    parts: list[Any] = [] if first is None else [pc.fill_null(first, "None")]
    for c in sorted(_TEXT_COLS):
        col = pc.fill_null(data[c].cast(pa.string()), "None") if c in data.column_names else pa.scalar("")
        for f in forms:
            col = pc.replace_substring(col, f, ERASED)
        parts += [("\t" if parts else "") + f"{c}=", col]
    return pc.binary_join_element_wise(*parts, "")


def _re2_literal(text: str) -> str:
    """``text`` as an RE2 pattern that matches it literally (every character as ``\\x{HEX}``)."""
    return "".join(f"\\x{{{ord(ch):x}}}" for ch in text)


def _id_column(data: Any) -> Any:
    """``str(row["id"])`` of each row (``"None"`` where it is missing), as an Arrow array."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if "id" not in data.column_names:
        return pa.array(["None"] * data.num_rows, pa.string())
    return pc.fill_null(data["id"].cast(pa.string()), "None")


def _owners(data: Any) -> Any:
    """``_owner`` of each row, as an Arrow string array: a ``/user/USER…`` scope's user cut by
    Arrow, the metadata read in Python only for the rows of another scope (few: most rows are a
    user's). At 10^6 rows 0.05 s against 0.33 s with each scope cut in Python (measured)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if "scope" not in data.column_names:
        return pa.array([_owner(r) for r in data.select([c for c in ("metadata_str",) if c in data.column_names])
                         .to_pylist()], pa.string())
    scope = data["scope"].cast(pa.string()).combine_chunks()
    mine = pc.fill_null(pc.starts_with(scope, "/user/"), False)
    users = pc.list_element(pc.split_pattern(pc.utf8_slice_codeunits(scope, 6), "/", max_splits=1), 0)
    who = pc.if_else(mine, users, pa.scalar(None, pa.string()))
    rest = pc.indices_nonzero(pc.invert(mine))
    if len(rest):
        cols = [c for c in ("scope", "metadata_str") if c in data.column_names]
        theirs = pa.array([_owner(r) for r in data.select(cols).take(rest).to_pylist()], pa.string())
        who = pc.replace_with_mask(who, pc.invert(mine), theirs)
    return who


def _versions(path: Path, rows: bool = True, current: dict[str, Any] | None = None,
              ) -> tuple[dict[str, list[dict[str, Any]]], dict[str, int]]:
    """(store → rows, store → count): every table's current rows, and (``TABLE@versions``) each
    distinct row that only an older version still holds (what a deletion left in LanceDB's
    history). Without ``rows`` the current rows are only counted and their text columns kept
    in ``current`` (Arrow, no row made a dict); the older versions' rows are each read (few:
    what changed since)."""
    import lancedb

    current = {} if current is None else current
    out: dict[str, list[dict[str, Any]]] = {TABLE: [], TABLE + OLD: []}
    n = {TABLE: 0, TABLE + OLD: 0}
    if not path.is_dir():
        return out, n
    db = lancedb.connect(str(path))
    for name in _tables(db):
        tbl = db.open_table(name)
        latest = tbl.version
        data = current[name] = _text_cols(tbl)
        out.setdefault(name, []).extend(data.to_pylist() if rows else [])
        n[name] = n.get(name, 0) + data.num_rows
        old = _old_rows(tbl, latest, data)
        if old:
            out.setdefault(name + OLD, []).extend(old)
            n[name + OLD] = n.get(name + OLD, 0) + len(old)
    return out, n


_KEPT: dict[Path, tuple[Any, tuple[dict[str, list[dict[str, Any]]], dict[str, int]], dict[str, Any]]] = {}
"""The last ``_versions(rows=False)`` read (its stamp, its answer, the current text columns): an
erasure asks for it a dozen times (plan, scope check, digests, rounds, re-scan) from fresh
instances, on a table that changes only at ``apply``."""


def _stamp(path: Path) -> Any:
    """What changes whenever LanceDB commits: every table's version manifests (a version is
    never rewritten; each commit, delete and cleanup adds or removes one), named, sized, dated."""
    out = []
    for t in sorted(path.glob("*.lance")) if path.is_dir() else []:
        vs = t / "_versions"
        files = sorted(vs.iterdir()) if vs.is_dir() else []
        out.append((t.name, tuple((f.name, f.stat().st_size, f.stat().st_mtime_ns) for f in files)))
    return tuple(out)


def _versions_kept(path: Path) -> tuple[tuple[dict[str, list[dict[str, Any]]], dict[str, int]], dict[str, Any]]:
    """``_versions(path, rows=False)`` and its current text columns, read again only when a
    table committed since (``_stamp``)."""
    stamp = _stamp(path)
    hit = _KEPT.get(path)
    if hit is None or hit[0] != stamp:
        current: dict[str, Any] = {}
        got = _versions(path, rows=False, current=current)
        _KEPT.clear()  # one instance's at a time
        _KEPT[path] = hit = (stamp, got, current)
    return hit[1], hit[2]


@memory_system("crewai", help="CrewAI Memory on LanceDB (every table and version); deletions forget/"
                              "forget_scope/reset/reset_all")
class CrewAISystem(MemorySystem):
    """CrewAI's ``Memory`` with ``LanceDBStorage`` in ``work_dir/memory`` (or a live ``storage_path``)."""

    capabilities = frozenset({Capability.LIVE})  # beside a writing app LanceDB loses version files mid-read

    extra = "crewai"
    install_note = "in a venv of its own (not beside agentdojo, openai-agents, inspect)"
    requires = ("crewai", "crewai.memory", "lancedb")
    config_class = CrewAIConfig

    def __init__(self, work_dir: Path, config: SystemConfig, runtime: SystemRuntime | None,
                 *, path: Path | None = None, read_only: bool = False) -> None:
        super().__init__(work_dir, config, runtime)  # type: ignore[arg-type]
        assert isinstance(config, CrewAIConfig)
        self.cfg = config
        self.path = path or work_dir / DIR_NAME
        self.read_only = read_only
        self._memory: Any = None
        self._child: Child | None = None
        _quiet_env()

    def _open(self, compact_every: int = 100) -> Any:
        """CrewAI's ``Memory`` on its ``LanceDBStorage``; ``compact_every`` is the storage's own
        (100, CrewAI's default; 0: no background compaction when it opens the table)."""
        if self.read_only:
            raise ConfigError("crewai: this instance was attached read-only; attach it with read_only=False")
        if self._memory is None:
            from crewai.memory import Memory
            from crewai.memory.storage.lancedb_storage import LanceDBStorage

            # an erasure (``forget``) embeds nothing: without the audit's runtime (``traceless forget
            # --memory crewai``) CrewAI gets an embedder that refuses to be called, never a guess
            runtime: SystemRuntime | None = self.runtime
            embed = _Embed(runtime.embedder) if runtime is not None else _NoEmbed()
            self._memory = Memory(llm=_llm(runtime.model if runtime is not None else None),
                                  storage=LanceDBStorage(path=str(self.path), compact_every=compact_every),
                                  embedder=embed)
        return self._memory

    @classmethod
    def deletions(cls, config: SystemConfig) -> tuple[str, ...]:
        return _DELETIONS

    def write(self, sessions: Sequence[Session]) -> None:
        mem = self._open()
        with _console_off():
            for s in sessions:
                for i, t in enumerate(s.turns):
                    if t.role == "user" and t.content.strip():
                        mem.remember(t.content, scope=scope_of(s.user_id), categories=["conversation"],
                                     importance=0.5, source=s.user_id,
                                     metadata={"user_id": s.user_id, "session_id": s.session_id, "turn": i})
            mem.drain_writes()

    def context(self, owner: str, query: str, view: str = "agent") -> list[ContextItem]:
        with _console_off():
            found = self._open().recall(query, scope=scope_of(owner), limit=self.cfg.k, depth="shallow")
        return [ContextItem(str(m.record.id), str(m.record.content)) for m in found if str(m.record.content).strip()]

    def _user_records(self, owner: str) -> list[Any]:
        with _console_off():
            return list(self._open().list_records(scope=scope_of(owner), limit=1_000_000))

    def delete(self, operation: str, target: DeletionTarget) -> dict[str, Any]:
        self.check_deletion(operation)
        mem = self._open()
        with _console_off():
            if operation == "forget":
                ids = sorted(str(r.id) for r in self._user_records(target.owner) if target.literal in str(r.content))
                return {"record_ids": ids, "deleted": mem.forget(record_ids=ids) if ids else 0}
            if operation == "forget_scope":
                return {"deleted": mem.forget(scope=scope_of(target.owner))}
            if operation == "reset":
                mem.reset(scope=scope_of(target.owner))
            else:
                mem.reset_all()
        return {}

    # ------------------------------------------------------------------ scanning
    def stores(self) -> dict[str, Iterable[str]]:
        return {k: [_text(r) for r in rs] for k, rs in _versions(self.path)[0].items()}

    def files(self) -> list[Path]:
        return sorted(p for p in self.path.rglob("*") if p.is_file()) if self.path.is_dir() else []

    def close(self) -> None:
        self._settle()
        if self._child is not None:
            self._child.close()
            self._child = None

    def _settle(self) -> None:
        """CrewAI's memory closed, its own background compaction waited for."""
        if self._memory is not None:
            with _console_off():
                self._memory.drain_writes()
                self._memory.close()
            self._memory = None
        for t in threading.enumerate():  # LanceDBStorage's fire-and-forget compaction
            if t.name == "lancedb-compact":
                t.join()

    # ------------------------------------------------- live instances: scan and erase
    @classmethod
    def attach(cls, config: SystemConfig, runtime: SystemRuntime | None = None, *, read_only: bool) -> MemorySystem:
        assert isinstance(config, CrewAIConfig)
        if not config.storage_path:
            raise ConfigError("crewai: give the live instance's LanceDB directory in the memory config (`storage_path`)")
        p = Path(config.storage_path)
        if not (p / f"{TABLE}.lance").is_dir():
            raise ConfigError(f"crewai: {p} holds no LanceDB table {TABLE!r}; give CrewAI's memory directory "
                              "($CREWAI_STORAGE_DIR/memory)")
        return cls(p.parent, config, runtime, path=p, read_only=read_only)

    def instance_files(self) -> list[Path]:
        return self.files()

    def instance(self) -> LiveInstance:
        return CrewAIInstance(self.path, self._forget, self._settle)

    def _start_child(self) -> None:
        """In a process that has not imported CrewAI (``traceless forget``), CrewAI's own
        deletion is done by a child process (``_crewai_native``), started once: when the digests
        begin (its import, 3.4 s, overlaps them: they hold one core, where the plan's LanceDB
        reads held both and took 3.7 s instead of 2 s beside it, measured), or at the deletion."""
        if not self.read_only and self._memory is None and self._child is None and "crewai.memory" not in sys.modules:
            self._child = Child(self.path)

    def _forget(self, **arguments: Any) -> int:
        """CrewAI's own ``Memory.forget(**arguments)`` (in the child where one is started), its
        storage closed after it (``_settle``: CrewAI's own background compaction waited for)."""
        self._start_child()
        if self._child is not None:
            return self._child.forget(arguments)
        with _console_off():  # no compaction of CrewAI's at open (it rewrote the table): the erasure's follows
            deleted = int(self._open(compact_every=0).forget(**arguments) or 0)
        self._settle()
        return deleted

    def native_erasure(self, plan: ErasurePlan) -> None:
        """CrewAI's own deletion of the user's scope first (``Memory.forget(scope=…)``), then its
        storage closed: ``LanceDBStorage`` starts a compaction in a thread of its own when it
        opens a table (``lancedb-compact``), which can commit after ``forget`` returns, while the
        kernel reads the versions again; ``close`` waits for it."""
        if plan.user is not None:
            self._forget(scope=scope_of(plan.user))

    def bystander_digests(self, user: str | None) -> dict[str, StoreDigest]:
        """The kernel's digests of the current tables (``CrewAIInstance.digests``: the same
        digest, made by Arrow): the rows only older versions hold are history that the
        compaction removes for every user, not a bystander's records."""
        self._start_child()
        literals, removed = self._planned
        inst = self.instance()
        assert isinstance(inst, CrewAIInstance)
        return inst.digests(user, literals, removed)


class CrewAIInstance(LiveInstance):
    """CrewAI's LanceDB directory as the erasure kernel reads and changes it: a record is a row
    of the current table (``memories``) or one only an older version holds (``memories@versions``);
    removal is CrewAI's own ``Memory.forget(record_ids=…)``, then the fragments that keep rows
    only marked deleted compacted without them and every older version purged (``_verify_gone``:
    the old versions and their data files go). A rewrite would keep the vector of the
    old text, so another user's memory quoting a literal is left and the literal refused."""

    others_policy = "leave"

    def __init__(self, path: Path, forget: Callable[..., int], close: Callable[[], None]) -> None:
        self.path, self._forget, self._close = path, forget, close
        self._cache: tuple[dict[str, list[dict[str, Any]]], dict[str, int]] | None = None

    def stores(self) -> list[str]:
        return list(self.counts())

    def server_bystanders(self, user: str | None, literals: Sequence[str],
                          removed: Iterable[tuple[str, str]]) -> list[tuple[tuple[str, str], str]]:
        """``kernel.bystander_rows``' texts of the current rows (``_bystanders``); the rows only
        older versions hold are no bystanders' (``CrewAISystem.bystander_digests``)."""
        out: list[tuple[tuple[str, str], str]] = []
        for name, (ids, texts) in self._bystanders(user, literals, removed).items():
            out += [((name, rid), text) for rid, text in zip(ids, texts, strict=True)]
        return out

    def digests(self, user: str | None, literals: Sequence[str],
                removed: Iterable[tuple[str, str]]) -> dict[str, StoreDigest]:
        """``kernel.bystander_digests`` of the current tables (the rows only older versions hold
        left out): the kept rows' texts (``_bystanders``), each hashed (``record_hash``)."""
        out: dict[str, StoreDigest] = {s: () for s in self.stores() if s != TABLE + OLD}
        for name, (_, texts) in self._bystanders(user, literals, removed).items():
            out[name] = digest(texts)
        return out

    def _bystanders(self, user: str | None, literals: Sequence[str],
                    removed: Iterable[tuple[str, str]]) -> dict[str, tuple[list[str], list[str]]]:
        """Per current table, (ids, digest texts) of the rows that are not the user's nor in
        ``removed``: ``kernel.bystander_rows``' texts (``owner\tfields``, the literals
        replaced, ``_digest_texts``), made from the text columns the count read; the rows kept
        chosen by Arrow, the others' texts left out in Python (no copy of the Arrow column)."""
        import pyarrow as pa
        import pyarrow.compute as pc

        self._state()
        skip = set(removed)
        out: dict[str, tuple[list[str], list[str]]] = {}
        for name, data in self._columns.items():
            if not data.num_rows:
                continue
            who = _owners(data)
            ids = _id_column(data)
            keep = pc.invert(pc.is_in(ids, value_set=pa.array(sorted(r for s, r in skip if s == name), pa.string())))
            if user is not None:
                keep = pc.and_(keep, pc.invert(pc.fill_null(pc.equal(who, user), False)))
            mask = keep.to_pylist()
            out[name] = (list(compress(ids.to_pylist(), mask)), list(compress(_digest_texts(data, literals, who), mask)))
        return out

    def _state(self) -> tuple[dict[str, list[dict[str, Any]]], dict[str, int]]:
        """The rows only older versions hold and every store's count, kept until ``apply``
        changes the instance (a scan asks the stores, the counts, then the records)."""
        if self._cache is None:
            self._cache, self._columns = _versions_kept(self.path)
        return self._cache

    def counts(self) -> dict[str, int]:
        return dict(self._state()[1])

    def records(self, user: str | None = None, literals: Sequence[str] = ()) -> Iterator[Record]:
        """The user's current rows and those that may hold a literal, read through LanceDB's
        filter (``narrow``), and every row only an older version holds; with neither, every row."""
        if not narrowable(user, literals):
            rows_of = _versions(self.path)[0]
        else:
            self._state()
            rows_of = {k: [] if k.endswith(OLD) else _selected(self._columns.get(k), user, literals)
                       for k in self._state()[1]}
            rows_of.update({k: rs for k, rs in self._state()[0].items() if k.endswith(OLD)})
        for store, rows in rows_of.items():
            for r in rows:
                yield Record(store, str(r.get("id")), _owner(r), {c: str(r.get(c, "")) for c in _TEXT_COLS})

    def files(self) -> list[Path]:
        return sorted(p for p in self.path.rglob("*") if p.is_file()) if self.path.is_dir() else []

    def compaction(self) -> list[str]:
        return [f"LanceDB optimize {TABLE} (old versions cleaned up, deleted rows compacted)"]

    def apply(self, ops: Sequence[Op], literals: Sequence[str]) -> list[StoreOutcome]:
        self._cache = None
        before = _versions_kept(self.path)[0][1]
        ids = sorted({o.record.id for o in ops if isinstance(o, Remove) and o.record.store == TABLE})
        erased = _erased_rows(self.path, {o.record.id for o in ops if isinstance(o, Remove)})
        if ids:
            self._forget(record_ids=ids)
        self._close()
        out = [StoreOutcome(store=k, compacted=True) for k in before]
        _verify_gone(self.path, self.files, erased, {o.record.id for o in ops if isinstance(o, Remove)}, out)
        after = _versions_kept(self.path)[0][1]  # read once, after ``_verify_gone``'s rewrite if any
        for o in out:
            o.removed = max(0, before[o.store] - after.get(o.store, 0))
        self._cache = None  # the next read checks the stamp
        return out


_SCALAR = {"BTree": "BTREE", "Bitmap": "BITMAP", "LabelList": "LABEL_LIST"}
"""LanceDB's scalar index types (``list_indices``' name → ``create_scalar_index``'s)."""


def _purge_versions(path: Path, reindex: bool = True) -> None:
    """Compact every table and remove every version but the newest (LanceDB's ``optimize``
    with no age threshold): the deleted rows' data files and old manifests go. With
    ``reindex``, each scalar index is rebuilt from the remaining rows first (CrewAI's ``scope``
    BTree kept the erased user's ``/user/USER`` after ``optimize``, measured on lancedb 0.30),
    so the old index files go with the old versions."""
    import lancedb

    db = lancedb.connect(str(path))
    for name in _tables(db):
        tbl = db.open_table(name)
        for col, kind, idx in _scalar_indices(tbl) if reindex else ():
            tbl.create_scalar_index(col, index_type=kind, replace=True, name=idx)
        tbl.optimize(cleanup_older_than=timedelta(0), delete_unverified=True)


def _scalar_indices(tbl: Any) -> list[tuple[str, str, str]]:
    """(column, ``create_scalar_index``'s type, name) of each single-column scalar index."""
    return [(i.columns[0], _SCALAR[str(i.index_type)], i.name) for i in tbl.list_indices()
            if str(i.index_type) in _SCALAR and len(i.columns) == 1]


def _erased_rows(path: Path, ids: set[str]) -> dict[str, tuple[set[bytes], set[str]]]:
    """Per erased id, before the erasure: its vectors' float32 bytes and its texts (``content``,
    ``scope``: the user's ``/user/USER``) as every version of every table holds them (an
    update's earlier vector included)."""
    import lancedb
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    out: dict[str, tuple[set[bytes], set[str]]] = {}
    if not ids or not path.is_dir():
        return out
    db = lancedb.connect(str(path))
    for name in _tables(db):
        tbl = db.open_table(name)
        for v in to_read(tbl.uri, [int(x["version"]) for x in tbl.list_versions()]):
            tbl.checkout(v)
            cols = [c for c in ("id", "vector", *_CHECKED) if c in tbl.schema.names]
            if "id" not in cols:
                continue
            data = tbl.search().where(_id_in(ids)).select(cols).limit(None).to_arrow()
            data = data.filter(pc.is_in(data["id"], value_set=pa.array(sorted(ids))))  # the filter's own check
            vecs = data["vector"].to_pylist() if "vector" in data.column_names else [None] * data.num_rows
            cols = [data[c].to_pylist() for c in _CHECKED if c in data.column_names]
            for n, (i, vec) in enumerate(zip(data["id"].to_pylist(), vecs, strict=True)):
                got = out.setdefault(str(i), (set(), set()))
                if vec is not None:
                    got[0].add(np.asarray(vec, dtype="<f4").tobytes())
                got[1].update(str(c[n]) for c in cols if c[n])
        tbl.checkout_latest()
    return out


def _id_in(ids: Iterable[str]) -> str:
    """LanceDB's SQL filter of the rows whose ``id`` is one of ``ids`` (each quoted, its quotes
    doubled): DataFusion reads the other columns of those rows only (0.2 s for 2,000 ids at 10^6
    rows, against 1.63 s for every row's vector, measured)."""
    return "id IN (" + ", ".join("'" + i.replace("'", "''") + "'" for i in sorted(ids)) + ")"


def _kept(path: Path, vecs: set[bytes], texts: set[str], written: dict[str, Any] | None = None,
          ) -> tuple[set[bytes], set[str]]:
    """Of ``vecs`` and ``texts`` (an erased row's), those the remaining rows hold themselves
    (another user's identical memory is theirs): the vector and checked columns of every table
    (read alone, or those of ``written``: the rows ``_rewrite`` just wrote, not read again);
    each row's vector's first 8 bytes matched against the erased vectors' by NumPy, and only
    those rows compared whole; the texts matched by Arrow (no row made a Python object)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    kept_vecs: set[bytes] = set()
    kept_texts: set[str] = set()
    for data in _remaining(path, bool(vecs), bool(texts), written):
        if "vector" in data.column_names and vecs and data.num_rows:
            kept_vecs |= _same_vectors(data["vector"], vecs)
        for c in (c for c in _CHECKED if c in data.column_names and texts):
            hit = data[c].filter(pc.is_in(data[c], value_set=pa.array(sorted(texts), type=pa.string())))
            kept_texts |= {str(t) for t in hit.to_pylist() if t}
    return kept_vecs, kept_texts


def _remaining(path: Path, vecs: bool, texts: bool, written: dict[str, Any] | None) -> Iterator[Any]:
    """Each table's vector (with ``vecs``) and checked (with ``texts``) columns: of ``written``
    where given, else read from the instance."""
    if written is not None:
        for data in written.values():
            yield data.select([c for c in ("vector", *_CHECKED) if c in data.column_names])
        return
    import lancedb

    if not path.is_dir():
        return
    db = lancedb.connect(str(path))
    for name in _tables(db):
        tbl = db.open_table(name)
        cols = [c for c in ("vector", *(_CHECKED if texts else ())) if c in tbl.schema.names and (c != "vector" or vecs)]
        if cols:
            yield tbl.search().select(cols).limit(None).to_arrow()


def _same_vectors(column: Any, vecs: set[bytes]) -> set[bytes]:
    """Of ``vecs`` (float32 bytes), those a row of ``column`` (``fixed_size_list<float>``) holds,
    chunk by chunk (no copy of the column: combining its 975 chunks at 10^6 rows took 2.3 s):
    rows whose first 8 bytes are some erased vector's first 8 found by ``np.isin``, then only
    those rows' bytes compared whole."""
    import numpy as np
    import pyarrow as pa

    out: set[bytes] = set()
    for chunk in column.chunks:
        if not len(chunk) or not pa.types.is_fixed_size_list(chunk.type):
            out |= _same_vectors_listed(chunk, vecs)
            continue
        size = chunk.type.list_size
        flat = chunk.values.slice(chunk.offset * size, len(chunk) * size).to_numpy(zero_copy_only=False)
        rows = np.asarray(flat, dtype="<f4").reshape(len(chunk), size).view(np.uint8)
        out |= _same_rows(rows, np.asarray(chunk.is_valid()), vecs)
    return out


def _same_vectors_listed(chunk: Any, vecs: set[bytes]) -> set[bytes]:
    """``_same_vectors`` of a chunk of variable-size lists: each valid row's floats compared."""
    import numpy as np

    return {np.asarray(v, dtype="<f4").tobytes() for v in chunk.to_pylist() if v is not None} & vecs


def _same_rows(rows: np.ndarray, valid: np.ndarray, vecs: set[bytes]) -> set[bytes]:
    """Of ``vecs``, those a valid row of ``rows`` (one vector's bytes a row) holds."""
    import numpy as np

    width = rows.shape[1]
    same = [v for v in vecs if len(v) == width]
    if not same or not len(rows):
        return set()
    head = min(8, width)

    def key(a: np.ndarray) -> np.ndarray:
        return np.pad(a[:, :head], ((0, 0), (0, 8 - head))).view("<u8").ravel()

    wanted = np.frombuffer(b"".join(same), dtype=np.uint8).reshape(len(same), width)
    hits = np.flatnonzero(np.isin(key(rows), key(wanted)) & valid)
    return {rows[i].tobytes() for i in hits} & vecs


def _held(path: Path, files: Sequence[Path], erased: dict[str, tuple[set[bytes], set[str]]],
          written: dict[str, Any] | None = None) -> tuple[set[str], dict[str, int]]:
    """The erased rows any of whose vectors (float32) or texts (UTF-8) a file of the instance
    holds (one the remaining rows do not hold themselves: ``_kept``, asked first, so a vector
    that thousands of other rows hold is not searched for: searched, it matched at every one of
    them, 16 s at 10^6 rows, measured), and per file how many."""
    vecs = {v for vs, _ in erased.values() for v in vs}
    texts = {t for _, ts in erased.values() for t in ts}
    kept_vecs, kept_texts = _kept(path, vecs, texts, written)
    forms = {i: (v - kept_vecs) | {t.encode() for t in tx - kept_texts} for i, (v, tx) in erased.items()}
    counts = _found(files, sorted(vecs - kept_vecs), sorted(t.encode() for t in texts - kept_texts))
    left: set[str] = set()
    where: dict[str, int] = {}
    for f, here in counts.items():
        for i, fs in forms.items():
            if fs & here:
                left.add(i)
                where[f] = where.get(f, 0) + 1
    return left, where


def _found(files: Sequence[Path], *groups: Sequence[bytes]) -> dict[str, set[bytes]]:
    """Per file, the forms of ``groups`` it holds: each group searched
    apart (the byte scan picks its matcher per search: the vectors' float32 bytes by Hyperscan,
    the texts by the automata; 2,000 of each over a 1.2 GB LanceDB file took 1.1 + 1.3 s apart and
    4.5–5.7 s together, measured)."""
    per: dict[str, set[bytes]] = {}
    for needles in (g for g in groups if g):
        for f, counts in scan_bytes(files, list(needles)).items():
            per.setdefault(f, set()).update(n for n, c in zip(needles, counts, strict=True) if c)
    return per


def _rewrite(path: Path) -> dict[str, Any]:
    """Every table rewritten from its remaining rows in one commit (``mode="overwrite"``: a new
    version whose data files hold only them), its scalar indices made again; the rows a
    deletion only marked (LanceDB's compaction rewrites a fragment only past 10 % deleted rows)
    go with the old version. Returns each table's rows as written (Arrow)."""
    import lancedb

    db, out = lancedb.connect(str(path)), {}
    for name in _tables(db):
        tbl = db.open_table(name)
        indices = _scalar_indices(tbl)
        data = out[name] = tbl.to_arrow()
        tbl = db.create_table(name, data=data, mode="overwrite")
        for col, kind, idx in indices:
            tbl.create_scalar_index(col, index_type=kind, replace=True, name=idx)
    return out


def _compact_deleted(path: Path) -> int | None:
    """``compact_deleted`` of every table (pylance): the fragments compacted; None where
    pylance is not installed."""
    import lancedb

    db = lancedb.connect(str(path))
    done = [compact_deleted(db.open_table(name).uri) for name in _tables(db)]
    return None if None in done else sum(n for n in done if n is not None)


def _marked(path: Path) -> int:
    """The deletion files every table's current version still has after the versions were purged
    (``_deletions/``: rows only marked deleted in a fragment the compaction did not rewrite,
    their bytes still in its data file): the tables are rewritten without first searching the
    files for what the byte check would find there (a 1.2 GB search at 10^6 rows)."""
    return sum(1 for t in path.glob("*.lance") for f in (t / "_deletions").glob("*") if f.is_file())


def _verify_gone(path: Path, files: Callable[[], list[Path]], erased: dict[str, tuple[set[bytes], set[str]]],
                 ids: set[str], outcomes: Sequence[StoreOutcome]) -> None:
    """After the deletion: each fragment that keeps rows only marked deleted (a deletion file)
    is compacted without them (``compact_deleted``, pylance), the scalar indices rebuilt and
    every older version purged (``_purge_versions``); without pylance, LanceDB's ``optimize``
    (which rewrites a fragment only past 10 % deleted rows) and the purge. Where a deletion file
    is still left (``_marked``), the tables are rewritten (``_rewrite``, which makes the scalar
    indices from the remaining rows) and purged. Every erased row's vectors (float32) and texts
    (UTF-8) are then looked for in every file of the instance; when a data file still holds one,
    the tables are rewritten, purged and looked for again. ``clear`` stays possible only when
    none is found and every erased row's vector could be read."""
    t0 = time.monotonic()
    compacted = _compact_deleted(path)
    _purge_versions(path, reindex=compacted is not None)  # what only an older version held goes with the versions
    marked = _marked(path)
    written = _rewrite(path) if marked else None
    if compacted is None or written is not None:
        _purge_versions(path, reindex=written is None)
    took = time.monotonic() - t0
    left, where = _held(path, files(), erased, written)
    why = (f"{marked} deletion files were left after {'optimize' if compacted is None else 'compaction'} (rows "
           "only marked deleted in a fragment it did not rewrite)" if marked else
           f"{len(left)} erased rows were still in data files after optimize (deleted rows only marked)")
    if left and not marked:
        t0 = time.monotonic()
        written = _rewrite(path)
        _purge_versions(path, reindex=False)
        took = time.monotonic() - t0
    notes: list[str] = []
    if compacted and written is None:
        notes.append(f"LanceDB: {compacted} fragments kept rows only marked deleted (optimize rewrites a fragment "
                     "only past 10 % deleted rows); each compacted without them (Lance compact_files, "
                     f"materialize_deletions_threshold=0) in {took:.2f} s, scalar indices made again, older "
                     "versions removed")
    if written is not None:
        notes.append(f"LanceDB: {why}; every table rewritten from its {sum(d.num_rows for d in written.values())} "
                     f"remaining rows in {took:.2f} s, older versions removed")
        if not marked:
            left, where = _held(path, files(), erased, written)
    unread = ids - {i for i, (v, _) in erased.items() if v}
    notes.append(f"LanceDB: {len(left)} of the {len(erased)} erased rows' vectors (float32) or texts (content, scope) "
                 f"in the instance's {len(files())} files after the compaction (every older version removed)"
                 + "".join(f"; {n} in {Path(f).relative_to(path) if Path(f).is_relative_to(path) else Path(f).name}"
                           for f, n in sorted(where.items())))
    if unread:
        notes.append(f"LanceDB: no vector of {len(unread)} erased rows could be read (an interrupted erasure removed "
                     "them): the files were not checked for those")
    for n, o in enumerate(outcomes):
        o.notes += notes if n == 0 else []  # said once, for the instance
        if left or unread:
            o.ceiling = "logical"
