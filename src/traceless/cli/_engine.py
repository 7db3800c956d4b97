"""The engine options of the commands that run a model (``audit``, ``study run``), each bound
to its environment variable (click's ``envvar=``, as inspect_ai's CLI binds its own), and
the one place the CLI builds an ``EngineOptions`` from them: read here, passed down.

The provider keys and base URLs (``OPENAI_API_KEY``, ``OLLAMA_HOST`` …) are read from the
environment here too, into the options' ``Credentials`` (never shown or written)."""

from __future__ import annotations

import functools
import inspect
import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import typer

from traceless._engine_env import ENGINE_ENV

if TYPE_CHECKING:
    from traceless.models import EngineOptions

__all__ = ["engine_from_env", "engine_options", "opt_context", "opt_parallel", "opt_prompt_cache",
           "opt_speculation", "opt_threads", "opt_timeout", "with_engine_options"]

R = TypeVar("R")

_ENV = ENGINE_ENV  # one table with EngineOptions.from_env (floor 0: mounting a command imports no model code)


def opt_parallel() -> Any:
    return typer.Option(
        None, "--parallel", min=1, envvar=_ENV["parallel"],
        help="llama.cpp server slots (continuous batching; a study also keeps as many groups in flight). Default: "
        "one slot, so reruns repeat; more is faster on a CPU but batched decoding changes greedy replies "
        "(recorded in every row's model identity).")


def opt_prompt_cache() -> Any:
    return typer.Option(
        None, "--prompt-cache/--no-prompt-cache", envvar=_ENV["prompt_cache"],
        help="llama.cpp reuses cached prompt prefixes (faster; a reply then depends on the request before it). "
        "Default: off with one slot, on with --parallel > 1.")


def opt_threads(help: str = "Threads of the local model engine (default: the CPUs free when it starts, "
                            "measured from /proc/stat).") -> Any:
    return typer.Option(None, "--threads", min=1, envvar=_ENV["threads"], help=help)


def opt_timeout() -> Any:
    return typer.Option(
        None, "--timeout", min=1.0, envvar=_ENV["timeout"],
        help="Seconds to wait for one reply of a served model (default: 900 for a llama.cpp server, 120 for an API).")


def opt_context() -> Any:
    return typer.Option(
        None, "--context", min=256, envvar=_ENV["context"],
        help="Context tokens per llama.cpp slot (default: 8192 for a study; an audit takes what the memory "
        "system needs, at least 4096). Recorded in the model identity when given.")


def opt_speculation() -> Any:
    return typer.Option(
        "none", "--speculation", envvar=_ENV["speculation"],
        help="llama.cpp n-gram speculative decoding, TYPE[:DRAFT_MAX] (ngram-simple, ngram-map-k, ngram-map-k4v, "
        "ngram-mod, ngram-cache; e.g. ngram-map-k:16). Opt-in, recorded in every row's model identity; see "
        "docs/performance.md for its measured speed and reply identity.")


def engine_options(*, parallel: int | None = None, prompt_cache: bool | None = None, threads: int | None = None,
                   timeout: float | None = None, context: int | None = None,
                   speculation: str | None = None) -> EngineOptions:
    """The command's ``EngineOptions`` (its option values, already bound to the environment by
    click), with the provider credentials of this process's environment. A bad value is a
    ``ConfigError`` before any model loads."""
    from traceless.models import Credentials, EngineOptions

    return EngineOptions.build(parallel=parallel, prompt_cache=prompt_cache, threads=threads, timeout=timeout,
                               context=context, speculation=speculation, credentials=Credentials.from_env(os.environ))


def engine_from_env() -> EngineOptions:
    """For a command without engine options (``memory add --levels``, ``forget --summarize``):
    every option from its environment variable, and the provider credentials."""
    from traceless.models import EngineOptions

    return EngineOptions.from_env(os.environ)


def with_engine_options(threads_help: str | None = None) -> Callable[[Callable[..., R]], Callable[..., R]]:
    """The engine options of a command that runs a model (``audit``, ``study run``): added as
    its last parameters (``--speculation``, ``--threads``, ``--parallel``, ``--prompt-cache``,
    ``--timeout``, ``--context``, each bound to its variable), and the command called with
    ``engine=`` the ``EngineOptions`` they make (a bad value: a ``ConfigError`` before the
    command's body runs). ``threads_help``: the command's own help of ``--threads``."""
    options: dict[str, tuple[Any, Any]] = {
        "speculation": (str, opt_speculation()),
        "threads": (int | None, opt_threads() if threads_help is None else opt_threads(threads_help)),
        "parallel": (int | None, opt_parallel()), "prompt_cache": (bool | None, opt_prompt_cache()),
        "timeout": (float | None, opt_timeout()), "context": (int | None, opt_context())}

    def deco(fn: Callable[..., R]) -> Callable[..., R]:
        sig = inspect.signature(fn)

        @functools.wraps(fn)
        def run(**kw: Any) -> R:
            engine = engine_options(**{name: kw.pop(name) for name in options})
            return fn(**kw, engine=engine)

        added = [inspect.Parameter(name, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=opt, annotation=kind)
                 for name, (kind, opt) in options.items()]
        run.__signature__ = sig.replace(  # type: ignore[attr-defined]
            parameters=[*(p for p in sig.parameters.values() if p.name != "engine"), *added])
        run.__annotations__ = {k: v for k, v in fn.__annotations__.items() if k != "engine"} | {
            name: kind for name, (kind, _) in options.items()}
        return run

    return deco
