"""The import boundary of the commands that load no model (issue #13.4), checked by what a
real command run imports (``sys.modules``), not by timing: a later eager import of numpy,
the models, the store or the forget engine into one of these paths fails here.

Also: the lazy packages still export every public name, and the mode listing sees exactly
the registry the forget engine uses."""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from tests.unit._cli import cli

import traceless

SRC = Path(traceless.__file__).resolve().parents[1]

# run one command in a fresh interpreter; report what it imported and whether anything
# scanned the installed distributions' entry points
PROBE = """
import importlib.metadata as md, json, sys
scans = []
_ep = md.entry_points
md.entry_points = lambda *a, **k: (scans.append(repr(k or a)), _ep(*a, **k))[1]
from traceless.cli import main
code = 0
try:
    main(sys.argv[2:])
except SystemExit as e:
    code = e.code or 0
with open(sys.argv[1], "w") as f:
    json.dump({"code": code, "modules": sorted(sys.modules), "scans": scans}, f)
"""

# never imported by a command that loads no model
HEAVY = ("torch", "transformers", "scipy", "sentence_transformers", "llama_cpp", "traceless.models",
         "traceless.memory._pipeline", "traceless.forget._forget", "traceless._api", "traceless.systems",
         "traceless.audit", "traceless.studies", "traceless.agent", "traceless.runtime")


def _run(tmp: Path, *args: str) -> tuple[str, set[str], list[str]]:
    """(stdout, the modules imported, the entry-point scans made) of `traceless ARGS`."""
    out = tmp / "probe.json"
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    env.pop("PYDANTIC_DISABLE_PLUGINS", None)  # the CLI itself must switch the plug-in scan off
    p = subprocess.run([sys.executable, "-c", PROBE, str(out), *args], env=env, cwd=tmp, capture_output=True,
                       text=True, timeout=120)
    res = json.loads(out.read_text())
    assert res["code"] == 0, p.stderr
    return p.stdout, set(res["modules"]), res["scans"]


def _absent(modules: set[str], names: tuple[str, ...]) -> list[str]:
    return sorted(m for m in modules if any(m == n or m.startswith(n + ".") for n in names))


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real store, the signed receipt of a real forget on it, and the signer's public key."""
    d = tmp_path_factory.mktemp("startup")
    (d / "s.jsonl").write_text(
        '{"user_id":"u1","session_id":"s1","turns":[{"role":"user","content":"my locker code is QX4-AMBER-1234"}]}\n'
        '{"user_id":"u2","session_id":"s2","turns":[{"role":"user","content":"I swim on Mondays"}]}\n')
    assert cli("memory", "add", str(d / "s.jsonl"), "--db", str(d / "m.db"), "--embedder", "hashing") == 0
    assert cli("forget", "--db", str(d / "m.db"), "--mode", "full_purge", "--literal", "QX4-AMBER-1234",
               "--owner", "u1", "--receipt", str(d / "r.json")) == 0
    assert cli("keys", "export", "--out", str(d / "pub.txt")) == 0
    return d


def test_forget_modes_imports_neither_numpy_nor_the_engine(tmp_path: Path) -> None:
    from traceless.forget import FORGET_MODES

    out, mods, scans = _run(tmp_path, "forget", "modes")
    assert [line.split()[0] for line in out.splitlines()] == FORGET_MODES.names()
    assert _absent(mods, (*HEAVY, "numpy", "traceless.memory._store", "cryptography")) == []
    assert scans == ["{'group': 'traceless.forget_modes'}"]  # the listing includes plug-in modes; nothing else


def test_forget_verify_imports_no_store(store: Path) -> None:
    out, mods, scans = _run(store, "forget", "verify", "r.json", "--public-key", "pub.txt")
    assert "r.json: signature OK" in out and "mode full_purge, passed=True" in out
    assert _absent(mods, (*HEAVY, "numpy", "traceless.memory._store")) == []
    assert scans == []


def test_memory_show_imports_no_writer_models_or_systems(store: Path) -> None:
    out, mods, scans = _run(store, "memory", "show", "--db", "m.db")
    assert "I swim on Mondays" in out and out.rstrip().endswith("6 artifacts")
    # the store imports numpy only where vectors are handled (add, update_vector, search)
    assert _absent(mods, (*HEAVY, "numpy")) == []
    assert scans == []  # the pydantic plug-in scan is off in the CLI, and no memory-system plug-in is looked up


def test_help_and_keys_export_stay_light(tmp_path: Path) -> None:
    out, mods, scans = _run(tmp_path, "--help")
    assert "forget" in out and "memory" in out
    assert _absent(mods, (*HEAVY, "numpy", "pydantic", "traceless.forget", "traceless.memory")) == []
    out, mods, scans = _run(tmp_path, "keys", "export")
    assert "public_key: " in out
    assert _absent(mods, (*HEAVY, "numpy", "traceless.forget", "traceless.memory")) == []
    assert scans == []


def test_the_mode_listing_sees_the_engines_registry() -> None:
    """`forget modes` loads only the registry module; a mode registered anywhere the engine
    imports (and the mode listing does not) would be missing from the listing."""
    code = ("import sys, importlib; [importlib.import_module(m) for m in sys.argv[1:]]; "
            "from traceless.forget import FORGET_MODES; print(' '.join(FORGET_MODES.names()))")
    env = {**os.environ, "PYTHONPATH": str(SRC)}

    def names(*modules: str) -> list[str]:
        p = subprocess.run([sys.executable, "-c", code, *modules], env=env, capture_output=True, text=True,
                           timeout=120, check=True)
        return p.stdout.split()

    light = names("traceless.forget._registry")
    assert light == names("traceless._api", "traceless.forget._forget", "traceless.systems", "traceless.audit")
    assert {"noop", "full_purge", "lineage_closure"} <= set(light)


@pytest.mark.parametrize("package", ["traceless.forget", "traceless.memory"])
def test_lazy_packages_export_every_public_name(package: str) -> None:
    pkg = importlib.import_module(package)
    exports: dict[str, tuple[str, ...]] = pkg.EXPORTS
    listed = [n for names in exports.values() for n in names]
    assert sorted(listed) == sorted(pkg.__all__) and len(set(listed)) == len(listed)
    for module, names in exports.items():
        for name in names:
            assert getattr(pkg, name) is getattr(importlib.import_module(module, package), name), name
    assert set(pkg.__all__) <= set(dir(pkg))
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        pkg.nope  # noqa: B018


def test_forget_is_the_function_even_after_the_package_is_imported(tmp_path: Path) -> None:
    """In a fresh interpreter: importing the subpackage ``traceless.forget`` first does not
    shadow the public verb: ``traceless.forget`` and ``from traceless import forget`` are the
    plain function ``traceless._api.forget``; the subpackage is a plain module whose ``forget``
    is the engine's function."""
    code = ("import importlib, types\n"
            "import traceless.forget\n"
            "from traceless.forget import forget, ForgetTarget\n"
            "from traceless import forget as public\n"
            "import traceless, traceless._api\n"
            "from traceless.forget._forget import forget as engine\n"
            "pkg = importlib.import_module('traceless.forget')\n"
            "assert type(pkg) is types.ModuleType and pkg.forget is engine and forget is engine\n"
            "assert public is traceless.forget is traceless._api.forget\n"
            "from traceless import Memory\n"
            "with Memory(sys.argv[1], embedder='hashing') as mem:\n"
            "    mem.add('my locker code is QX4-AMBER-1234', user='bob')\n"
            "    r = public(mem.store, ForgetTarget.literal('QX4-AMBER-1234', 'bob'), 'full_purge',\n"
            "               writer=mem.writer)\n"
            "    assert r.matched and r.verification.passed and not mem.store.containing('QX4-AMBER-1234')\n"
            "print('ok')\n")
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    p = subprocess.run([sys.executable, "-c", "import sys\n" + code, str(tmp_path / "m.db")], env=env,
                       capture_output=True, text=True, timeout=120)
    assert p.stdout.strip() == "ok", p.stderr
