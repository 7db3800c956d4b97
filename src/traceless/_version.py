"""Code version recorded in every result row."""

from __future__ import annotations

import subprocess
from functools import lru_cache
from pathlib import Path

__version__ = "0.1.0"

__all__ = ["__version__", "code_version"]


@lru_cache(maxsize=1)
def code_version() -> str:
    """``0.1.0+g<commit>`` when run from a git checkout, else the package version."""
    here = Path(__file__).resolve().parent
    try:
        out = subprocess.run(
            ["git", "-C", str(here), "rev-parse", "--short=10", "HEAD"],
            capture_output=True, text=True, timeout=5, check=True,
        ).stdout.strip()
        return f"{__version__}+g{out}" if out else __version__
    except (OSError, subprocess.SubprocessError):
        return __version__
