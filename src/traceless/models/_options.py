"""Engine options as one typed value, built once at the edge (the CLI's options with their
environment bindings, or the API's arguments) and passed down to ``load_backend``.

Nothing below the CLI and the API reads the process environment for these settings: the
edge reads it (``EngineOptions.from_env(os.environ)``, or click's ``envvar=`` bindings named
by ``ENGINE_ENV``), and every engine gets what it needs from the value it is given. Provider
keys travel the same way (``Credentials``), never in a repr, a dump or the model identity.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError, field_validator

from traceless._engine_env import ENGINE_ENV
from traceless.errors import ConfigError
from traceless.models._speculation import parse_speculation

__all__ = ["AUDIT_KV_TOKENS", "AUDIT_SLOT_CONTEXT", "ENGINE_ENV", "Credentials", "EngineOptions", "Endpoint",
           "ServerPreset"]

AUDIT_SLOT_CONTEXT = 4096
"""Context per llama.cpp slot for an audit whose system asks for no more (a native probe
prompt is a few hundred tokens)."""
AUDIT_KV_TOKENS = 8 * AUDIT_SLOT_CONTEXT
"""Slots × context an audit's server holds at most (qwen 0.5b: ~12 KB of KV cache per token)."""


@dataclass(frozen=True)
class ServerPreset:
    """How a llama.cpp server is started for one kind of run (``EngineOptions.audit_server``):
    the ``load_backend`` settings a policy chose, each None one left to the server's default."""

    ctx: int
    """Context tokens per slot."""
    parallel: int
    """Slots."""
    cache_prompt: bool | None = None
    """Whether the server keeps a prompt cache (None: on with several slots)."""
    request_cache_prompt: bool | None = None
    """Whether the audit's own requests use it (None: as the server)."""
    max_concurrency: int | None = None
    """Requests in flight at once (None: one per slot)."""

    def kwargs(self) -> dict[str, Any]:
        """The settings given (``load_backend(..., **preset.kwargs())``)."""
        return {k: v for k, v in asdict(self).items() if v is not None}

_TRUE, _FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off")


class Credentials(BaseModel):
    """Provider API keys and base-URL overrides (``OPENAI_API_KEY``, ``OLLAMA_HOST`` …), read
    from the environment at the edge. The values are secrets: hidden in repr, never dumped,
    never part of a model identity."""

    model_config = ConfigDict(frozen=True)

    values: dict[str, SecretStr] = Field(default_factory=dict)
    """Variable name -> value, for the provider variables that were set (and non-empty)."""

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> Credentials:
        """The provider variables ``env`` sets (the names every registered provider declares)."""
        from traceless.models._providers import provider_variables

        return cls(values={k: SecretStr(env[k]) for k in provider_variables() if env.get(k)})

    def get(self, name: str | None) -> str | None:
        """The value of variable ``name`` (None when unset or ``name`` is None)."""
        v = self.values.get(name) if name else None
        return v.get_secret_value() if v is not None else None


class Endpoint(BaseModel):
    """Where a backend's model answers over the OpenAI chat API: for a memory system that
    calls the model itself over HTTP (mem0's extraction LLM)."""

    model_config = ConfigDict(frozen=True)

    base_url: str
    """OpenAI-compatible base URL, ``http://HOST:PORT/v1``."""
    model: str
    """The model id to send."""
    api_key: SecretStr | None = None
    """The bearer key, when the server needs one (hidden in repr)."""


class EngineOptions(BaseModel):
    """How the model engine runs: slots, prompt cache, threads, timeout, context, speculation.

    ``None`` means the engine's own default. The options that can change a greedy reply
    (slots, prompt cache, context, speculation) are recorded in the model identity of the
    backend that uses them (a llama.cpp server's ``describe()["engine"]``; the context only
    when given), so a results dir or a generation cache never mixes replies of two settings,
    and the defaults leave the identity as it was before these options existed. Threads and
    the timeout change no reply and are not recorded (a resumed run on another machine stays
    the same model)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    parallel: int | None = Field(None, ge=1)
    """llama.cpp server slots (continuous batching over that many requests; also the study's
    groups in flight). ``None``: one slot, every request computed alone, so reruns repeat.
    Faster with more on a CPU, but batched decoding changes greedy replies (recorded)."""
    prompt_cache: bool | None = None
    """Whether a llama.cpp server reuses cached prompt prefixes. ``None``: off with one slot
    (a reply then depends on its prompt only), on with several (already not reproducible)."""
    threads: int | None = Field(None, ge=1)
    """CPU threads of the local engine (llama.cpp server or transformers). ``None``: the CPUs
    free when it starts (``free_cpus``); a llama.cpp server then follows them during the run
    (restarted between requests when they change persistently: ``ThreadAdapter``), unless a
    memory system was given its URL. Not part of the identity (replies are the same for every
    count: bench/bench_threads.py)."""
    timeout: float | None = Field(None, gt=0)
    """Seconds to wait for one reply from a served model. ``None``: 900 for a llama.cpp server
    of ours (queued requests on a loaded machine are slow, not dead), 120 for a remote API.
    Not part of the identity."""
    context: int | None = Field(None, ge=1)
    """Context tokens per llama.cpp slot. ``None``: the caller's (8192 for a study; an audit
    takes what its memory system needs, at least 4096)."""
    speculation: str = "none"
    """llama.cpp n-gram speculative decoding, ``TYPE[:DRAFT_MAX]`` (e.g. ``ngram-map-k:16``);
    ``none`` is off. Opt-in; recorded in the identity."""
    turn_stop: bool = False
    """Stop a llama.cpp reply where it writes one of its chat template's turn markers as text
    (``<|im_end|>``, ``<|im_start|>`` …: its turn is over), not only at its end-of-turn token
    (which always stops it). Greedy decoding is causal, so the kept reply is the stopped-at
    prefix of the plain one, token for token; a reply that writes no marker is unchanged.
    Opt-in (it shortens such a reply), from the API only (no CLI option yet); the markers are
    recorded in the identity."""
    credentials: Credentials = Field(default_factory=Credentials, exclude=True, repr=False)
    """Provider keys and base URLs, from the edge's environment (never dumped or shown)."""

    @field_validator("speculation")
    @classmethod
    def _check_speculation(cls, v: str) -> str:
        parse_speculation(v)  # a bad one is a ConfigError naming the choices
        return v.strip().lower()

    @classmethod
    def from_env(cls, env: Mapping[str, str], **given: Any) -> EngineOptions:
        """The options named in ``env`` by ``ENGINE_ENV`` (an edge passes ``os.environ``),
        overridden by ``given`` values that are not None, with ``env``'s provider credentials.
        A malformed value is a ``ConfigError`` naming the variable."""
        fields: dict[str, Any] = {}
        for field, var in ENGINE_ENV.items():
            raw = (env.get(var) or "").strip()
            if given.get(field) is not None:
                fields[field] = given[field]
            elif raw:
                fields[field] = _parse(field, var, raw)
        return cls.build(credentials=Credentials.from_env(env), **fields)

    def audit_server(self, context_tokens: int = 0) -> ServerPreset:
        """The audit's llama.cpp server, reproducible by default: one slot; without the prompt
        cache unless the memory system's own prompts need a long context (``context_tokens``
        over ``AUDIT_SLOT_CONTEXT``, e.g. mem0's ~8.7k-token shared extraction prompt): then
        the server caches it for the system's own calls and the probes are sent with the cache
        off, so they too are computed alone. ``parallel`` = N opts into N slots (at most what
        ``AUDIT_KV_TOKENS`` holds) with the prompt cache: faster, not reproducible run to run."""
        ctx = max(context_tokens, self.context or AUDIT_SLOT_CONTEXT)
        if self.parallel:
            return ServerPreset(ctx, max(1, min(self.parallel, AUDIT_KV_TOKENS // ctx)))
        if ctx > AUDIT_SLOT_CONTEXT:
            return ServerPreset(ctx, 1, cache_prompt=True, request_cache_prompt=False, max_concurrency=1)
        return ServerPreset(ctx, 1, cache_prompt=bool(self.prompt_cache))

    @classmethod
    def build(cls, **fields: Any) -> EngineOptions:
        """``EngineOptions(**fields)`` with a bad value as a ``ConfigError`` (not a traceback)."""
        try:
            return cls(**{k: v for k, v in fields.items() if v is not None})
        except ValidationError as e:
            err = e.errors()[0]
            where = ".".join(str(x) for x in err["loc"])
            var = ENGINE_ENV.get(where, "")
            raise ConfigError(f"engine option {where}{f' (${var})' if var else ''}: {err['msg']}") from None


def _parse(field: str, var: str, raw: str) -> Any:
    """One environment value as the field's type, or a ``ConfigError`` that says how to write it."""
    if field == "prompt_cache":
        low = raw.lower()
        if low not in (*_TRUE, *_FALSE):
            raise ConfigError(f"{var}={raw!r}: use 1 (prompt cache on) or 0 (off, the default)")
        return low in _TRUE
    if field == "speculation":
        return raw
    try:
        return float(raw) if field == "timeout" else int(raw)
    except ValueError:
        unit = "seconds, e.g. 900" if field == "timeout" else "a whole number, e.g. 4"
        raise ConfigError(f"{var}={raw!r}: use {unit}") from None
