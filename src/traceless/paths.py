"""Where traceless keeps local state (model cache, keys). Nothing leaves the machine."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["cache_dir", "state_dir"]


def cache_dir() -> Path:
    """Model cache: ``$TRACELESS_CACHE`` or ``$XDG_CACHE_HOME/traceless`` or ``~/.cache/traceless``."""
    env = os.environ.get("TRACELESS_CACHE")
    if env:
        p = Path(env)
    else:
        base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
        p = Path(base) / "traceless"
    p.mkdir(parents=True, exist_ok=True)
    return p


def state_dir() -> Path:
    """Keys (receipt signing, gate HMAC): ``$TRACELESS_HOME`` or ``~/.local/state/traceless`` (0700)."""
    env = os.environ.get("TRACELESS_HOME")
    if env:
        p = Path(env)
    else:
        base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
        p = Path(base) / "traceless"
    p.mkdir(parents=True, exist_ok=True, mode=0o700)
    return p
