"""Make the ``inspect_ai`` entry point that pyproject.toml declares visible to inspect.

``pip install -e '.[inspect]'`` writes it into the venv's metadata; a checkout used
through PYTHONPATH (a worktree over a venv installed from another checkout) lacks it. This
writes the same entry point, read from this checkout's pyproject.toml, into a dist-info
dir under ``where`` — so a pyproject.toml without the declaration fails here as it would
fail after a real install."""

from __future__ import annotations

import tomllib
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def declared() -> dict[str, str]:
    """The ``[project.entry-points.inspect_ai]`` table of pyproject.toml."""
    data = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    return dict(data["project"]["entry-points"]["inspect_ai"])


def ensure(where: Path) -> Path | None:
    """None when the installed metadata already declares the entry point as pyproject.toml
    does; else a dir (to put on sys.path / PYTHONPATH) holding a dist-info that declares it."""
    want = declared()
    have = {ep.name: ep.value for ep in metadata.entry_points(group="inspect_ai")}
    if all(have.get(k) == v for k, v in want.items()):
        return None
    info = where / "traceless_inspect_checkout-0.dist-info"
    info.mkdir(parents=True, exist_ok=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: traceless-inspect-checkout\nVersion: 0\n")
    lines = "".join(f"{k} = {v}\n" for k, v in want.items())
    (info / "entry_points.txt").write_text(f"[inspect_ai]\n{lines}")
    return where
