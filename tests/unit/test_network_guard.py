"""The autouse network guard in tests/conftest.py blocks non-loopback connections."""

from __future__ import annotations

import os
import socket
import threading
import time
from pathlib import Path

import httpx
import pytest


def test_offline_environment() -> None:
    assert os.environ["HF_HUB_OFFLINE"] == "1"
    assert os.environ["TRANSFORMERS_OFFLINE"] == "1"
    assert os.environ["HF_DATASETS_OFFLINE"] == "1"
    assert "traceless-test-home-" in os.environ["TRACELESS_HOME"]


@pytest.mark.parametrize("address", [("93.184.216.34", 80), ("example.com", 443), ("2606:2800:220:1::", 80)])
def test_socket_connect_to_remote_is_blocked_immediately(address: tuple[str, int]) -> None:
    family = socket.AF_INET6 if ":" in address[0] else socket.AF_INET
    s = socket.socket(family, socket.SOCK_STREAM)
    try:
        t0 = time.perf_counter()
        with pytest.raises(RuntimeError, match="network access blocked in tests") as ei:
            s.connect(address)
        assert time.perf_counter() - t0 < 0.5
        assert type(ei.value).__name__ == "NetworkAccessError"
        with pytest.raises(RuntimeError, match="network access blocked"):
            s.connect_ex(address)
    finally:
        s.close()


def test_create_connection_and_httpx_to_remote_are_blocked() -> None:
    t0 = time.perf_counter()
    with pytest.raises(RuntimeError, match="network access blocked"):
        socket.create_connection(("93.184.216.34", 80), timeout=30)
    with pytest.raises(RuntimeError, match="network access blocked"):
        httpx.get("http://93.184.216.34/", timeout=30)
    assert time.perf_counter() - t0 < 1.0


def test_loopback_connection_is_allowed() -> None:
    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    port = srv.getsockname()[1]
    got: list[bytes] = []

    def serve() -> None:
        conn, _ = srv.accept()
        with conn:
            got.append(conn.recv(5))

    t = threading.Thread(target=serve)
    t.start()
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=5) as c:
            c.sendall(b"hello")
        t.join(5)
        assert got == [b"hello"]
        # "localhost" and the whole 127/8 block are loopback too
        for host in ("localhost", "127.0.0.1"):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            try:
                assert s.connect_ex((host, port)) in (0, 111)  # refused after the listener closed is fine
            finally:
                s.close()
    finally:
        srv.close()


def test_unix_socket_is_allowed(tmp_path: Path) -> None:
    path = str(tmp_path / "s")
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(path)
    srv.listen(1)
    try:
        c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        c.connect(path)
        c.close()
    finally:
        srv.close()
        os.unlink(path)
