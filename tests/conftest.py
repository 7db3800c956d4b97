"""Shared pytest configuration.

* Hugging Face libraries run offline (models come from the local cache only).
* ``TRACELESS_HOME`` (keys) points at a per-session temporary directory, so tests never
  touch the user's keys. ``TRACELESS_CACHE`` is left alone: models are cached there.
* A network guard (autouse): any socket connection to a non-loopback address fails at
  once with :class:`NetworkAccessError`. Loopback (127.0.0.0/8, ::1, localhost) and
  Unix sockets stay allowed, so tests may talk to servers they start themselves.
"""

from __future__ import annotations

import atexit
import ipaddress
import os
import shutil
import socket
import tempfile
from collections.abc import Iterator
from typing import Any

import pytest

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
os.environ["HF_DATASETS_OFFLINE"] = "1"

_SESSION_HOME = tempfile.mkdtemp(prefix="traceless-test-home-")
os.environ["TRACELESS_HOME"] = _SESSION_HOME
atexit.register(shutil.rmtree, _SESSION_HOME, ignore_errors=True)


class NetworkAccessError(RuntimeError):
    """Raised by the test network guard for a connection to a non-loopback address."""


_LOOPBACK_NAMES = frozenset({"localhost", "localhost.localdomain", "ip6-localhost", "ip6-loopback"})


def _is_loopback(host: Any) -> bool:
    if isinstance(host, bytes):
        host = host.decode("ascii", "replace")
    if not isinstance(host, str):
        return False
    h = host.strip("[]").split("%", 1)[0].lower()
    if h in _LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(h).is_loopback
    except ValueError:
        return False  # any other host name is treated as remote


def _check(address: Any, family: int | None) -> None:
    if family is not None and family not in (socket.AF_INET, socket.AF_INET6):
        return  # AF_UNIX, AF_NETLINK, ...
    if isinstance(address, (str, bytes)) and family is None:
        return  # a Unix socket path
    host = address[0] if isinstance(address, tuple) and address else address
    if not _is_loopback(host):
        raise NetworkAccessError(
            f"network access blocked in tests: connection to {address!r}. Tests may only use "
            "loopback (127.0.0.0/8, ::1, localhost); use a local server or httpx.MockTransport."
        )


@pytest.fixture(autouse=True)
def _network_guard(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    real_connect = socket.socket.connect
    real_connect_ex = socket.socket.connect_ex
    real_create_connection = socket.create_connection

    def connect(self: socket.socket, address: Any) -> None:
        _check(address, self.family)
        real_connect(self, address)

    def connect_ex(self: socket.socket, address: Any) -> int:
        _check(address, self.family)
        return real_connect_ex(self, address)

    def create_connection(address: Any, *args: Any, **kwargs: Any) -> socket.socket:
        _check(address, None)
        return real_create_connection(address, *args, **kwargs)

    monkeypatch.setattr(socket.socket, "connect", connect)
    monkeypatch.setattr(socket.socket, "connect_ex", connect_ex)
    monkeypatch.setattr(socket, "create_connection", create_connection)
    yield
