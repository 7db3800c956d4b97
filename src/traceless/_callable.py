"""``traceless.forget`` and ``traceless.audit`` are both packages and the public functions
``from traceless import forget, audit``: importing a subpackage always binds its module
to the package attribute, so the module itself is made callable (it calls the function).
``traceless.forget.FORGET_MODES`` and ``forget(store, target, mode)`` then both work."""

from __future__ import annotations

import types
from collections.abc import Callable
from typing import Any

__all__ = ["make_callable"]


class _CallableModule(types.ModuleType):
    __traceless_call__: Callable[..., Any]

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.__traceless_call__(*args, **kwargs)


def make_callable(module: types.ModuleType, fn: Callable[..., Any]) -> types.ModuleType:
    """Make ``module(...)`` call ``fn(...)``; returns the module."""
    module.__class__ = _CallableModule
    module.__traceless_call__ = fn  # type: ignore[attr-defined]
    module.__doc__ = f"{module.__doc__ or ''}\n\nCalling this module calls ``{fn.__module__}.{fn.__qualname__}``."
    return module
