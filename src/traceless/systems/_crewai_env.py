"""What CrewAI is run with, for the adapter (``_crewai``) and its deletion's child process
(``_crewai_native``): telemetry off, its console quiet, its embedder and LLM."""
from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from traceless.errors import ConfigError
from traceless.models import Embedder, ModelBackend


def _quiet_env() -> None:
    os.environ["CREWAI_DISABLE_TELEMETRY"] = "true"
    os.environ["CREWAI_DISABLE_TRACKING"] = "true"
    os.environ["OTEL_SDK_DISABLED"] = "true"
    os.environ["CREWAI_TRACING_ENABLED"] = "false"


@contextmanager
def _console_off() -> Iterator[None]:
    """CrewAI's event bus prints a rich panel for every memory event on stdout (``Memory Save
    Started``, …); the audit's terminal output is traceless's own. ``crewai_core``'s
    suppression flag is a context variable the bus copies into its handlers' context, so it
    is set around each call into CrewAI and restored after."""
    from crewai_core.printer import set_suppress_console_output, should_suppress_console_output

    before = should_suppress_console_output()
    set_suppress_console_output(True)
    try:
        yield
    finally:
        set_suppress_console_output(before)


class _Embed:
    """CrewAI's embedder interface (a callable on a list of texts) over traceless's embedder."""

    def __init__(self, embedder: Embedder) -> None:
        self.embedder = embedder

    def __call__(self, input: list[str]) -> list[list[float]]:  # noqa: A002 - chromadb's name
        return [[float(x) for x in v] for v in self.embedder.embed(list(input))]


class _NoEmbed:
    """The embedder of an erasure without a runtime: CrewAI's deletions never call it."""

    def __call__(self, input: list[str]) -> list[list[float]]:  # noqa: A002 - chromadb's name
        raise ConfigError("crewai: this step needs the embedder the instance was written with; run it through "
                          "`traceless audit --memory crewai` (the erasure itself embeds nothing)")


def _llm(model: ModelBackend | None) -> Any:
    from crewai import LLM

    ep = model.endpoint() if model is not None else None  # the served model, over the OpenAI API
    if ep is None:
        return LLM(model="openai/unused", base_url="http://127.0.0.1:9/v1", api_key="local",  # loopback; unused
                   temperature=0.0)
    key = ep.api_key.get_secret_value() if ep.api_key is not None else "local"
    return LLM(model=f"openai/{ep.model}", base_url=ep.base_url, api_key=key, temperature=0.0)
