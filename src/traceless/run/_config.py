"""Study configs from a TOML/JSON file and ``--set key=value`` items."""

from __future__ import annotations

import json
import tomllib
import types
import typing
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from traceless.errors import ConfigError

__all__ = ["load_config", "parse_sets"]

C = TypeVar("C", bound=BaseModel)


def _scalar(text: str) -> Any:
    t = text.strip()
    try:
        return json.loads(t)
    except json.JSONDecodeError:
        low = t.lower()
        if low in ("true", "false"):
            return low == "true"
        if low in ("none", "null"):
            return None
        return t


def _is_sequence_type(tp: Any) -> bool:
    origin = typing.get_origin(tp)
    if origin in (list, tuple, set, frozenset, Sequence):
        return True
    if origin in (typing.Union, types.UnionType):
        return any(_is_sequence_type(a) for a in typing.get_args(tp) if a is not type(None))
    return False


def parse_sets(cls: type[BaseModel], sets: Iterable[str]) -> dict[str, Any]:
    """``["S=0,1", "k=3", "probe_tokens=48"]`` → a dict for ``cls``. Comma lists become lists;
    a single value for a list field becomes a one-element list; values are JSON when they
    parse as JSON (numbers, true/false, quoted strings), else plain strings."""
    out: dict[str, Any] = {}
    for item in sets:
        if "=" not in item:
            raise ConfigError(f"--set {item!r}: expected key=value, e.g. --set k=1,3")
        key, _, raw = item.partition("=")
        key = key.strip()
        if key not in cls.model_fields:
            raise ConfigError(
                f"--set {key}: {cls.__name__} has no field {key!r}; fields: {', '.join(cls.model_fields)}"
            )
        seq = _is_sequence_type(cls.model_fields[key].annotation)
        stripped = raw.strip()
        if stripped.startswith(("[", "{", '"')):
            val = _scalar(stripped)
        elif seq or "," in stripped:
            val = [_scalar(x) for x in stripped.split(",") if x.strip()] if stripped else []
        else:
            val = _scalar(stripped)
        if seq and not isinstance(val, list):
            val = [val]
        out[key] = val
    return out


def load_config(
    cls: type[C], file: str | Path | None = None, sets: Iterable[str] = (), base: dict[str, Any] | None = None
) -> C:
    """Config from (in increasing priority) ``base``, a TOML/JSON ``file`` and ``--set`` items."""
    data: dict[str, Any] = dict(base or {})
    if file is not None:
        p = Path(file)
        if not p.exists():
            raise ConfigError(f"config file {p} does not exist")
        try:
            text = p.read_text(encoding="utf-8")
            loaded = tomllib.loads(text) if p.suffix.lower() == ".toml" else json.loads(text)
        except (tomllib.TOMLDecodeError, json.JSONDecodeError) as e:
            raise ConfigError(f"config file {p} is not valid {'TOML' if p.suffix == '.toml' else 'JSON'}: {e}") from None
        if not isinstance(loaded, dict):
            raise ConfigError(f"config file {p} must hold one object/table of fields")
        data.update(loaded)
    data.update(parse_sets(cls, sets))
    try:
        return cls.model_validate(data)
    except ValidationError as e:
        err = e.errors()[0]
        loc = ".".join(str(x) for x in err["loc"]) or "(config)"
        raise ConfigError(f"study config field {loc!r}: {err['msg']} (got {err.get('input')!r})") from None
