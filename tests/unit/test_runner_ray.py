"""``study run --executor ray`` on a real local Ray runtime (started once for the module):
same rows as a local run, resume and the generation cache across executors, refusals."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _cli import cli

pytest.importorskip("ray")

from traceless.errors import ConfigError
from traceless.models import ScriptedBackend
from traceless.run import RaySession
from traceless.studies import read_manifest, read_rows, run_study

SRC = str(Path(__file__).resolve().parents[2] / "src")
FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "longmemeval_tiny.json"
SLICE = ["--data", str(FIXTURE), "--model", "scripted", "--embedder", "hashing", "--set", "k=1,3",
         "--set", "wordings=1", "--n", "2", "--no-progress"]




def normalized(out: Path) -> list[dict[str, Any]]:
    """Rows without what differs between any two runs: write time, seconds, and forget
    receipt ids (random per forget)."""
    rows = []
    for r in read_rows(out):
        d = r.model_dump()
        d.pop("created")
        d["timing"] = {k: v for k, v in d["timing"].items() if not k.endswith("_seconds")}
        if isinstance(d["extra"].get("receipt"), dict):
            d["extra"]["receipt"] = {k: v for k, v in d["extra"]["receipt"].items() if k != "receipt_id"}
        rows.append(d)
    return rows


@pytest.fixture(scope="module")
def ray_runtime() -> Iterator[RaySession]:
    # A private temp dir for this module's runtime and its workers (they inherit TMPDIR): the
    # scratch-dir check below must not see the dirs of another test run on the same machine,
    # and Ray's session files must not mix with another runtime's. Short, for Ray's socket paths.
    private = tempfile.mkdtemp(prefix="tlr-", dir="/tmp")
    saved_env, saved_dir = os.environ.get("TMPDIR"), tempfile.tempdir
    os.environ["TMPDIR"], tempfile.tempdir = private, private
    session = RaySession(None, num_cpus=2)  # the runner's own local start: loopback only
    try:
        yield session
    finally:
        session.close()
        tempfile.tempdir = saved_dir
        if saved_env is None:
            os.environ.pop("TMPDIR", None)
        else:
            os.environ["TMPDIR"] = saved_env
        shutil.rmtree(private, ignore_errors=True)


def test_local_runtime_binds_loopback_only(ray_runtime: RaySession) -> None:
    import ray

    assert ray.get_runtime_context().gcs_address.startswith("127.0.0.1:")
    assert {n["NodeManagerAddress"] for n in ray.nodes()} == {"127.0.0.1"}
    # workers write their scratch dirs where this module looks for leftovers (its private dir)
    assert ray.get(ray.remote(tempfile.gettempdir).remote()) == tempfile.gettempdir()


def test_ray_run_equals_local_run_and_resumes_with_the_cache(
    tmp_path: Path, ray_runtime: RaySession, capsys: pytest.CaptureFixture[str]
) -> None:
    local, remote = tmp_path / "local", tmp_path / "ray"
    scratch_before = set(Path(tempfile.gettempdir()).glob("traceless-ray-*"))
    assert cli("study", "run", "frontier", "--out", str(local), *SLICE) == 0
    # a slice on Ray, stopped after 10 cells, then resumed on Ray
    assert cli("study", "run", "frontier", "--out", str(remote), *SLICE, "--executor", "ray",
               "--max-cells", "10") == 0
    first = len(read_rows(remote))
    assert 10 <= first < len(read_rows(local))
    assert not read_manifest(remote).runs["scripted"].finished
    # resume from another process that joins this runtime by its address (a driver on another
    # machine does the same with the head node's HOST:PORT)
    import ray

    address = ray.get_runtime_context().gcs_address
    proc = subprocess.run(
        [sys.executable, "-c", "import sys; from traceless.cli import main; main(sys.argv[1:])", "study", "run",
         "frontier", "--out", str(remote), "--model", "scripted", "--embedder", "hashing", "--resume",
         "--no-progress", "--executor", "ray", "--address", address],
        capture_output=True, text=True, timeout=180, env={**os.environ, "PYTHONPATH": SRC},
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    err = proc.stderr
    assert f"{len(read_rows(local)) - first} cells run, {first} already done" in err
    # the group cut off by --max-cells had generated its prompts already: the resume reuses them
    hits = int(err.split("generation cache ")[1].split(" hits")[0])
    assert hits > 0
    assert read_manifest(remote).runs["scripted"].finished
    assert normalized(remote) == normalized(local)
    assert read_manifest(remote).runs["scripted"].identity == read_manifest(local).runs["scripted"].identity
    # the workers' scratch dirs (memory files holding the canaries) are gone after each run
    assert set(Path(tempfile.gettempdir()).glob("traceless-ray-*")) <= scratch_before


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_unreachable_address_is_a_clear_error_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "never"
    port = _free_port()
    code = cli("study", "run", "frontier", "--out", str(out), *SLICE, "--executor", "ray",
               "--address", f"127.0.0.1:{port}")
    err = capsys.readouterr().err
    assert code == 2
    assert f"127.0.0.1:{port} does not answer" in err and "ray start --head" in err
    assert not out.exists()
    # something answers, but it is not Ray: refused within seconds, not after ray.init's retries
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    srv = ThreadingHTTPServer(("127.0.0.1", 0), BaseHTTPRequestHandler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        code = cli("study", "run", "frontier", "--out", str(out), *SLICE, "--executor", "ray",
                   "--address", f"127.0.0.1:{srv.server_address[1]}")
    finally:
        srv.shutdown()
        srv.server_close()
    err = capsys.readouterr().err
    assert code == 2 and "but not a Ray cluster" in err and "ray start --head" in err
    assert not out.exists()


def test_bad_executor_options_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="pass model=SPEC"):
        run_study("frontier", tmp_path / "a", backend=ScriptedBackend(), executor="ray")
    with pytest.raises(ConfigError, match="needs --executor ray"):
        run_study("frontier", tmp_path / "b", model="scripted", address="127.0.0.1:6379")
    with pytest.raises(ConfigError, match="use local or ray"):
        run_study("frontier", tmp_path / "c", model="scripted", executor="dask")
    assert not any(tmp_path.iterdir())
