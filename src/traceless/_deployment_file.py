"""The deployment file (issue 36.2): the instances of one deployment, each a memory system
with its own config and how the person's ids map onto it. TOML or JSON::

    name = "support-bot"

    [[instances]]
    name = "prefs"                 # letters, digits, '.', '_', '-'
    system = "mem0"
    config = "mem0.json"           # relative to this file (or an inline table)

    [[instances]]
    name = "threads"
    system = "langgraph"
    config = "langgraph.json"
    users = { "cust-4411" = "lg-4411" }   # the request's id -> this system's id(s)

Every instance is validated when the file is read (its system registered, its config
present and valid for that system), so a typo stops the request before any instance opens.
"""

from __future__ import annotations

import json
import re
import tomllib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from traceless.errors import ConfigError, InputFormatError
from traceless.systems import load_system_config, system_class

__all__ = ["Deployment", "DeploymentInstance", "load_deployment"]

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


class DeploymentInstance(BaseModel):
    """One instance of a memory system in the deployment."""

    model_config = ConfigDict(extra="forbid")

    name: str
    """The instance's name: it names the receipt files of the bundle (1-64 of ``A-Z a-z 0-9 . _ -``)."""
    system: str
    """The memory system (``traceless memory systems``)."""
    config: str | dict[str, Any]
    """The system's own config of the live instance: a JSON/TOML file (relative to the
    deployment file; resolved to an absolute path when read) or the settings inline."""
    users: dict[str, str | list[str]] = Field(default_factory=dict)
    """The request's user id → this system's user id(s); an id not listed is the same here."""

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not _NAME.fullmatch(v):
            raise ValueError("give 1-64 letters, digits, '.', '_' or '-' (it names the receipt files)")
        return v

    def ids(self, users: Sequence[str]) -> list[str]:
        """This instance's ids of the request's ``users``, each once, in order."""
        out: list[str] = []
        for u in users:
            got = self.users.get(u, u)
            out += [got] if isinstance(got, str) else got
        return list(dict.fromkeys(out))


class Deployment(BaseModel):
    """The instances of one deployment, as ``load_deployment`` read and checked them."""

    model_config = ConfigDict(extra="forbid")

    name: str = ""
    """The deployment's name (default: the file's stem); it is signed into the request bundle."""
    instances: list[DeploymentInstance]
    """Every instance, in the order requests run them."""

    def ids(self, users: Sequence[str]) -> list[str]:
        """Every id the request's ``users`` have in any instance (withheld from logs and file names)."""
        return list(dict.fromkeys(i for inst in self.instances for i in inst.ids(users)))


def _parse(path: Path) -> Any:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise ConfigError(f"cannot read deployment file {path} ({e.strerror}); give an existing TOML or JSON "
                          "file") from None
    try:
        return json.loads(text) if path.suffix.lower() == ".json" else tomllib.loads(text)
    except (json.JSONDecodeError, tomllib.TOMLDecodeError) as e:
        raise InputFormatError(f"{path}: not valid {'JSON' if path.suffix.lower() == '.json' else 'TOML'} "
                               f"({str(e).splitlines()[0]}); fix the file") from None


def load_deployment(path: str | Path) -> Deployment:
    """The deployment file, every instance checked (unique names, a registered system, a
    config that exists and is valid for it) before anything is opened."""
    p = Path(path)
    raw = _parse(p)
    try:
        dep = Deployment.model_validate(raw)
    except ValidationError as e:
        err = e.errors()[0]
        loc = ".".join(str(x) for x in err["loc"]) or "(root)"
        what = f"unknown key {loc!r}" if err["type"] == "extra_forbidden" else f"{loc}: {err['msg']}"
        raise ConfigError(f"{p}: {what}; a deployment is `name` and a list `instances` of "
                          "{name, system, config, users}") from None
    if not dep.instances:
        raise ConfigError(f"{p}: no instances; list each memory system of the deployment under [[instances]]")
    seen: set[str] = set()
    out = []
    for inst in dep.instances:
        if inst.name in seen:
            raise ConfigError(f"{p}: two instances are named {inst.name!r}; give each its own name")
        seen.add(inst.name)
        system_class(inst.system)  # an unknown system: UnknownNameError naming the known ones
        cfg: str | dict[str, Any] = inst.config
        if isinstance(cfg, str):
            f = Path(cfg) if Path(cfg).is_absolute() else p.parent / cfg
            if not f.is_file():
                raise ConfigError(f"{p}: instance {inst.name!r}: its config {f} does not exist; give the path of "
                                  "the system's config (relative to the deployment file)")
            cfg = str(f.resolve())
        try:
            load_system_config(inst.system, cfg)
        except ConfigError as e:
            raise ConfigError(f"{p}: instance {inst.name!r}: {e}") from None
        out.append(inst.model_copy(update={"config": cfg}))
    return dep.model_copy(update={"name": dep.name or p.stem, "instances": out})
