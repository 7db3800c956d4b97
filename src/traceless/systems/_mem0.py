"""The ``mem0`` memory system: the real ``mem0ai`` package, offline.

* embeddings: the bundled all-MiniLM-L6-v2 through mem0's ``huggingface`` embedder;
* vector store: qdrant in local-path mode under the work dir (``qdrant/``);
* history database: ``history.db`` in the work dir (tables ``history`` and ``messages``);
* LLM (``infer=True`` only): mem0's ``openai`` provider pointed at the audit's own
  OpenAI-compatible server (``--model llamacpp:NAME`` starts one on loopback);
* telemetry off (``MEM0_TELEMETRY=False`` before mem0 is imported; mem0's home dir, where
  it keeps a config file, is put inside the audit's work area unless ``MEM0_DIR`` is set).

Native deletions: ``delete`` (``Memory.delete(memory_id)`` on every memory of the user
whose text holds the secret), ``delete_all`` (``Memory.delete_all(user_id=...)``) and
``reset`` (``Memory.reset()``).
"""

from __future__ import annotations

import importlib.util
import json
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import Field, SerializerFunctionWrapHandler, model_serializer, model_validator

from traceless.errors import ConfigError, UnsupportedError
from traceless.memory import Session
from traceless.models import Embedder, FloatArray, ModelBackend
from traceless.systems import (
    Capability,
    ContextItem,
    DeletionTarget,
    ErasurePlan,
    FileVectors,
    MemorySystem,
    ScanReport,
    StoreOutcome,
    SystemConfig,
    SystemRuntime,
    memory_system,
)
from traceless.systems._mem0_check import check_keys, validate
from traceless.systems._mem0_live import (
    PROVIDERS,
    LiveLayout,
    Mem0Live,
    live_layout,
    probe_config,
    qdrant_lock,
)
from traceless.systems.kernel import StoreDigest
from traceless.systems.postgres import REPLICAS_SHOWN

__all__ = ["Mem0Config", "Mem0System"]

MEM0_VERSION = "2.2.1"
_DELETIONS = ("delete", "delete_all", "reset")
_COLLECTION = "traceless"
_PAGE = 1000


class Mem0Config(SystemConfig):
    """Settings of the mem0 adapter."""

    infer: bool = False
    """``False``: every message is stored verbatim (no LLM); ``True``: mem0's LLM extracts
    facts from each session (needs ``--model llamacpp:NAME`` or ``openai:MODEL@URL``)."""
    k: int = Field(3, ge=1)
    """Memories retrieved per query (``Memory.search(top_k=k)``)."""
    threshold: float = Field(0.1, ge=0.0, le=1.0)
    """mem0's search score threshold (its default)."""
    embedder_path: str | None = None
    """A sentence-transformers model folder (default: the bundled all-MiniLM-L6-v2)."""
    embedding_dims: int = Field(384, ge=1)
    """Dimension of that model's vectors."""
    llm_max_tokens: int = Field(512, ge=16)
    """Reply budget of each of mem0's LLM calls (``infer=True``). mem0's own default is 2,000:
    a small local model that loops on an extraction decodes all of it (tens of minutes on two
    cores) before mem0 rejects the unparsable JSON. A loop cut at this cap is rejected the same
    way, so what mem0 stores changes only for replies longer than the cap."""
    # ---- mem0's own configuration, exactly what Memory.from_config takes (issue #23)
    vector_store: dict[str, Any] | None = None
    """mem0's ``vector_store`` (``{"provider": "qdrant", "config": {"path": ..., "collection_name": ...}}``).
    The audit moves its path and collection into the work dir; scan/forget use it as given."""
    embedder: dict[str, Any] | None = None
    """mem0's ``embedder`` (default: the bundled all-MiniLM-L6-v2 through mem0's ``huggingface``)."""
    llm: dict[str, Any] | None = None
    """mem0's ``llm`` (default: the audit's served model; with ``infer=false`` it is never called)."""
    history_db_path: str | None = None
    """mem0's ``history_db_path`` (the audit moves it into the work dir)."""
    reranker: dict[str, Any] | None = None
    """mem0's ``reranker``."""
    version: str | None = None
    """mem0's API ``version``."""
    custom_instructions: str | None = None
    """mem0's ``custom_instructions`` (its custom fact-extraction prompt)."""
    pg_compaction: str | None = None
    """pgvector on a server: the physical step after the rows are deleted; ``vacuum`` (default:
    ``VACUUM (INDEX_CLEANUP ON)``, online, the app's queries do not wait; leaves the bytes in the
    heap pages' free space, so the claim stays ``logical``) or ``full`` (opt-in: ``VACUUM FULL``,
    the bytes gone from heap and indexes; an ``ACCESS EXCLUSIVE`` lock while it runs: the app's
    queries on the table wait for all of it)."""
    pg_replicas: list[str] | None = Field(None, repr=False)
    """pgvector on a server: connection strings of its physical streaming replicas; after the
    erasure each is waited for until it has replayed it, checkpointed, and its relation files
    read; the receipt says per replica verified or not (replicas not named: out of scope). A dump
    shows each without its password."""

    _no_passwords = REPLICAS_SHOWN

    @model_validator(mode="before")
    @classmethod
    def _traceless_section(cls, data: Any) -> Any:
        """traceless's own keys may sit under one ``traceless:`` section of a mem0 config."""
        if not isinstance(data, dict) or "traceless" not in data:
            return data
        section, rest = data["traceless"], {k: v for k, v in data.items() if k != "traceless"}
        if not isinstance(section, dict):
            raise ValueError(f"'traceless' must be an object of traceless's keys ({', '.join(TRACELESS_KEYS)})")
        bad = sorted(set(section) - set(TRACELESS_KEYS))
        if bad:
            raise ValueError(f"unknown key {'traceless.' + bad[0]!r} in the traceless section; "
                             f"its keys: {', '.join(TRACELESS_KEYS)}")
        twice = sorted(set(section) & set(rest))
        if twice:
            raise ValueError(f"{twice[0]!r} is given both flat and under 'traceless'; give it once")
        return rest | section

    @model_serializer(mode="wrap")
    def _drop_unset_mem0_keys(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """mem0 keys not given are left out, so an audit's identity (and its resume key) is
        what it was before they existed."""
        d: dict[str, Any] = handler(self)
        return {k: v for k, v in d.items() if (k not in MEM0_KEYS and k not in _SERVER_KEYS) or v is not None}

    def mem0_keys(self) -> dict[str, Any]:
        """The keys given for mem0 itself (what ``Memory.from_config`` gets)."""
        return {k: v for k in MEM0_KEYS if (v := getattr(self, k)) is not None}


_SERVER_KEYS = ("pg_compaction", "pg_replicas")
TRACELESS_KEYS = ("infer", "k", "threshold", "embedder_path", "embedding_dims", "llm_max_tokens", *_SERVER_KEYS)
MEM0_KEYS = ("vector_store", "embedder", "llm", "history_db_path", "reranker", "version", "custom_instructions")


def _import_mem0(home: Path) -> Any:
    # mem0 reads both at import time: telemetry must be off before the first import
    os.environ["MEM0_TELEMETRY"] = "False"
    os.environ.setdefault("MEM0_DIR", str(home))
    import mem0.memory.main as main
    import mem0.memory.telemetry as telemetry

    telemetry.MEM0_TELEMETRY = False
    main.MEM0_TELEMETRY = False
    return main


def _openai_endpoint(model: ModelBackend) -> tuple[str, str, str]:
    """(base URL, model id, key) of the model's OpenAI endpoint (a cache wrapper forwards it)."""
    ep = model.endpoint()
    if ep is None:
        raise ConfigError(
            "mem0 with infer=true calls its LLM over the OpenAI API: run the audit with "
            "--model llamacpp:NAME (starts a local server) or --model openai:MODEL@URL"
        )
    return ep.base_url, ep.model, ep.api_key.get_secret_value() if ep.api_key else "local"


def audit_config(config: Mem0Config, work_dir: Path, llm: dict[str, Any], embedder_model: str,
                 ) -> tuple[dict[str, Any], list[str]]:
    """The ``Memory.from_config`` dict of an audit: the user's mem0 config with only what must
    move into the work dir overridden (paths, collection name); returns it and what was overridden."""
    user = config.mem0_keys()
    overrides: list[str] = []
    vs = dict(user.get("vector_store") or {"provider": "qdrant"})
    provider = str(vs.get("provider", "qdrant"))
    vcfg = dict(vs.get("config") or {})
    if provider not in PROVIDERS:  # the message scan/forget give (issue 40.9): faiss crashed after 13 s
        raise UnsupportedError(f"mem0 vector_store {provider!r} cannot be scanned or erased yet; "
                               f"supported: {', '.join(PROVIDERS)} with a local config.path")
    for key, val in (("path", str(work_dir / provider)), ("collection_name", _COLLECTION)):
        if key in vcfg and vcfg[key] != val:
            overrides.append(f"vector_store.config.{key}: {vcfg[key]} -> {val}")
        vcfg[key] = val
    if provider == "qdrant":
        vcfg.setdefault("embedding_model_dims", config.embedding_dims)
        vcfg.setdefault("on_disk", True)
    for key in ("url", "host", "port", "api_key"):
        if vcfg.pop(key, None) is not None:
            overrides.append(f"vector_store.config.{key}: removed (the audit writes a local instance)")
    hist = str(work_dir / "history.db")
    if "history_db_path" in user:
        overrides.append(f"history_db_path: {user['history_db_path']} -> {hist}")
    cfg = {k: v for k, v in user.items() if k not in ("vector_store", "history_db_path")}
    cfg["vector_store"] = {"provider": provider, "config": vcfg}
    cfg["history_db_path"] = hist
    cfg.setdefault("embedder", {"provider": "huggingface", "config": {
        "model": embedder_model, "embedding_dims": config.embedding_dims}})
    if "llm" in cfg:
        overrides.append("llm: the audit's own model" if config.infer
                         else "llm: the audit's placeholder (infer=false: mem0 never calls it)")
    cfg["llm"] = {"provider": "openai", "config": llm}
    return cfg, overrides


@memory_system("mem0", help="mem0ai (qdrant local, MiniLM, history db); deletions delete/delete_all/reset")
class Mem0System(MemorySystem):
    """mem0's ``Memory`` in ``work_dir``; one ``add`` per session, scoped by ``user_id``."""

    capabilities = frozenset({Capability.LIVE, Capability.ONLINE, Capability.CERTIFY})

    extra = "mem0"
    requires = ("mem0", "qdrant_client")
    config_class = Mem0Config
    live: Mem0Live | None = None
    """The user's live instance (``attach``); None in an audit's work dir."""

    def __init__(self, work_dir: Path, config: SystemConfig, runtime: SystemRuntime) -> None:
        super().__init__(work_dir, config, runtime)
        assert isinstance(config, Mem0Config)
        self.cfg = config
        main = _import_mem0(work_dir.parent / "mem0-home")
        from traceless.models import minilm_path

        llm: dict[str, Any] = {"model": "unused", "api_key": "unused", "openai_base_url": "http://127.0.0.1:9/v1"}
        if config.infer:
            base, name, key = _openai_endpoint(runtime.model)
            llm = {"model": name, "api_key": key, "openai_base_url": base, "temperature": 0.0,
                   "max_tokens": config.llm_max_tokens}
        check_keys(config.mem0_keys())
        validate(config.mem0_keys())
        cfg, self.overrides = audit_config(config, work_dir, llm, str(config.embedder_path or minilm_path()))
        self.memory = main.Memory.from_config(cfg)
        self._vector_store: dict[str, Any] = cfg["vector_store"]
        self._embedder_name = str(cfg["embedder"].get("config", {}).get("model", "mem0-embedder"))

    @classmethod
    def deletions(cls, config: SystemConfig) -> tuple[str, ...]:
        return _DELETIONS

    @classmethod
    def audit_overrides(cls, config: SystemConfig) -> list[str]:
        if not isinstance(config, Mem0Config):
            return []
        return audit_config(config, Path("WORK_DIR"), {}, "minilm")[1]

    def describe(self) -> dict[str, Any]:
        d = super().describe()
        if getattr(self, "overrides", None):
            d["overrides"] = list(self.overrides)
        return d

    @classmethod
    def context_tokens(cls, config: SystemConfig) -> int:
        # mem0's extraction system prompt alone is ~8.7k tokens (ADDITIVE_EXTRACTION_PROMPT)
        return 16384 if isinstance(config, Mem0Config) and config.infer else 0

    def write(self, sessions: Sequence[Session]) -> None:
        for s in sessions:
            msgs = [{"role": t.role, "content": t.content} for t in s.turns if t.role in ("user", "assistant")]
            self.memory.add(msgs, user_id=s.user_id, metadata={"session_id": s.session_id}, infer=self.cfg.infer)

    def context(self, owner: str, query: str, view: str = "agent") -> list[ContextItem]:
        res = self.memory.search(query, filters={"user_id": owner}, top_k=self.cfg.k, threshold=self.cfg.threshold)
        return [ContextItem(str(r["id"]), str(r["memory"])) for r in res["results"] if str(r["memory"]).strip()]

    def _user_memories(self, owner: str) -> list[dict[str, Any]]:
        res = self.memory.get_all(filters={"user_id": owner}, top_k=100_000)
        return list(res["results"])

    def delete(self, operation: str, target: DeletionTarget) -> dict[str, Any]:
        if operation == "delete":
            ids = [m["id"] for m in self._user_memories(target.owner) if target.literal in str(m["memory"])]
            for i in ids:
                self.memory.delete(i)
            return {"deleted_ids": ids}
        if operation == "delete_all":
            self.memory.delete_all(user_id=target.owner)
            return {}
        if operation == "reset":
            self.memory.reset()
            return {}
        raise ConfigError(f"mem0: unknown deletion {operation!r}; known: {', '.join(_DELETIONS)}")

    # ------------------------------------------------------------------ scanning
    def _points(self, entities: bool) -> Iterable[str]:
        """The payloads of the memory collection (or of its entity collection, ``NAME_entities``)."""
        client = self.memory.vector_store.client
        wanted = (lambda n: n.endswith("_entities")) if entities else (lambda n: not n.endswith("_entities"))
        if not hasattr(client, "get_collections"):  # chroma: every collection's metadata, through its own API
            for col in client.list_collections():
                for md in (col.get(include=["metadatas"])["metadatas"] or []) if wanted(col.name) else []:
                    yield json.dumps(md, ensure_ascii=False)
            return
        for col in client.get_collections().collections:
            offset = None
            while wanted(col.name):
                points, offset = client.scroll(col.name, limit=_PAGE, offset=offset, with_payload=True,
                                               with_vectors=False)
                for p in points:
                    yield json.dumps(p.payload, ensure_ascii=False)
                if offset is None:
                    break

    def _table(self, table: str) -> Iterable[str]:
        from traceless.systems.sqlite import table_texts

        return table_texts(self.work_dir / "history.db", table)

    def stores(self) -> dict[str, Iterable[str]]:
        # the scan's and the receipt's store names (``Mem0Live.store_names``)
        return {"vector_store": list(self._points(False)), "entity_store": list(self._points(True)),
                "history": self._table("history"), "messages": self._table("messages")}

    def files(self) -> list[Path]:
        home = Path(os.environ.get("MEM0_DIR", self.work_dir.parent / "mem0-home"))
        extra = sorted(p for p in home.rglob("*") if p.is_file()) if home.is_dir() else []
        return super().files() + extra

    def close(self) -> None:
        if self.live is not None:  # attached: every read and write opened and closed its own connection
            return
        client = getattr(self.memory.vector_store, "client", None)
        self.memory.close()
        if client is not None:
            client.close()

    def file_vectors(self) -> FileVectors | None:
        """On chroma: every vector in its HNSW segment files and its log (``chroma_file_vectors``,
        ``chroma_log_vectors``; one row per distinct vector), with mem0's own embedder. None on
        the other vector stores (their files are not read as vectors yet)."""
        vs: dict[str, Any] | None = getattr(self, "_vector_store", None)  # an attached live instance has none
        if vs is None or vs["provider"] != "chroma":
            return None
        import numpy as np

        from traceless.systems._mem0_chroma import chroma_file_vectors, chroma_log_vectors

        path = Path(vs["config"]["path"])
        parts = [(name, v) for name, v in (("HNSW segments", chroma_file_vectors(path)),
                                           ("log (embeddings_queue)", chroma_log_vectors(path))) if len(v)]
        dims = {v.shape[1] for _, v in parts}
        if len(dims) > 1:
            parts = [(n, v) for n, v in parts if v.shape[1] == self.cfg.embedding_dims]
        vecs = np.unique(np.concatenate([v for _, v in parts]), axis=0) if parts else np.zeros((0, 0), np.float32)
        where = path.relative_to(self.work_dir) if path.is_relative_to(self.work_dir) else path
        return FileVectors(vecs, _Mem0Embedder(self.memory.embedding_model, self._embedder_name, self.cfg.embedding_dims),
                           tuple(f"{where}: {name}" for name, _ in parts))

    # ------------------------------------------------- live instances (issue #23)
    @classmethod
    def attach_config(cls, work_dir: Path, config: SystemConfig) -> SystemConfig | None:
        """The instance an audit built in ``work_dir``, as a user's config names it."""
        assert isinstance(config, Mem0Config)
        cfg, _ = audit_config(config, work_dir, {}, str(config.embedder_path or "minilm"))
        return config.model_copy(update={"vector_store": cfg["vector_store"], "history_db_path": cfg["history_db_path"]})

    @classmethod
    def attach(cls, config: SystemConfig, runtime: SystemRuntime | None = None, *,
               read_only: bool) -> MemorySystem:
        """The user's instance as their config describes it; every path is checked to exist
        before anything is opened. Read-only: no client is opened at all, every file is read
        through SQLite ``mode=ro`` (see ``_mem0_live``)."""
        if not isinstance(config, Mem0Config):
            raise ConfigError(f"mem0 takes a Mem0Config, not {type(config).__name__}")
        check_keys(config.mem0_keys())  # mem0's own refusal of a nested typo, before anything (imports nothing)
        if not read_only and importlib.util.find_spec("mem0") is not None:  # the erasure imports mem0 anyway
            from traceless.paths import state_dir

            _import_mem0(state_dir() / "mem0-home")
            validate(config.mem0_keys())
        layout = live_layout(config.vector_store, config.history_db_path)
        self = cls.__new__(cls)
        self.work_dir, self.config, self.cfg = layout.history.parent, config, config
        if runtime is not None:
            self.runtime = runtime
        if layout.provider == "pgvector":  # a server (issue #35)
            from traceless.systems._mem0_pgvector import pg_live

            self.live = pg_live(layout, dict(config.vector_store or {}), read_only, config.pg_compaction,
                                config.pg_replicas or ())
        else:
            self.live = Mem0Live(layout, read_only=read_only)
        return self

    def _live(self) -> Mem0Live:
        live = getattr(self, "live", None)
        if not isinstance(live, Mem0Live):
            raise UnsupportedError("this mem0 instance is an audit's: scan and erasure run on the user's "
                                   "instance, opened with Mem0System.attach (`traceless scan --memory mem0`)")
        return live

    def scan(self, user: str | None, literals: Sequence[str], *, reveal: bool = False) -> ScanReport:
        return self._live().scan(user, literals, reveal)

    def plan_erasure(self, user: str | None, literals: Sequence[str]) -> ErasurePlan:
        return self._live().plan(user, literals)

    def bystander_digests(self, user: str | None) -> dict[str, StoreDigest]:
        return self._live().bystanders(user)

    def resume_bystanders(self, before: Mapping[str, StoreDigest]) -> None:
        resume = getattr(self._live(), "resume", None)  # a server's tallies carry marks (``Mem0PgLive``)
        if resume is not None:
            resume(dict(before))

    def execute_erasure(self, plan: ErasurePlan, literals: Sequence[str]) -> list[StoreOutcome]:
        return self._live().execute(plan, self._native_delete)

    def compact_residue(self, names: Sequence[str]) -> list[StoreOutcome]:
        """The driver's hook when the verification's byte scan still finds a literal in ``names``
        (``_erase_run._verify_compacting``): VACUUM those SQLite files (``Mem0Live.compact_residue``)."""
        return self._live().compact_residue(names)

    def check_erasable(self) -> None:
        """qdrant local's lock can be taken (``qdrant_lock``, without loading the collection):
        an application that holds the instance open is found here, before any history row is
        deleted."""
        live = self._live()
        if live.layout.provider != "qdrant":
            return
        with qdrant_lock(live.layout.path):
            pass

    def _open_vector_store(self) -> Any:
        from mem0.utils.factory import VectorStoreFactory
        from mem0.vector_stores.configs import VectorStoreConfig

        vs_cfg = dict(self.cfg.vector_store or {})
        try:
            vc = VectorStoreConfig(provider=vs_cfg.get("provider", "qdrant"), config=vs_cfg.get("config") or {})
            return VectorStoreFactory.create(vc.provider, vc.config)
        except RuntimeError as e:  # qdrant local: "Storage folder ... is already accessed by another instance"
            raise ConfigError(f"mem0's vector store at {self._live().layout.path} is in use ({e}); stop the "
                              "application that holds it and run this again (nothing was erased yet)") from None

    def instance_files(self) -> list[Path]:
        return self._live().files()

    def out_of_scope(self) -> list[str]:
        out = [*super().out_of_scope(), "the embedder's and the LLM provider's own logs and caches"]
        server = getattr(self._live(), "server_out_of_scope", None)
        if callable(server):
            out += server()
        return out

    def probe_instance(self, runtime: SystemRuntime) -> MemorySystem:
        """The attached instance read through mem0's own ``Memory`` (its vector store,
        history and embedder; ``search`` with ``k``/``threshold``), as the audit's agent reads
        it: what ``forget --memory mem0 --certify`` probes after the erasure. Close it."""
        from traceless.models import minilm_path
        from traceless.paths import state_dir

        main = _import_mem0(state_dir() / "mem0-home")
        probe = Mem0System.__new__(Mem0System)
        probe.work_dir, probe.config, probe.cfg, probe.runtime = self.work_dir, self.cfg, self.cfg, runtime
        probe.memory = main.Memory.from_config(probe_config(
            self.cfg.mem0_keys(), str(self.cfg.embedder_path or minilm_path()), self.cfg.embedding_dims))
        return probe

    def probe_ready(self, runtime: SystemRuntime) -> None:
        """Before the erasure: what ``probe_instance`` builds for its searches (mem0's embedder,
        LLM and reranker through mem0's own factories, from the same config) is built here, and
        the embedder embeds one text as a search does, offline as configured (a remote embedder
        with no network, a missing model folder fail here); its vectors' size is the vector
        store's ``embedding_model_dims`` where the config gives it. The vector store and the
        history database are not opened: nothing of the instance is read or written."""
        from traceless.models import minilm_path
        from traceless.paths import state_dir

        _import_mem0(state_dir() / "mem0-home")
        from mem0.configs.base import MemoryConfig
        from mem0.utils.factory import EmbedderFactory, LlmFactory, RerankerFactory

        cfg = probe_config(self.cfg.mem0_keys(), str(self.cfg.embedder_path or minilm_path()), self.cfg.embedding_dims)
        emb = cfg["embedder"]
        what = f"{emb.get('provider', '?')} embedder"
        try:
            mc = MemoryConfig(**cfg)
            vector = EmbedderFactory.create(mc.embedder.provider, mc.embedder.config, mc.vector_store.config).embed(
                "traceless --certify: can the probes' searches run", "search")
            what = f"{mc.llm.provider} LLM"
            LlmFactory.create(mc.llm.provider, mc.llm.config)
            if mc.reranker:
                what = f"{mc.reranker.provider} reranker"
                RerankerFactory.create(mc.reranker.provider, mc.reranker.config)
        except Exception as e:  # mem0's or its provider's: any failure is the one line below
            first = str(e).splitlines()[0][:200] if str(e) else ""
            raise ConfigError(f"mem0: --certify cannot run: the {what} of the memory config fails here "
                              f"({type(e).__name__}: {first}); make it reachable from this machine, or give one "
                              "that runs offline (embedder {\"provider\": \"huggingface\", \"config\": {\"model\": "
                              "\"/path/to/model\"}}), or run without --certify; nothing was erased") from None
        dims = ((self.cfg.vector_store or {}).get("config") or {}).get("embedding_model_dims")
        if isinstance(dims, int) and len(vector) != dims:
            raise ConfigError(f"mem0: --certify cannot run: the {emb.get('provider', '?')} embedder gives vectors of "
                              f"{len(vector)} dimensions, the vector store holds {dims}; give the embedder the "
                              "instance was written with, or run without --certify; nothing was erased")

    def _native_delete(self, user: str | None, vector_ids: list[str], entity_ids: list[str]) -> None:
        """mem0's own deletions on a live chroma instance: ``delete_all(user_id=user)``, then
        ``delete(id)`` for every other planned memory still there; entity records by id (on
        qdrant local the points are deleted by key: ``Mem0Live.execute``)."""
        from traceless.paths import state_dir

        live = self._live()
        main = _import_mem0(state_dir() / "mem0-home")
        from mem0.memory.storage import SQLiteManager

        store = self._open_vector_store()
        mem = main.Memory.__new__(main.Memory)  # no embedder or LLM is built: deletions need neither
        mem.config, mem.vector_store, mem._entity_store = None, store, None
        mem.db = SQLiteManager(str(live.layout.history))
        try:
            if user is not None:
                mem.delete_all(user_id=user)
            for mid in vector_ids:
                if store.get(vector_id=mid) is not None:
                    mem.delete(mid)
            _delete_entities(store, live.layout, entity_ids)
        finally:
            mem.db.close()
            close = getattr(getattr(store, "client", None), "close", None)
            if callable(close):  # qdrant's lock file; chroma's in-process system
                close()


def _delete_entities(store: Any, layout: LiveLayout, ids: list[str]) -> None:
    if not ids:
        return
    if layout.provider == "qdrant":
        from qdrant_client import models

        if store.client.collection_exists(layout.entity_collection):
            store.client.delete(layout.entity_collection, points_selector=models.PointIdsList(points=ids))
    else:
        names = {c.name for c in store.client.list_collections()}
        if layout.entity_collection in names:
            store.client.get_collection(layout.entity_collection).delete(ids=ids)


class _Mem0Embedder(Embedder):
    """mem0's own embedder (``Memory.embedding_model``) as a traceless ``Embedder``: the texts
    embedded as mem0 embeds a memory it adds (``memory_action="add"``), rows L2-normalised."""

    def __init__(self, inner: Any, name: str, dim: int) -> None:
        self.inner, self.name, self.dim = inner, Path(name).name or name, dim

    def embed(self, texts: list[str]) -> FloatArray:
        import numpy as np

        batch = getattr(self.inner, "embed_batch", None)
        rows = batch(texts, "add") if callable(batch) else [self.inner.embed(t, "add") for t in texts]
        x = np.asarray(rows, dtype=np.float32).reshape(len(texts), -1)
        out: FloatArray = x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), np.float32(1e-12))
        return out
