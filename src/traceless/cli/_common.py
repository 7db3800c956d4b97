"""Helpers shared by CLI commands: building backends/embedders, parsing lists."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # traceless.models pulls in numpy and the catalog: imported when a command builds one
    from traceless.models import Embedder, ModelBackend

__all__ = ["backend", "embedder", "split_list", "safe", "parse_levels", "say_migrating"]

# every C0/C1 control character (ESC, OSC introducers, BEL …) and the bidi overrides that
# can make text read differently from what it is
_CONTROL = {c: f"\\x{c:02x}" for c in [*range(0, 32), *range(0x7F, 0xA0)] if c not in (0x0A, 0x09)}
_CONTROL.update({c: f"\\u{c:04x}" for c in [*range(0x202A, 0x202F), *range(0x2066, 0x206A)]})


def safe(text: str | None) -> str:
    """Stored text is data: control characters shown as escapes, never sent raw to the
    terminal. (Render it with ``rich.text.Text`` so ``[bold]`` stays literal too.)"""
    return (text or "").translate(_CONTROL)


def parse_levels(value: str) -> tuple[int, ...]:
    """'1,2' → (1, 2); anything else is a clear error."""
    from traceless.errors import ConfigError

    out = []
    for v in split_list(value):
        if v not in ("1", "2"):
            raise ConfigError(f"--levels takes 1 and/or 2 (e.g. --levels 1,2), not {v!r}")
        out.append(int(v))
    return tuple(out)


def backend(spec: str) -> ModelBackend:
    """The backend of a command without engine options (a summarizer): the engine options
    and provider credentials from the environment (``cli._engine``)."""
    from traceless.cli._engine import engine_from_env
    from traceless.models import load_backend  # heavy import only when a model is needed

    return load_backend(spec, engine=engine_from_env())


def embedder(name: str) -> Embedder:
    """The embedder ``--embedder NAME`` names (``traceless.models.parse_embedder_name``)."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from traceless.models import load_embedder

    return load_embedder(name)


def split_list(value: str) -> list[str]:
    return [v.strip() for v in value.split(",") if v.strip()]


def say_migrating(db: str) -> Callable[[int, int], None]:
    """What a write command tells the user before it migrates a store of an older schema
    (``MemoryStore(on_migrate=...)``; read commands never migrate)."""
    from traceless.memory import redact_url

    def say(old: int, new: int) -> None:
        print(f"migrating {redact_url(db)} from schema version {old} to {new} (older traceless versions "
              "cannot open it afterwards)", file=sys.stderr)

    return say
