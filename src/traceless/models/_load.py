"""Build any backend or embedder from a short spec string.

Backend specs (``load_backend``):

* a catalog name: ``qwen2.5-coder-0.5b-instruct`` (default), ``smollm2-135m-instruct``,
  ``qwen2.5-coder-1.5b-instruct`` → local transformers backend on the assembled GGUF
* ``transformers:/path/to/file.gguf``, ``transformers:/path/to/safetensors-dir`` or
  ``transformers:CATALOG-NAME``; a bare existing ``.gguf`` path or model folder works too
* ``hf:ORG/REPO`` → ``AutoModelForCausalLM.from_pretrained`` from the Hugging Face Hub
* ``scripted`` or ``scripted:REPLY`` → ``ScriptedBackend`` answering ``ok`` (or REPLY)
* ``openai:MODEL@BASE_URL`` → OpenAI-compatible HTTP server (key: ``OPENAI_API_KEY`` of the
  edge's ``Credentials``)
* ``PROVIDER/MODEL`` as people write them (``openai/gpt-4o-mini``, ``ollama/llama3``,
  ``openrouter/ORG/MODEL``) → the same backend at the provider's conventional base URL,
  key from its conventional variable (``traceless.models._providers``)

A new backend kind is one decorated factory::

    @BACKENDS.register("mykind", help="...")
    def _mykind(arg: str, **kw: Any) -> ModelBackend: ...

A factory that declares an ``engine`` parameter gets the run's ``EngineOptions`` (slots,
threads, timeout, credentials …, built once at the edge); the others never see it.
"""

from __future__ import annotations

import inspect
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from traceless.errors import ConfigError, UnknownNameError
from traceless.models._base import ModelBackend
from traceless.models._catalog import DEFAULT_MODEL, KNOWN_MODELS
from traceless.models._cpu import free_cpus
from traceless.models._embedder import Embedder, HashingEmbedder
from traceless.models._options import EngineOptions
from traceless.models._providers import PROVIDERS, resolve_provider, split_provider
from traceless.models._speculation import parse_speculation
from traceless.registry import ENTRY_POINT_GROUPS, Registry

__all__ = ["BACKENDS", "EMBEDDERS", "BackendFactory", "audit_backend", "fast_spec", "llamacpp_available",
           "parse_embedder_name", "load_backend", "parse_speculation", "load_embedder", "served_slots"]

BackendFactory = Callable[..., ModelBackend]

BACKENDS: Registry[BackendFactory] = Registry(
    "backend",
    hint="Use a catalog model name (`traceless models list`), transformers:PATH, hf:REPO, "
    "openai:MODEL@URL or scripted; install a catalog model with `traceless models pull NAME`",
    entry_points=ENTRY_POINT_GROUPS["backend"],
)


@BACKENDS.register("catalog", help="embedded catalog model by name (local transformers backend)")
def _catalog(arg: str, *, engine: EngineOptions, **kw: Any) -> ModelBackend:
    from traceless.models._transformers import TransformersBackend

    return TransformersBackend.from_catalog(arg or DEFAULT_MODEL, **_threads(engine, kw))


def _threads(engine: EngineOptions, kw: dict[str, Any]) -> dict[str, Any]:
    """``kw`` with ``num_threads`` from the engine options unless given."""
    if kw.get("num_threads") is None and engine.threads is not None:
        return {**kw, "num_threads": engine.threads}
    return kw


@BACKENDS.register("transformers", help="local GGUF file, safetensors folder or catalog name")
def _transformers(arg: str, *, engine: EngineOptions, **kw: Any) -> ModelBackend:
    from traceless.models._transformers import TransformersBackend

    kw = _threads(engine, kw)
    if not arg or arg in KNOWN_MODELS:
        return TransformersBackend.from_catalog(arg or DEFAULT_MODEL, **kw)
    p = Path(arg).expanduser()
    if p.is_file():
        return TransformersBackend.from_gguf(p, **kw)
    if p.is_dir():
        return TransformersBackend.from_pretrained(str(p), **kw)
    raise ConfigError(
        f"transformers:{arg}: no such file or folder and not a catalog model; pass a .gguf file, a "
        f"safetensors model folder, or one of {', '.join(KNOWN_MODELS)}"
    )


@BACKENDS.register("hf", help="Hugging Face Hub repo id (needs network or a local HF cache)")
def _hf(arg: str, *, engine: EngineOptions, **kw: Any) -> ModelBackend:
    from traceless.models._transformers import TransformersBackend

    kw = _threads(engine, kw)
    if not arg:
        raise ConfigError("hf: needs a repo id, e.g. hf:Qwen/Qwen2.5-0.5B-Instruct")
    return TransformersBackend.from_pretrained(arg, name=kw.pop("name", arg), **kw)


@BACKENDS.register("scripted", help="deterministic scripted replies (tests); scripted:REPLY")
def _scripted(arg: str, **kw: Any) -> ModelBackend:
    from traceless.models._scripted import ScriptedBackend

    kw.setdefault("default", arg or "ok")
    return ScriptedBackend(**kw)


@BACKENDS.register("openai", help="OpenAI-compatible server: openai:MODEL@BASE_URL")
def _openai(arg: str, *, engine: EngineOptions, **kw: Any) -> ModelBackend:
    from traceless.models._openai import OpenAIBackend

    model, _, base_url = arg.partition("@")
    if not model:
        raise ConfigError("openai: needs a model, e.g. openai:gpt-4o-mini@https://api.openai.com/v1")
    base_url = base_url or engine.credentials.get("OPENAI_BASE_URL") or "https://api.openai.com/v1"
    api_key = kw.pop("api_key", None) or engine.credentials.get("OPENAI_API_KEY")
    if engine.timeout is not None:
        kw.setdefault("timeout", engine.timeout)
    return OpenAIBackend(model=model, base_url=base_url, api_key=api_key, **kw)


@BACKENDS.register(
    "llamacpp",
    help="llamacpp:NAME|FILE.gguf: start a llama.cpp server on loopback (xllamacpp) and talk to it "
    "over the OpenAI API; ~5x faster decoding than transformers on CPU (no KV access)",
)
def _llamacpp(arg: str, *, engine: EngineOptions, **kw: Any) -> ModelBackend:
    from traceless.models._catalog import assemble, get_spec
    from traceless.models._llamacpp_server import LlamaCppServer
    from traceless.models._served import ServedBackend

    name = arg or DEFAULT_MODEL
    sha = ""
    if name in KNOWN_MODELS:
        gguf = assemble(name)
        sha = get_spec(name).sha256
    else:
        gguf = Path(name).expanduser()
        if not gguf.is_file():
            raise ConfigError(f"llamacpp:{arg}: not a catalog model ({', '.join(KNOWN_MODELS)}) or a .gguf file")
    # the engine options decide; a keyword (num_threads, parallel, ctx, cache_prompt,
    # speculation: what a caller such as the audit engine fixes) overrides them.
    # threads: default the CPUs free now, not the core count (llama.cpp's threads sync every
    # token, and one waiting for a busy core stalls them all), and follow them during the run
    # (LlamaCppServer(adapt_threads=True): restarted when they change; fewer even mid-request)
    fixed = int(kw.pop("num_threads", None) or engine.threads or 0)
    threads = fixed or free_cpus()
    # parallel > 1: continuous batching over that many server slots (much faster on CPU, where
    # decoding is memory-bound; replies are then not guaranteed bit-identical to parallel=1)
    parallel = int(kw.pop("parallel", None) or engine.parallel or 1)
    if parallel < 1:
        raise ConfigError(f"llamacpp: parallel must be >= 1, got {parallel} (--parallel, TRACELESS_LLAMACPP_PARALLEL)")
    # Requests beyond the server's slots wait in its queue, so on a loaded machine a reply can
    # take minutes without anything being wrong; the server is ours and local (a dead one is
    # seen at once), so wait long rather than abort a study run
    kw.setdefault("timeout", engine.timeout or 900.0)
    kind, draft = parse_speculation(kw.pop("speculation", None) or engine.speculation)
    ctx = kw.pop("ctx", None)
    asked_cache = kw.pop("cache_prompt", None)
    server = LlamaCppServer(gguf, ctx=int(ctx or engine.context or 8192), threads=threads, parallel=parallel,
                            cache_prompt=_prompt_cache(engine.prompt_cache if asked_cache is None else asked_cache,
                                                       parallel),
                            alias=gguf.stem, speculation=kind, draft_max=draft, adapt_threads=not fixed)
    server.start()
    kw.setdefault("max_concurrency", max(parallel, 4))
    return ServedBackend(server, weights_sha256=sha, name=f"llamacpp:{name}", context_set=engine.context is not None,
                         cache_prompt=kw.pop("request_cache_prompt", None),
                         turn_stop=bool(kw.pop("turn_stop", None) or engine.turn_stop), **kw)


def _prompt_cache(asked: bool | None, parallel: int) -> bool:
    """Whether a llama.cpp server reuses cached prompt prefixes. Off unless asked for: with the
    cache, a greedy reply depends on the request the slot served before it (the prefix it
    reuses changes the numerics), so a run resumed after a stop, or sent in another order,
    gives other replies (measured: a frontier slice stopped after 9 of 34 cells and resumed
    differed from an uninterrupted run in 9 replies; two uninterrupted runs agreed). Without
    it every request is computed alone and replies depend on the prompt only. On with
    ``cache_prompt=True``, ``EngineOptions(prompt_cache=True)`` (``--prompt-cache``,
    ``TRACELESS_LLAMACPP_PROMPT_CACHE=1``), or the opt-in slots (``parallel`` > 1: already
    not reproducible, and faster with it)."""
    if asked is not None:
        return bool(asked)
    return parallel > 1


def llamacpp_available() -> bool:
    """Whether the llama.cpp engine (the ``xllamacpp`` wheel) can be imported here."""
    import importlib.util

    return importlib.util.find_spec("xllamacpp") is not None


def fast_spec(spec: str) -> str:
    """The spec to load for work that needs no KV access (audits): a bare catalog name is
    served by llama.cpp (``llamacpp:NAME``, about 10x the transformers engine's decode rate on
    a CPU) when ``xllamacpp`` is importable; any other spec, ``transformers:NAME`` included,
    is kept as written."""
    spec = spec.strip()
    return f"llamacpp:{spec}" if spec in KNOWN_MODELS and llamacpp_available() else spec


def served_slots(asked: int | None = None) -> int:
    """Parallel llama.cpp slots for concurrent work: ``asked`` (``EngineOptions.parallel``) if
    given, else 4 per core up to 8. On a CPU decoding one stream is memory-bound (qwen 0.5b:
    ~50 tok/s against ~160 tok/s prefill on 2 cores), so several streams decode in one batch
    for little more than the price of one (bench/bench_engine.py measures it)."""
    if asked:
        return int(asked)
    return max(2, min(8, 4 * (os.cpu_count() or 1)))


def audit_backend(spec: str, context_tokens: int = 0,
                  engine: EngineOptions | None = None) -> tuple[str, ModelBackend]:
    """The audited agent's model (``traceless.audit.audit_model``), on the fastest engine
    that keeps the audit reproducible; returns the resolved spec and the backend. A bare
    catalog name is served by llama.cpp when xllamacpp is installed (``fast_spec``), as the
    engine options' audit preset says (``EngineOptions.audit_server``: one slot by default;
    every row records the engine's slots and cache)."""
    engine = engine or EngineOptions()
    resolved = fast_spec(spec)
    if not resolved.startswith("llamacpp:"):
        return resolved, load_backend(resolved, engine=engine)
    return resolved, load_backend(resolved, engine=engine, **engine.audit_server(context_tokens).kwargs())


def load_backend(spec: str = DEFAULT_MODEL, *, engine: EngineOptions | None = None, **kw: Any) -> ModelBackend:
    """Build a backend from ``spec`` (see the module docstring) with the engine options
    (``EngineOptions``, built at the edge; default: every engine default, no credentials);
    ``kw`` go to its constructor."""
    spec = spec.strip()
    engine = engine or EngineOptions()
    if spec in KNOWN_MODELS:
        return _call("catalog", spec, spec, engine, kw)
    if spec in BACKENDS and spec != "catalog":
        return _call(spec, "", spec, engine, kw)
    kind, sep, arg = spec.partition(":")
    if sep and kind in BACKENDS:
        return _call(kind, arg, spec, engine, kw)
    p = Path(spec).expanduser()
    if (p.is_file() and p.suffix == ".gguf") or (p.is_dir() and (p / "config.json").is_file()):
        return _call("transformers", str(p), spec, engine, kw)
    if split_provider(spec) is not None:
        return _provider_backend(spec, engine, **_placement_only_local("provider", spec, kw))
    raise UnknownNameError(
        "model",
        spec,
        [*KNOWN_MODELS, *(f"{k}:..." for k in BACKENDS.names() if k != "catalog")],
        "Install a catalog model with `traceless models pull NAME` (see `traceless models list`), or use "
        "transformers:/path/file.gguf, hf:ORG/REPO, openai:MODEL@URL, PROVIDER/MODEL "
        f"({', '.join(PROVIDERS.names())}), scripted",
    )


_LOCAL_KINDS = frozenset({"catalog", "transformers", "hf"})


def _call(kind: str, arg: str, spec: str, engine: EngineOptions, kw: dict[str, Any]) -> ModelBackend:
    """Factory ``kind`` on ``arg``; the engine options go to a factory that declares ``engine``."""
    factory = BACKENDS.get(kind)
    opts = _placement_only_local(kind, spec, kw)
    if "engine" in inspect.signature(factory).parameters:
        opts["engine"] = engine
    return factory(arg, **opts)


def _placement_only_local(kind: str, spec: str, kw: dict[str, Any]) -> dict[str, Any]:
    """``device``/``dtype`` place a local transformers model; a served or scripted model has
    its own (the server's), so asking for one there is a mistake worth naming."""
    asked = sorted(k for k in ("device", "dtype") if kw.get(k) is not None)
    if asked and kind not in _LOCAL_KINDS:
        raise ConfigError(
            f"{'/'.join(asked)} applies to local transformers models (a catalog name, transformers:PATH, "
            f"hf:REPO), not to {spec!r}; choose the device and dtype where that model is served, or drop the option"
        )
    return {k: v for k, v in kw.items() if k not in ("device", "dtype") or v is not None}


def _provider_backend(spec: str, engine: EngineOptions, **kw: Any) -> ModelBackend:
    from traceless.models._openai import OpenAIBackend

    t = resolve_provider(spec, engine.credentials)
    key = kw.pop("api_key", None) or t.api_key
    if engine.timeout is not None:
        kw.setdefault("timeout", engine.timeout)
    return OpenAIBackend(model=t.model, base_url=t.base_url, api_key=key, name=kw.pop("name", spec), **kw)


# ----------------------------------------------------------------------------------- embedders

EmbedderFactory = Callable[[], Embedder]
EMBEDDERS: Registry[EmbedderFactory] = Registry("embedder", entry_points=ENTRY_POINT_GROUPS["embedder"])
_EMBEDDER_CACHE: dict[str, Embedder] = {}


@EMBEDDERS.register("all-MiniLM-L6-v2", help="sentence-transformers all-MiniLM-L6-v2, 384-d (paper 000)")
def _minilm() -> Embedder:
    from traceless.models._st_embedder import SentenceTransformerEmbedder

    return SentenceTransformerEmbedder()


@EMBEDDERS.register("hashing", help="dependency-free hashing embedder, 256-d (unit tests)")
def _hashing() -> Embedder:
    return HashingEmbedder()


_EMBEDDER_ALIASES = {"sentence-transformers/all-MiniLM-L6-v2": "all-MiniLM-L6-v2", "minilm": "all-MiniLM-L6-v2"}


def parse_embedder_name(name: str) -> tuple[str, int | None]:
    """The one parser of embedder names: ``(registered name, dimension or None)``.
    ``hashing-DIM`` is the hashing embedder at ``DIM`` dimensions; anything else must be a
    registered name or alias. A bad name raises one ``ConfigError`` that says what to write."""
    key = _EMBEDDER_ALIASES.get(name, name)
    base, sep, dim = key.partition("-")
    if base == "hashing" and sep:
        if not dim.isdigit() or int(dim) < 1:
            raise ConfigError(f"embedder {name!r}: write 'hashing' or 'hashing-DIM' with a positive whole "
                              "number DIM (e.g. hashing-256)")
        return "hashing", int(dim)
    EMBEDDERS.get(key)  # unknown name: UnknownNameError listing the known embedders
    return key, None


def load_embedder(name: str = "all-MiniLM-L6-v2") -> Embedder:
    """A cached embedder instance by name (``all-MiniLM-L6-v2``, ``hashing``, ``hashing-DIM``;
    ``parse_embedder_name``)."""
    key, dim = parse_embedder_name(name)
    cache_key = f"{key}-{dim}" if dim is not None else key
    if cache_key not in _EMBEDDER_CACHE:
        _EMBEDDER_CACHE[cache_key] = HashingEmbedder(dim) if dim is not None else EMBEDDERS.get(key)()
    return _EMBEDDER_CACHE[cache_key]
