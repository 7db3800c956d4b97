"""The package layers, measured from the imports (``ast`` over the ``traceless`` sources that
are imported, so ``PYTHONPATH=/other/src`` measures that tree): every ``import`` and
``from ... import`` statement counts, including those inside functions and under
``TYPE_CHECKING`` (a lazy import is still a dependency).

A *package* is a top-level unit under ``traceless``: a subpackage (``traceless.audit``) or a
module (``traceless.metrics``, ``traceless._api``). Floors, bottom to top (docs/DESIGN, issue
#25): the foundation (errors, registry, paths, ...) ← models ← memory ← forget ←
systems / agent / runtime / datasets ← run / audit ← studies ← report (reads results) ←
the edge (cli, _api, the inspect bridge). An import may point down or sideways on its floor,
never up; no file-level import circle may cross packages; and a package imports only the
public names of another (no ``traceless.metrics`` outside ``traceless.audit``).

``python tests/unit/test_architecture.py`` prints the numbers."""

from __future__ import annotations

import ast
import types
from collections import defaultdict
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import traceless

ROOT = Path(traceless.__file__).resolve().parent

PENDING: set[tuple[str, str]] = set()
"""Arrows up tolerated while a move is under way (none now: the audit engine stands on the run
kernel ``traceless.run``, issue 25.1)."""

FLOORS: dict[str, int] = {
    **dict.fromkeys(("errors", "_version", "_lazy", "registry", "paths", "keys", "prompts", "_jsonin",
                     "_rows", "_hooks", "data", "_engine_env", "_secrets"), 0),
    "models": 1,
    "metrics": 2,
    "memory": 3,
    "forget": 4,
    **dict.fromkeys(("systems", "agent", "runtime", "datasets"), 5),
    "run": 6,
    "audit": 7,
    "studies": 8,
    "report": 9,
    **dict.fromkeys(("cli", "_api", "_erase_api", "_deployment", "_deployment_file", "_inspect", "schemas",
                     "traceless"), 10),
}
"""The floor of every package; a new package must be given one here (a test says so)."""


@dataclass(frozen=True)
class Import:
    """One imported module (or private name) of one statement."""

    importer: str
    """The importing module (``traceless.audit._certify``)."""
    target: str
    """The imported module (``traceless.forget``), or ``module.name`` for a private name."""
    line: int
    """Its line in the importer."""

    def where(self) -> str:
        return f"{self.importer}:{self.line} -> {self.target}"


def _modules() -> dict[str, Path]:
    out = {}
    for path in sorted(ROOT.rglob("*.py")):
        parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def package(module: str) -> str:
    """``traceless.audit._certify`` -> ``audit``; ``traceless`` -> ``traceless``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "traceless"


def _absolute(module: str, is_pkg: bool, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    base = module.split(".")[: None if is_pkg else -1]
    base = base[: len(base) - node.level + 1]
    return ".".join([*base, *([node.module] if node.module else [])])


def _targets(module: str, is_pkg: bool, node: ast.stmt, known: dict[str, Path]) -> list[str]:
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    if not isinstance(node, ast.ImportFrom):
        return []
    base = _absolute(module, is_pkg, node)
    subs = [f"{base}.{a.name}" for a in node.names if f"{base}.{a.name}" in known]
    private = [f"{base}.{a.name}" for a in node.names
               if a.name.startswith("_") and not a.name.startswith("__") and f"{base}.{a.name}" not in known]
    plain = len(subs) + len(private) < len(node.names)
    return [*([base] if plain or base != "traceless" else []), *subs, *private]


@cache
def imports() -> tuple[Import, ...]:
    """Every import of a ``traceless`` module by a ``traceless`` module."""
    known = _modules()
    out = []
    for module, path in known.items():
        is_pkg = path.name == "__init__.py"
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            for target in _targets(module, is_pkg, node, known):  # type: ignore[arg-type]
                if target == "traceless" or target.startswith("traceless."):
                    out.append(Import(module, target, node.lineno))  # type: ignore[attr-defined]
    return tuple(out)


def _cross() -> list[Import]:
    return [i for i in imports() if package(i.importer) != package(i.target)]


def arrows_up() -> list[Import]:
    """Imports from a package to one on a higher floor."""
    return [i for i in _cross()
            if FLOORS.get(package(i.target), -1) > FLOORS.get(package(i.importer), -1)]


def private_imports() -> list[Import]:
    """Imports of another package's private module or private name."""
    return [i for i in _cross()
            if any(p.startswith("_") and not p.startswith("__") for p in i.target.split(".")[2:])]


def _module_of(target: str, known: set[str]) -> str:
    while target not in known:
        target = target.rpartition(".")[0]
    return target


def _runs(target: str, known: set[str]) -> list[str]:
    """The files an import of ``target`` runs: its module and the ``__init__`` of each package
    above it (below ``traceless`` itself, which every module runs)."""
    module = _module_of(target, known)
    parts = module.split(".")
    return [".".join(parts[:n]) for n in range(2, len(parts) + 1)]


def circles() -> list[list[str]]:
    """The file-level import circles (strongly connected components, Tarjan) that span more
    than one package, each as its sorted modules."""
    known = set(_modules())
    graph: dict[str, set[str]] = defaultdict(set)
    for i in imports():
        graph[i.importer].update(_runs(i.target, known))
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len({package(m) for m in comp}) > 1:
                found.append(sorted(comp))

    for v in sorted(known):
        if v not in index:
            visit(v)
    return found


def test_no_arrow_runs_back_up() -> None:
    unplaced = sorted({package(m) for m in _modules()} - set(FLOORS))
    assert not unplaced, f"give these packages a floor in FLOORS: {unplaced}"
    up = [f"{i.where()} (floor {FLOORS[package(i.importer)]} -> {FLOORS[package(i.target)]})"
          for i in arrows_up() if (package(i.importer), package(i.target)) not in PENDING]
    assert not up, "imports that run up the layers:\n" + "\n".join(up)


def test_no_import_circle_across_packages() -> None:
    found = [c for c in circles() if not _pending(c)]
    assert not found, "import circles across packages:\n" + "\n".join(" <-> ".join(c) for c in found)


# Circles between two modules of one package (lazy and TYPE_CHECKING imports included), left
# as they are: each is a type-only or call-time import of the module that owns the type.
INNER_CIRCLES_PENDING = (
    ("traceless.forget._forget", "traceless.forget._registry"),
    ("traceless.memory._codec", "traceless.memory._gate_index", "traceless.memory._receipt_log",
     "traceless.memory._scrub_policy", "traceless.memory._store"),
    ("traceless.models._options", "traceless.models._providers"),
)


def inner_circles() -> list[tuple[str, ...]]:
    """Circles of direct module-to-module imports inside one package (``__init__`` left out:
    it imports every module of its package by design)."""
    mods = _modules()
    known, inits = set(mods), {m for m, p in mods.items() if p.name == "__init__.py"}
    graph: dict[str, set[str]] = defaultdict(set)
    for i in imports():
        t = _module_of(i.target, known)
        if t not in inits and i.importer not in inits and t != i.importer and package(t) == package(i.importer):
            graph[i.importer].add(t)

    def reach(v: str) -> set[str]:
        seen, todo = set(), [v]
        while todo:
            for w in graph[todo.pop()] - seen:
                seen.add(w)
                todo.append(w)
        return seen

    reached = {v: reach(v) for v in sorted(known)}
    comps = {tuple(sorted({v} | {w for w in reached[v] if v in reached[w]})) for v in known if v in reached[v]}
    return sorted(comps)


def test_no_import_circle_inside_a_package() -> None:
    found = [c for c in inner_circles() if c not in INNER_CIRCLES_PENDING]
    assert not found, "import circles inside a package (move the shared name to a leaf module):\n" + \
        "\n".join(" <-> ".join(c) for c in found)


def _pending(circle: list[str]) -> bool:
    """A circle made only by the pending arrow (every package in it on one pending pair)."""
    return any({package(m) for m in circle} <= set(pair) for pair in PENDING)


def test_no_private_cross_package_import() -> None:
    found = [i.where() for i in private_imports()]
    assert not found, "imports of another package's private names:\n" + "\n".join(found)


PLUGGABLE = {"memory_system", "forget_mode", "MEMORY_SYSTEMS", "FORGET_MODES", "BACKENDS", "EMBEDDERS", "STUDIES",
             "ERASURE_FINISHERS"}
"""The decorators (``@memory_system``, ``@forget_mode``) and registries (``@STUDIES.register``)
of the kinds with an entry-point group, and the store's ``ERASURE_FINISHERS`` (built-ins
only: the forget package's receipt completion): what a plug-in of traceless registers with."""

REGISTRY_HOMES = {"traceless.models._load": "defines BACKENDS and EMBEDDERS; its built-in factories stand beside "
                                            "the registry (same decorator as a plug-in's) and import nothing heavy"}
"""Modules that register built-ins of a kind in the module that defines its registry (so
nothing is loaded through the door for them), with the reason."""


def _registrars() -> list[str]:
    """The modules that register a built-in of a pluggable kind at module level."""
    out = []
    for module, path in _modules().items():
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            decos = node.decorator_list if isinstance(node, (ast.FunctionDef, ast.ClassDef)) else []
            for d in decos:
                f = d.func if isinstance(d, ast.Call) else d
                if isinstance(f, ast.Attribute) and f.attr == "register":
                    f = f.value
                if isinstance(f, ast.Name) and f.id in PLUGGABLE:
                    out.append(module)
    return sorted(set(out))


def _defaults() -> list[str]:
    """The built-in modules every registry of a pluggable kind loads through its door (an
    older tree measured with ``PYTHONPATH`` may lack a registry or its ``defaults``)."""
    import importlib

    out = []
    for module, name in (("traceless.systems", "MEMORY_SYSTEMS"), ("traceless.forget", "FORGET_MODES"),
                         ("traceless.models", "BACKENDS"), ("traceless.models", "EMBEDDERS"),
                         ("traceless.run", "STUDIES"), ("traceless.memory", "ERASURE_FINISHERS")):
        try:
            reg = getattr(importlib.import_module(module), name, None)
        except ImportError:
            continue
        out += list(getattr(reg, "defaults", ()))
    return out


def _mine(root: str, module: str) -> bool:
    """``module`` is ``root`` or one of its own modules (``_mem0`` -> ``_mem0_live``; a
    package -> its submodules)."""
    return module == root or module.startswith((root + ".", root + "_"))


def plugin_units() -> dict[str, list[str]]:
    """Every in-tree plug-in (a registry's default module, or a module that registers a built-in
    and is no default's) with its own modules."""
    known = _modules()
    roots = _defaults()
    roots += [m for m in _registrars() if m not in REGISTRY_HOMES and not any(_mine(r, m) for r in roots)]
    return {r: [m for m in known if _mine(r, m)] for r in roots}


def _private(target: str) -> bool:
    """A private module or name below a package (``traceless.systems._base``); the top-level
    modules are packages of their own, as in ``private_imports`` (``traceless._version``)."""
    return any(p.startswith("_") and not p.startswith("__") for p in target.split(".")[2:])


def _private_attributes(root: str, module: str) -> list[str]:
    """``alias._name`` uses of a traceless module or name bound by an import, the plug-in's
    own excepted (``from traceless.systems import _sqlite_live as live``, then ``live._count``)."""
    tree = ast.parse(_modules()[module].read_text(encoding="utf-8"))
    aliases = {}
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            base = node.module or "" if isinstance(node, ast.ImportFrom) else ""
            for a in node.names:
                full = f"{base}.{a.name}" if base else a.name
                if full.startswith("traceless") and (a.asname or "." not in a.name) and not _mine(root, full):
                    aliases[a.asname or a.name] = full
    return [f"{module}:{n.lineno} -> {aliases[n.value.id]}.{n.attr}" for n in ast.walk(tree)
            if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id in aliases
            and n.attr.startswith("_") and not n.attr.startswith("__")]


def plugin_private_imports() -> list[str]:
    """Imports (and ``alias._name`` uses) by an in-tree plug-in of a private name of any
    package, its own modules excepted: an in-tree adapter, mode or study uses only what a
    third-party one can."""
    found = []
    for root, own in plugin_units().items():
        for i in imports():
            if i.importer in own and _private(i.target) and not _mine(root, _module_of(i.target, set(_modules()))):
                found.append(i.where())
        found += [w for m in own for w in _private_attributes(root, m)]
    return found


def test_in_tree_plugins_import_only_public_names() -> None:
    assert "traceless.systems._mem0" in plugin_units()  # the rule sees the adapters
    found = plugin_private_imports()
    assert not found, "in-tree plug-ins importing private names (use the public ones a third-party " \
                      "plug-in imports, e.g. `from traceless.systems import MemorySystem`):\n" + "\n".join(found)


def test_every_builtin_plugin_is_loaded_through_the_registry_door() -> None:
    defaults = _defaults()
    outside = [m for m in _registrars() if m not in REGISTRY_HOMES and not any(_mine(r, m) for r in defaults)]
    assert not outside, f"modules that register built-ins but are no registry's `defaults`: {outside}"


def test_public_verbs_are_plain_functions_not_callable_packages() -> None:
    import importlib

    import traceless.audit
    import traceless.forget  # noqa: F401  (a subpackage import must not shadow the verb)

    for name in ("traceless.audit", "traceless.forget"):
        mod = importlib.import_module(name)
        assert type(mod) is types.ModuleType, f"{name} is a {type(mod).__name__}, not a plain module"
        assert not callable(mod)
    assert not (ROOT / "_callable.py").exists()
    from traceless import _api, audit, forget

    assert traceless.forget is forget is _api.forget and traceless.audit is audit is _api.audit
    assert isinstance(forget, types.FunctionType) and isinstance(audit, types.FunctionType)


def _main() -> None:
    up, private, found = arrows_up(), private_imports(), circles()
    edges = {(package(i.importer), package(i.target)) for i in _cross()}
    print(f"packages {len({package(m) for m in _modules()})}, package arrows {len(edges)}")
    print(f"arrows up: {len({(package(i.importer), package(i.target)) for i in up})} package pairs, "
          f"{len(up)} imports")
    for i in up:
        print("  ", i.where())
    print(f"circles across packages: {len(found)}")
    for c in found:
        print(f"   ({len(c)} files)", " ".join(c))
    print(f"private cross-package imports: {len(private)}")
    for i in private:
        print("  ", i.where())
    plug = plugin_private_imports()
    print(f"in-tree plug-ins: {len(plugin_units())}, their private imports: {len(plug)}")
    for w in plug:
        print("  ", w)


if __name__ == "__main__":
    _main()
