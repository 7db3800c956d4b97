"""Plug-ins through one door (issue #25.5): every pluggable kind (memory systems, forget
modes, backends, embedders, studies) is found through its entry-point group, registers through
the same decorator as the built-ins, and a broken plug-in is a ``PluginWarning`` naming its
package, never an error of an unrelated lookup. A temporary dist-info on ``sys.path`` plays
the third-party package."""

from __future__ import annotations

import importlib
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from traceless.forget import FORGET_MODES
from traceless.models import BACKENDS, EMBEDDERS, load_backend, load_embedder, messages
from traceless.registry import ENTRY_POINT_GROUPS, PluginWarning, Registry
from traceless.studies import STUDIES
from traceless.systems import MEMORY_SYSTEMS

MODULE = '''
from traceless.forget import forget_mode
from traceless.models import BACKENDS, EMBEDDERS, HashingEmbedder, ScriptedBackend

@forget_mode("plug_mode", help="a plug-in mode")
def plug_mode(op):
    op.note("plug-in")

@EMBEDDERS.register("plug-emb", help="a plug-in embedder")
def plug_emb():
    return HashingEmbedder(8)

@BACKENDS.register("plugbk", help="a plug-in backend")
def plugbk(arg, **kw):
    return ScriptedBackend(["from the plug-in"])
'''

REGISTRIES: dict[str, Registry[Any]] = {"memory system": MEMORY_SYSTEMS, "forget mode": FORGET_MODES,
                                        "backend": BACKENDS, "embedder": EMBEDDERS, "study": STUDIES}
ADDED = {"forget mode": "plug_mode", "backend": "plugbk", "embedder": "plug-emb"}


def _rediscover() -> None:
    for reg in REGISTRIES.values():
        reg._discovered = False


@pytest.fixture
def plugins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    site = tmp_path / "site"
    (site / "plug_pkg-0.1.dist-info").mkdir(parents=True)
    (site / "tl_plug_mod.py").write_text(MODULE)
    (site / "plug_pkg-0.1.dist-info" / "METADATA").write_text("Metadata-Version: 2.1\nName: plug-pkg\nVersion: 0.1\n")
    groups = "".join(f"[{g}]\n" + (f"{ADDED[k]} = tl_plug_mod\n" if k in ADDED else "")
                     + f"broken_{k.replace(' ', '_')} = no_such_plug_module_{k.replace(' ', '_')}\n"
                     for k, g in ENTRY_POINT_GROUPS.items())
    (site / "plug_pkg-0.1.dist-info" / "entry_points.txt").write_text(groups)
    monkeypatch.syspath_prepend(str(site))
    importlib.invalidate_caches()
    _rediscover()
    yield
    for kind, name in ADDED.items():
        REGISTRIES[kind]._entries.pop(name, None)
    sys.modules.pop("tl_plug_mod", None)
    _rediscover()


def test_every_kind_has_one_group_and_its_registry_uses_it() -> None:
    assert set(REGISTRIES) == set(ENTRY_POINT_GROUPS)
    for kind, reg in REGISTRIES.items():
        assert reg.group == ENTRY_POINT_GROUPS[kind] and reg.kind == kind


def test_plugins_register_through_the_builtin_decorators(plugins: None) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PluginWarning)
        assert FORGET_MODES.get("plug_mode").help == "a plug-in mode"
        assert load_embedder("plug-emb").dim == 8  # type: ignore[attr-defined]
        assert load_backend("plugbk").generate(messages(("user", "hi"))).text == "from the plug-in"


@pytest.mark.parametrize("kind", sorted(ENTRY_POINT_GROUPS))
def test_a_broken_plugin_of_any_kind_warns_naming_its_package(plugins: None, kind: str) -> None:
    reg = REGISTRIES[kind]
    with pytest.warns(PluginWarning) as rec:
        names = reg.names()  # the listing still works, built-ins included
    assert names and f"broken_{kind.replace(' ', '_')}" not in names
    msgs = [str(w.message) for w in rec]
    assert any("plug-pkg" in m and f"no_such_plug_module_{kind.replace(' ', '_')}" in m and kind in m
               for m in msgs), msgs


BUILTINS_PROBE = '''
import sys
import traceless.forget, traceless.run, traceless.systems
from traceless.forget import FORGET_MODES
from traceless.run import STUDIES
from traceless.systems import MEMORY_SYSTEMS
builtins = {builtins!r}
print(sorted(m for m in builtins if m in sys.modules))
{early}
print(MEMORY_SYSTEMS.names(), FORGET_MODES.names()[:2], STUDIES.names())
print(sorted(m for m in builtins if m not in sys.modules))
print([MEMORY_SYSTEMS.entry(n).module for n in MEMORY_SYSTEMS.names()])
'''


BUILTIN_MODULES = [*MEMORY_SYSTEMS.defaults,  # the adapters: derived from the registry's declaration
                   "traceless.forget._modes", "traceless.studies.afterdelete", "traceless.studies.frontier",
                   "traceless.studies.replay"]


def _probe(early: str = "") -> list[str]:
    import os
    import subprocess

    import traceless

    env = {**os.environ, "PYTHONPATH": str(Path(traceless.__file__).resolve().parents[1])}  # this traceless
    out = subprocess.run([sys.executable, "-c", BUILTINS_PROBE.format(early=early, builtins=BUILTIN_MODULES)], capture_output=True, text=True,
                         env=env, check=True, timeout=120)
    return out.stdout.splitlines()


def test_builtins_are_default_plugins_loaded_through_the_registry_door() -> None:
    """Importing the registries' packages imports none of their built-ins (no adapter, no
    mode, no study); the first listing loads every default module, in the declared order."""
    before, listing, never, modules = _probe()
    assert before == "[]" and never == "[]"
    assert modules == repr(list(MEMORY_SYSTEMS.defaults)), modules  # every built-in, in the declared order
    assert listing.split("] ['noop'")[0].count("'") == 2 * len(MEMORY_SYSTEMS.defaults), listing
    assert " ['noop', 'raw_only'] ['afterdelete', 'frontier', " in listing, listing
    # a built-in imported before the first listing does not move it up the list
    assert _probe("import traceless.systems._openai_agents, traceless.systems._mem0")[1:4:2] == [listing, modules]
    assert sorted(BUILTIN_MODULES) == sorted([*MEMORY_SYSTEMS.defaults, *FORGET_MODES.defaults, *STUDIES.defaults])


RACE_REGISTRY = '''
from traceless.registry import Registry
REG = Registry("race thing", defaults=("tl_race_builtins",))
seen = []
'''

RACE_BUILTINS = '''
import threading
from tl_race_registry import REG, seen

def lookup():
    try:
        seen.append(REG.get("late"))
    except Exception as e:
        seen.append(type(e).__name__)

other = threading.Thread(target=lookup)
other.start()
other.join(0.5)  # a second thread's first lookup while the built-ins are still loading
REG.register("early")(1)
REG.register("late")(2)
'''


def test_a_lookup_during_the_builtins_load_waits_for_them(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Another thread that asks for a built-in while the first lookup is still importing them
    (an audit's worker threads) gets it, not an unknown-name error from a half-filled registry."""
    (tmp_path / "tl_race_registry.py").write_text(RACE_REGISTRY)
    (tmp_path / "tl_race_builtins.py").write_text(RACE_BUILTINS)
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        mod = importlib.import_module("tl_race_registry")
        assert mod.REG.names() == ["early", "late"]
        builtins = sys.modules["tl_race_builtins"]
        builtins.other.join(10)
        assert mod.seen == [2]
    finally:
        sys.modules.pop("tl_race_registry", None)
        sys.modules.pop("tl_race_builtins", None)
