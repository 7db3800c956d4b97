"""mem0's own refusal of a typo nested in a mem0 config section (issue 40.9): an unknown key
inside ``vector_store.config`` (``pathh``), ``embedder.config`` or ``llm.config`` is refused
in one line naming it, before anything is opened, as ``Memory.from_config`` refuses it (its
pydantic vector-store configs forbid extra keys; its embedder and LLM config classes take no
unknown keyword).

The keys are mem0's own: the fields of the provider's config model, the keywords of the
config class mem0 builds, read from the installed mem0's source (``ast``), so a scan imports
neither mem0 nor any client (``check_keys``). Where mem0 is imported anyway (the erasure, the
audit), its pydantic model validates the vector store's values too (``validate``).
"""

from __future__ import annotations

import ast
import importlib.util
from functools import cache
from pathlib import Path
from typing import Any

from traceless.errors import ConfigError

__all__ = ["check_keys", "validate"]

_NOTHING = "fix the memory config (nothing was opened or created)"
_WHAT = {"vector_store": "vector store", "embedder": "embedder", "llm": "LLM"}


def check_keys(keys: dict[str, Any]) -> None:
    """Refuse (``ConfigError``, one line) a nested key that mem0 refuses, in the sections given;
    nothing when mem0 is not installed (its own import fails first) or a provider is not known."""
    root = _mem0_root()
    if root is None:
        return
    for section in ("vector_store", "embedder", "llm"):
        val = keys.get(section)
        if not isinstance(val, dict) or val.get("config") is None:
            continue
        if not isinstance(val["config"], dict):
            raise ConfigError(f"mem0 config: {section}.config must be an object (got {type(val['config']).__name__}); "
                              f"{_NOTHING}")
        provider = str(val.get("provider") or ("qdrant" if section == "vector_store" else "openai"))
        known = _known(root, section, provider)
        bad = sorted(set(val["config"]) - set(known or ()))
        if known is not None and bad:
            raise ConfigError(f"mem0 config: unknown key {f'{section}.config.{bad[0]}'!r}: mem0's {provider} "
                              f"{_WHAT[section]} refuses it; its keys: {', '.join(sorted(known))}; {_NOTHING}")


def validate(keys: dict[str, Any]) -> None:
    """mem0's pydantic ``VectorStoreConfig`` on the vector store section (mem0 imported by the
    caller: ``_mem0._import_mem0``, telemetry off first); its refusal is one line."""
    vs = keys.get("vector_store")
    if not isinstance(vs, dict):
        return
    from mem0.vector_stores.configs import VectorStoreConfig

    try:
        VectorStoreConfig(provider=str(vs.get("provider", "qdrant")), config=dict(vs.get("config") or {}))
    except Exception as e:  # mem0's own refusal (pydantic's, a ValueError of its validators)
        lines = [x.strip() for x in str(e).splitlines() if x.strip()]
        first = next((x for x in lines[1:] if not x.startswith("For further")), lines[0] if lines else "")
        raise ConfigError(f"mem0 config: vector_store refused by mem0 ({first[:300]}); {_NOTHING}") from None


def _mem0_root() -> Path | None:
    """The installed mem0 package's folder (found without importing it)."""
    spec = importlib.util.find_spec("mem0")
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    return Path(locations[0]) if locations else None


@cache
def _tree(path: Path) -> ast.Module | None:
    try:
        return ast.parse(path.read_text(encoding="utf-8"))
    except (OSError, SyntaxError, ValueError):
        return None


def _class(path: Path, name: str) -> ast.ClassDef | None:
    tree = _tree(path)
    return next((n for n in (tree.body if tree else []) if isinstance(n, ast.ClassDef) and n.name == name), None)


def _known(root: Path, section: str, provider: str) -> list[str] | None:
    """The keys mem0 takes in ``section.config`` for ``provider`` (None: not known here)."""
    if section == "vector_store":
        names = _dict_literal(_class(root / "vector_stores" / "configs.py", "VectorStoreConfig"), "_provider_configs")
        cls = names.get(provider)
        node = _class(root / "configs" / "vector_stores" / f"{provider}.py", cls) if isinstance(cls, str) else None
        return _fields(node) if node is not None else None
    if section == "embedder":
        return _keywords(_class(root / "configs" / "embeddings" / "base.py", "BaseEmbedderConfig"))
    factory = root / "utils" / "factory.py"
    entry = _dict_literal(_class(factory, "LlmFactory"), "provider_to_class").get(provider)
    if not isinstance(entry, ast.Tuple) or len(entry.elts) != 2 or not isinstance(entry.elts[1], ast.Name):
        return None
    module = _imported_from(factory, entry.elts[1].id)
    if module is None:
        return None
    return _keywords(_class(root.parent.joinpath(*module.split(".")).with_suffix(".py"), entry.elts[1].id))


def _dict_literal(node: ast.ClassDef | None, name: str) -> dict[str, Any]:
    """``name = {...}`` (or annotated) in a class body: str keys → str values or the value nodes."""
    for stmt in node.body if node else []:
        if not isinstance(stmt, (ast.AnnAssign, ast.Assign)):
            continue
        target = stmt.target if isinstance(stmt, ast.AnnAssign) else (
            stmt.targets[0] if len(stmt.targets) == 1 else None)
        value = stmt.value
        if isinstance(target, ast.Name) and target.id == name and isinstance(value, ast.Dict):
            out: dict[str, Any] = {}
            for k, v in zip(value.keys, value.values, strict=True):
                if isinstance(k, ast.Constant) and isinstance(k.value, str):
                    out[k.value] = v.value if isinstance(v, ast.Constant) else v
            return out
    return {}


def _fields(node: ast.ClassDef) -> list[str]:
    """A pydantic model's fields: its annotated attributes, ``ClassVar``s and private ones excepted."""
    out = []
    for stmt in node.body:
        if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and not stmt.target.id.startswith("_"):
            ann = stmt.annotation
            base = ann.value if isinstance(ann, ast.Subscript) else ann
            if not (isinstance(base, ast.Name) and base.id == "ClassVar"):
                out.append(stmt.target.id)
    return out


def _keywords(node: ast.ClassDef | None) -> list[str] | None:
    """The keywords of a class's ``__init__`` (None: it takes ``**kwargs`` or has none of its own)."""
    init = next((n for n in (node.body if node else []) if isinstance(n, ast.FunctionDef) and n.name == "__init__"),
                None)
    if init is None or init.args.kwarg is not None:
        return None
    return [a.arg for a in (*init.args.posonlyargs, *init.args.args, *init.args.kwonlyargs) if a.arg != "self"]


def _imported_from(path: Path, name: str) -> str | None:
    tree = _tree(path)
    for n in tree.body if tree else []:
        if isinstance(n, ast.ImportFrom) and n.module and any((a.asname or a.name) == name for a in n.names):
            return n.module
    return None
