"""Datasets shipped inside the package (``traceless/data``), compressed.

A wheel installed anywhere finds its data here; nothing is looked up next to a checkout.
Only data whose license allows redistribution is shipped (each entry names its license
file, shipped alongside). LoCoMo (CC BY-NC 4.0) is deliberately not shipped: bring it
with ``traceless data import locomo``.

``dataset_path(name)`` decompresses an entry once into ``<cache>/data/`` (checked by
sha256, written atomically) and returns that plain JSON file, so any tool can read it.
"""

from __future__ import annotations

import hashlib
import lzma
import os
import tempfile
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from traceless.errors import InputFormatError
from traceless.paths import cache_dir
from traceless.registry import Registry

__all__ = [
    "BundledDataset",
    "DATASETS",
    "DEFAULT_DATASET",
    "DATA_ENV",
    "dataset_path",
    "license_text",
    "resolve_data",
]

DATA_ENV = "TRACELESS_LONGMEMEVAL"
"""Environment variable naming a LongMemEval file to use instead of the shipped subset."""


@dataclass(frozen=True)
class BundledDataset:
    """One shipped dataset."""

    name: str
    """Name used by ``traceless data path NAME`` and ``--data NAME``."""
    resource: str
    """Compressed file inside ``traceless/data`` (xz)."""
    filename: str
    """Name of the decompressed file in the cache."""
    sha256: str
    """sha256 of the decompressed bytes (identical to the upstream file's)."""
    license: str
    """License name."""
    license_file: str
    """Shipped license text inside ``traceless/data``."""
    description: str
    """One line: what it is and where it comes from."""


DATASETS: Registry[BundledDataset] = Registry("dataset", hint="list them with `traceless data list`")

_LME = BundledDataset(
    name="longmemeval-oracle-99",
    resource="longmemeval_oracle_subset99.json.xz",
    filename="longmemeval_oracle_subset99.json",
    sha256="a35a23c2f3e8caca2ff8a12c85ac9b33418b5e5569168e9faffedbcec74b9d99",
    license="MIT (Di Wu, 2024; github.com/xiaowu0162/LongMemEval)",
    license_file="LONGMEMEVAL_LICENSE.txt",
    description="99 instances of LongMemEval's oracle split (upstream JSON); the studies' default data",
)
DATASETS.register(_LME.name, help=_LME.description)(_LME)
DEFAULT_DATASET = _LME.name


def _package_file(name: str) -> bytes:
    return resources.files("traceless.data").joinpath(name).read_bytes()


def license_text(name: str) -> str:
    """The license text shipped with dataset ``name``."""
    return _package_file(DATASETS.get(name).license_file).decode("utf-8")


def dataset_path(name: str) -> Path:
    """A plain JSON file holding dataset ``name`` (decompressed into the cache once)."""
    ds = DATASETS.get(name)
    target = cache_dir() / "data" / ds.filename
    if target.is_file() and _sha256_file(target) == ds.sha256:
        return target
    raw = lzma.decompress(_package_file(ds.resource))
    if hashlib.sha256(raw).hexdigest() != ds.sha256:
        raise InputFormatError(f"the shipped dataset {name!r} is corrupted (sha256 mismatch); reinstall traceless")
    target.parent.mkdir(parents=True, exist_ok=True)
    # atomic: concurrent studies may materialize the same file at once
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{ds.filename}.")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(raw)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return target


def _sha256_file(p: Path) -> str:
    h = hashlib.sha256()
    with p.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def resolve_data(data: str | Path | None, *, flag: str = "--data ") -> Path:
    """The data file a study reads: ``data`` (a path or a shipped dataset's name), else the
    shipped LongMemEval subset (``$TRACELESS_LONGMEMEVAL`` is read at the edge: ``traceless
    study run --longmemeval``, which fills the config's empty data field). Fails at once with
    the fix when a given path is missing or not a file."""
    if data is not None and str(data) in DATASETS:
        return dataset_path(str(data))
    if data is not None:
        return _existing(Path(data).expanduser(), f"{flag}{data}")
    return dataset_path(DEFAULT_DATASET)


def _existing(p: Path, what: str) -> Path:
    if p.is_dir():
        raise InputFormatError(f"{what} is a directory; pass a data file (LongMemEval JSON or JSON Lines sessions)")
    if not p.is_file():
        raise InputFormatError(
            f"{what}: no such file. Pass an existing file, or a shipped dataset name "
            f"({', '.join(DATASETS.names())}; see `traceless data list`), or omit it to use {DEFAULT_DATASET}"
        )
    return p
