"""PEP 562 lazy re-exports for package ``__init__`` modules.

A package that only re-exports names from its submodules imports the submodule that
defines a name the first time the name is used, so importing one light submodule (the
CLI's ``forget modes`` needs the mode registry, not numpy or the store) does not pay for
the rest of the package (issue #13.4)."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from typing import Any

__all__ = ["lazy_exports"]


def lazy_exports(package: str, exports: dict[str, tuple[str, ...]]) -> tuple[Callable[[str], Any],
                                                                              Callable[[], list[str]]]:
    """``(__getattr__, __dir__)`` for ``package`` that import ``exports``'s submodule
    (``{"._store": ("MemoryStore",)}``) on first access of one of its names."""
    where = {name: module for module, names in exports.items() for name in names}

    def __getattr__(name: str) -> Any:
        module = where.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module, package), name)
        setattr(sys.modules[package], name, value)  # next access is a plain attribute lookup
        return value

    def __dir__() -> list[str]:
        return sorted(set(vars(sys.modules[package])) | set(where))

    return __getattr__, __dir__
