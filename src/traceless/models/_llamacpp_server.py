"""Serve a GGUF file through llama.cpp's OpenAI-compatible HTTP server (from the
``xllamacpp`` wheel) in a child process, for the ``openai`` backend.

``xllamacpp.Server(params)`` loads the model and starts llama.cpp's native C++ HTTP
server inside the calling process; it has no explicit stop method. To keep tests
isolated and to be able to stop it for certain, :class:`LlamaCppServer` runs it in a
child Python interpreter:

* the child builds ``CommonParams``, starts ``xllamacpp.Server`` on ``host:port``
  (port 0 lets the server pick a free port, so there is no race), prints one JSON
  line ``{"address": "http://127.0.0.1:PORT"}`` on stdout and then blocks reading
  stdin;
* the parent waits for that line and for ``GET /health`` to answer 200;
* stopping closes the child's stdin (the child then destroys the server and exits),
  then escalates to SIGTERM and SIGKILL if needed. Because the child exits on stdin
  EOF, it also goes away if the parent dies without cleaning up.

llama.cpp's log goes to ``log_path`` when one is given (e.g. inside a results dir);
otherwise to an anonymous temporary file (``O_TMPFILE``/unlinked at once), so no log is
ever left in ``/tmp`` even when this process and the server are killed (logs can hold
prompt text). Its tail is quoted when start fails and readable with ``log_tail()``.

Command line (serves in the foreground until Ctrl-C)::

    python -m traceless.models._llamacpp_server MODEL.gguf --port 8080
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import queue
import re
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from collections.abc import Iterator
from pathlib import Path
from types import TracebackType
from typing import IO, Any

import httpx

from traceless.errors import BackendError, ModelNotAvailableError
from traceless.models._cpu import ADAPT_MIN_WINDOW, CpuMeter, ThreadAdapter, cpu_limit
from traceless.models._speculation import SPECULATION_TYPES

__all__ = ["SPECULATION_TYPES", "LlamaCppServer", "main", "turn_markers"]

"""llama.cpp's speculative decoding without a draft model: drafts come from n-grams of the
prompt and the reply so far (prompt lookup) and are verified by the model in one batch, so a
greedy reply keeps the model's tokens unless batched-logit numerics differ (llama.cpp
#25618; bench/bench_decode.py checks every reply)."""

_API_KEY_ENV = "TRACELESS_LLAMACPP_API_KEY"

_MARKER = re.compile(r"<\|[A-Za-z_]{2,24}\|>|<(?:start|end)_of_turn>")
"""A chat template's turn marker: ``<|im_start|>``, ``<|im_end|>``, ``<|eot_id|>``, ``<end_of_turn>`` …"""


def turn_markers(props: dict[str, Any]) -> tuple[str, ...]:
    """The turn markers of a llama.cpp server's chat template and its end-of-sequence text
    (``GET /props``), sorted: where a reply that writes one as text has ended its turn. The
    model's own end-of-turn token already stops it; these catch the marker spelt out as text
    (or a new turn begun) after the answer."""
    found = set(_MARKER.findall(str(props.get("chat_template") or "")))
    found.update(t for k in ("eos_token", "bos_token") if _MARKER.fullmatch(t := str(props.get(k) or "")))
    return tuple(sorted(found))

log = logging.getLogger(__name__)

# Runs in the child interpreter. Imports only xllamacpp (not traceless, not torch).
_CHILD = r"""
import json, os, sys
cfg = json.loads(sys.argv[1])
try:
    import xllamacpp as xlc
    p = xlc.CommonParams()
    p.model.path = cfg["model"]
    p.n_ctx = cfg["n_ctx"]
    p.n_parallel = cfg["parallel"]
    p.cpuparams.n_threads = cfg["threads"]
    p.cpuparams_batch.n_threads = cfg["threads"]
    p.hostnames = [cfg["host"]]
    p.port = cfg["port"]
    p.cache_prompt = cfg["cache_prompt"]
    p.verbosity = cfg["verbosity"]
    p.ui = False
    spec = cfg.get("speculation") or "none"
    if spec != "none":  # n-gram (prompt lookup) drafts, verified by the model: greedy output kept
        p.speculative.types = [getattr(xlc.common_speculative_type,
                                       "COMMON_SPECULATIVE_TYPE_" + spec.upper().replace("-", "_"))]
        n = cfg["draft_max"]
        p.speculative.draft.n_max = n
        for m in (p.speculative.ngram_simple, p.speculative.ngram_map_k, p.speculative.ngram_map_k4v):
            m.size_m = n
            m.size_n = cfg["ngram_size"]
        p.speculative.ngram_mod.n_max = n
        p.speculative.ngram_mod.n_min = min(p.speculative.ngram_mod.n_min, n)
        p.speculative.ngram_mod.n_match = cfg["ngram_size"]
    if cfg.get("alias"):
        p.model_alias = {cfg["alias"]}
    key = os.environ.pop(cfg["key_env"], None)
    if key:
        p.api_keys = [key]
    server = xlc.Server(p)
    address = server.listening_address
except BaseException as e:  # report, then exit non-zero
    sys.stdout.write(json.dumps({"error": f"{type(e).__name__}: {e}"}) + "\n")
    sys.stdout.flush()
    sys.exit(1)
sys.stdout.write(json.dumps({"address": address}) + "\n")
sys.stdout.flush()
try:
    sys.stdin.read()  # returns at EOF: the parent closed the pipe or died
except BaseException:
    pass
del server
"""


def _stop_process(proc: subprocess.Popen[str], grace: float) -> None:
    """Close stdin (clean exit), then SIGTERM, then SIGKILL; at once SIGKILL when ``grace`` is 0
    (a restart mid-request: llama.cpp would finish the request in flight first)."""
    if proc.poll() is None and proc.stdin is not None:
        with contextlib.suppress(OSError):
            proc.stdin.close()
    for step in ("wait", "terminate", "kill") if grace > 0 else ("kill",):
        if step == "terminate":
            proc.terminate()
        elif step == "kill":
            proc.kill()
        try:
            proc.wait(timeout=grace if step == "wait" else 5.0)
            break
        except subprocess.TimeoutExpired:
            continue
    for stream in (proc.stdin, proc.stdout):
        if stream is not None:
            with contextlib.suppress(OSError):
                stream.close()


class LlamaCppServer:
    """A llama.cpp OpenAI-compatible server for one GGUF file, in a child process.

    Use as a context manager (or call :meth:`start` / :meth:`stop`)::

        with LlamaCppServer("model.gguf") as srv:
            backend = OpenAIBackend(model="model", base_url=srv.base_url)

    ``ctx`` is the context size of each of the ``parallel`` slots (llama.cpp gets
    ``n_ctx = ctx * parallel``). ``parallel > 1`` lets concurrent requests decode in
    one batch (faster), at the price of batch-dependent floating point: greedy outputs
    are then not guaranteed bit-identical to one-at-a-time decoding. ``cache_prompt``
    reuses the KV cache of a shared prompt prefix across requests (faster; llama.cpp
    documents that it can change logits slightly). ``api_key``, when given, is required
    by the server as a bearer token; it is passed to the child via its environment,
    never on the command line or in logs. ``speculation`` (one of ``SPECULATION_TYPES``)
    turns on n-gram speculative decoding: after a match of the last ``ngram_size`` tokens
    in the prompt or reply, up to ``draft_max`` tokens that followed it are drafted.

    ``adapt_threads=True`` lets the thread count follow the CPUs free to this process during
    the run: a watcher thread reads them every second (an ``adapter``, a ``ThreadAdapter`` on a
    ``CpuMeter``: only on a persistent change) and restarts the server with the new count on
    the same port. Fewer threads at once, even mid-request: load that arrives while a reply is
    decoding collapses synchronised threads (3-14x slower beside 2 busy processes on 2 cores,
    measured), so the request in flight is cut off and sent again whole (``ServedBackend``).
    More threads only between requests (none in flight, new ones wait), after a cooldown.
    llama.cpp's server has no way to change a running server's threads (xllamacpp's ``Server``
    exposes none), hence the restart. Never once :meth:`share` was called: another client (a
    memory system calling the model over HTTP itself) could be mid-request. Replies are the same
    whatever the count (bench/bench_threads.py checks it on the full default audit);
    ``thread_changes`` lists each change.
    """

    def __init__(
        self,
        gguf_path: str | os.PathLike[str],
        port: int = 0,
        ctx: int = 4096,
        threads: int = 2,
        *,
        host: str = "127.0.0.1",
        parallel: int = 1,
        cache_prompt: bool = True,
        alias: str | None = None,
        api_key: str | None = None,
        startup_timeout: float = 180.0,
        log_path: str | os.PathLike[str] | None = None,
        verbose: bool = False,
        speculation: str = "none",
        draft_max: int = 16,
        ngram_size: int = 3,
        adapt_threads: bool = False,
    ) -> None:
        path = Path(gguf_path).expanduser()
        if not path.is_file():
            raise ModelNotAvailableError(
                f"GGUF file not found: {path}. Pass the path of a .gguf weights file "
                "(download or build it first)."
            )
        if ctx < 1 or threads < 1 or parallel < 1 or not 0 <= port <= 65535:
            raise ValueError("ctx, threads and parallel must be >= 1 and port in 0..65535")
        if speculation not in SPECULATION_TYPES or draft_max < 1 or ngram_size < 1:
            raise ValueError(f"speculation must be one of {', '.join(SPECULATION_TYPES)}, draft_max and ngram_size "
                             f">= 1, got {speculation!r}, {draft_max}, {ngram_size}")
        self.ngram_size = ngram_size
        self.speculation = speculation
        self.draft_max = draft_max
        self.gguf_path = path.resolve()
        self.host = host
        self.requested_port = port
        self.ctx = ctx
        self.threads = threads
        self.parallel = parallel
        self.cache_prompt = cache_prompt
        self.alias = alias or path.stem
        self._api_key = api_key
        self.startup_timeout = startup_timeout
        self.verbose = verbose
        self.log_path: Path | None = Path(log_path) if log_path is not None else None
        self._proc: subprocess.Popen[str] | None = None
        self._log_file: IO[bytes] | None = None
        self._address: str | None = None
        self._finalizer: weakref.finalize[Any, Any] | None = None
        self.startup_seconds: float | None = None
        """Seconds from process spawn until ``/health`` answered (model load included)."""
        self.meter: CpuMeter | None = CpuMeter(lambda: [p] if (p := self.pid) else [], min_window=ADAPT_MIN_WINDOW) if adapt_threads else None
        """Free CPUs during the run (this process and the server's count as free), for the adapter."""
        self.adapter: ThreadAdapter | None = (
            ThreadAdapter(threads, self.meter.read, max_threads=cpu_limit()) if self.meter is not None else None)
        """Decides thread changes during the run (``adapt_threads``); replaceable (tests)."""
        self.thread_changes: list[tuple[int, int, float]] = []
        """(old, new, restart seconds) for each thread change during the run."""
        self.thread_log: list[tuple[float, int, bool]] = []
        """(``time.monotonic()``, new count, mid-request) for each thread change (benches)."""
        self._gate = threading.Condition()
        self._in_flight = 0
        self._restarting = False
        self._shared = False
        self._restarts = 0
        self._watch_stop = threading.Event()
        self._watcher: threading.Thread | None = None

    def __repr__(self) -> str:
        state = self._address or "stopped"
        return f"LlamaCppServer({str(self.gguf_path)!r}, {state})"

    # ----------------------------------------------------------------- addresses
    @property
    def address(self) -> str:
        """``http://HOST:PORT`` of the running server."""
        if self._address is None:
            raise BackendError("llama.cpp server is not running; call start() or use it as a context manager")
        return self._address

    @property
    def base_url(self) -> str:
        """OpenAI-compatible base URL, ``http://HOST:PORT/v1``."""
        return self.address + "/v1"

    @property
    def port(self) -> int:
        return int(self.address.rsplit(":", 1)[1])

    @property
    def model(self) -> str:
        """The model id the server reports (the alias)."""
        return self.alias

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def props(self) -> dict[str, Any]:
        """llama.cpp's ``GET /props`` of the running server (chat template, tokens …); {} if none."""
        headers = {"Authorization": f"Bearer {self._api_key}"} if self._api_key else {}
        try:
            r = httpx.get(self.address + "/props", headers=headers, timeout=10.0)
            data = r.json() if r.status_code == 200 else {}
        except (httpx.HTTPError, ValueError):
            data = {}
        return data if isinstance(data, dict) else {}

    def engine(self) -> dict[str, Any]:
        """The serving engine's identity (recorded in every result row): llama.cpp through the
        xllamacpp wheel at this version, with this many slots and prompt caching on or off.
        Another version, more slots or the prompt cache can change greedy replies."""
        from importlib import metadata

        try:
            ver = metadata.version("xllamacpp")
        except metadata.PackageNotFoundError:  # a source build on the path: still this engine
            ver = "unknown"
        d: dict[str, Any] = {"name": "llama.cpp", "package": "xllamacpp", "version": ver,
                             "parallel": self.parallel, "cache_prompt": self.cache_prompt}
        if self.speculation != "none":  # verified drafts; numerics may differ: part of the identity
            d["speculation"] = {"type": self.speculation, "draft_max": self.draft_max, "ngram_size": self.ngram_size}
        return d

    def is_running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None and self._address is not None

    # ----------------------------------------------------------------- lifecycle
    def start(self) -> LlamaCppServer:
        if self._proc is not None:
            return self
        cfg = {
            "model": str(self.gguf_path),
            "n_ctx": self.ctx * self.parallel,
            "parallel": self.parallel,
            "threads": self.threads,
            "host": self.host,
            "port": self.requested_port,
            "cache_prompt": self.cache_prompt,
            "verbosity": 3 if self.verbose else 2,
            "alias": self.alias,
            "key_env": _API_KEY_ENV,
            "speculation": self.speculation,
            "draft_max": self.draft_max,
            "ngram_size": self.ngram_size,
        }
        env = dict(os.environ)
        env.pop(_API_KEY_ENV, None)
        if self._api_key:
            env[_API_KEY_ENV] = self._api_key
        if self.log_path is None:
            # nameless: the kernel frees it when the last holder (this process or the child) exits
            self._log_file = tempfile.TemporaryFile(prefix="traceless-llamacpp-", suffix=".log")  # noqa: SIM115
        else:
            # a restart (new thread count) appends to the log of the same run
            self._log_file = open(self.log_path, "a+b" if self._restarts else "w+b")  # noqa: SIM115 - closed in stop()
        t0 = time.perf_counter()
        try:
            proc = subprocess.Popen(
                [sys.executable, "-c", _CHILD, json.dumps(cfg)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=self._log_file,
                env=env,
                text=True,
                start_new_session=True,  # Ctrl-C reaches the parent, which stops the child
            )
        except OSError as e:
            self._close_log()
            raise BackendError(f"could not start the llama.cpp server process: {e}") from e
        self._proc = proc
        self._finalizer = weakref.finalize(self, _stop_process, proc, 5.0)
        try:
            self._address = self._wait_ready(proc, t0)
        except BaseException:
            self._stop_server(grace=10.0)  # not stop(): a restart holds the gate the watcher may wait on
            raise
        self.startup_seconds = time.perf_counter() - t0
        if self.meter is not None:
            self.meter.reset()  # the window starts now: not the model load, not the old server's time
        if self.adapter is not None and (self._watcher is None or not self._watcher.is_alive()):
            self._watch_stop.clear()
            self._watcher = threading.Thread(target=self._watch, daemon=True, name="llamacpp-threads")
            self._watcher.start()
        return self

    # ----------------------------------------------------------------- threads during the run
    def share(self) -> None:
        """Another client will call this server over HTTP (its ``base_url`` was handed out):
        from now on it is never restarted, so its threads stay as they are."""
        with self._gate:
            self._shared = True

    @contextlib.contextmanager
    def serving(self) -> Iterator[int]:
        """Hold around one request: first, when the ``adapter`` asks for another thread count
        (and the server is not shared), waits until no request is in flight and restarts the
        server with that count on the same port (requests arriving meanwhile wait). Yields the
        number of restarts so far: a request that fails while the watcher restarted the server
        under it (``aborted_since``) is sent again, whole."""
        with self._gate:
            while self._restarting:
                self._gate.wait()
            n = self.adapter.propose() if self.adapter is not None and not self._shared else None
            if n is not None and n != self.threads and self._proc is not None:
                self._restarting = True
                try:
                    while self._in_flight:
                        self._gate.wait()
                    self._restart(n)
                finally:
                    self._restarting = False
                    self._gate.notify_all()
            self._in_flight += 1
            restarts = self._restarts
        try:
            yield restarts
        finally:
            with self._gate:
                self._in_flight -= 1
                self._gate.notify_all()

    def aborted_since(self, restarts: int) -> bool:
        """Whether the server was restarted since ``serving`` yielded ``restarts`` (a request in
        flight then was cut off: waits until the new server is up)."""
        with self._gate:
            while self._restarting:
                self._gate.wait()
            return self._restarts != restarts

    def _watch(self) -> None:
        """The watcher thread: a free-CPU reading every ``adapter.interval`` seconds, requests
        in flight or not; when the adapter asks for fewer threads while a request is in flight
        (load arrived mid-request), restarts the server now, cutting that request off (its
        client sends it again: the same reply, whatever the thread count). llama.cpp cannot
        change a running server's threads, and continuing a reply from its tokens so far can
        change the next tokens (re-prefilled numerics; measured), hence the whole request."""
        assert self.adapter is not None
        while not self._watch_stop.wait(max(self.adapter.interval, 0.05)):
            with self._gate:
                if self._restarting or self._shared or self._proc is None:
                    continue
                n = self.adapter.observe()
                if n is None or not self._in_flight:
                    continue  # between requests: the next one applies it (``serving``)
                self._restarting = True
            try:
                self._restart(n, abort=True)
            except BackendError as e:
                log.warning("%s", e)  # the requests cut off report it when they retry
            finally:
                with self._gate:
                    self._restarting = False
                    self._gate.notify_all()

    def clear_prompt_cache(self) -> float:
        """Drop every prompt's KV this server keeps, its slots' and its host-memory prompt cache's
        alike: a restart on the same port (the process and its memory go). Waits for requests in
        flight; returns the seconds it took. A forgotten record that was in a prompt stays in
        that cache until this runs (issue 38.3)."""
        t0 = time.perf_counter()
        with self._gate:
            while self._restarting:
                self._gate.wait()
            self._restarting = True
            try:
                while self._in_flight:
                    self._gate.wait()
                port = self.port
                self._stop_server(grace=10.0)
                self.requested_port = port
                self.start()
            finally:
                self._restarting = False
                self._gate.notify_all()
        return time.perf_counter() - t0

    def _restart(self, threads: int, *, abort: bool = False) -> None:
        """Stop and start again with ``threads`` on the same port (the URL clients hold);
        ``abort``: at once, requests in flight cut off (they are sent again)."""
        old, port, t0 = self.threads, self.port, time.perf_counter()
        self._stop_server(grace=0.0 if abort else 10.0)
        self.threads, self.requested_port = threads, port
        self._restarts += 1
        try:
            self.start()
        except BackendError as e:
            raise BackendError(f"restarting the llama.cpp server on port {port} with {threads} threads "
                               f"(was {old}) failed: {e}. Fix the thread count with --threads N "
                               "($TRACELESS_NUM_THREADS) to keep one server for the whole run") from None
        took = time.perf_counter() - t0
        self.thread_changes.append((old, threads, took))
        self.thread_log.append((time.monotonic(), threads, abort))
        if self.adapter is not None:
            self.adapter.changed(threads)
        log.info("llama.cpp server: free CPUs changed, threads %d -> %d (restarted on port %d in %.1f s)",
                 old, threads, port, took)

    def _wait_ready(self, proc: subprocess.Popen[str], t0: float) -> str:
        lines: queue.Queue[str | None] = queue.Queue()

        def pump(stream: IO[str]) -> None:  # keeps draining stdout so the child never blocks
            for line in stream:
                lines.put(line)
            lines.put(None)

        assert proc.stdout is not None
        threading.Thread(target=pump, args=(proc.stdout,), daemon=True, name="llamacpp-stdout").start()
        deadline = t0 + self.startup_timeout
        address: str | None = None
        while address is None:
            remaining = deadline - time.perf_counter()
            if remaining <= 0:
                raise BackendError(self._fail_msg(f"did not start within {self.startup_timeout:.0f}s"))
            try:
                line = lines.get(timeout=min(remaining, 0.5))
            except queue.Empty:
                if proc.poll() is not None:
                    raise BackendError(self._fail_msg(f"exited with code {proc.returncode}")) from None
                continue
            if line is None:
                proc.wait(timeout=10)
                raise BackendError(self._fail_msg(f"exited with code {proc.returncode}"))
            try:
                msg = json.loads(line)
            except ValueError:
                continue  # stray output on stdout
            if "error" in msg:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(timeout=5)  # its log is complete only once it has exited (read under load: empty)
                raise BackendError(self._fail_msg(f"failed: {str(msg['error']).rstrip('.')}"))
            address = str(msg["address"]).rstrip("/")
        headers = {"Authorization": f"Bearer {self._api_key}"} if self._api_key else {}
        with httpx.Client(timeout=5.0, headers=headers) as client:
            while True:
                try:
                    if client.get(address + "/health").status_code == 200:
                        return address
                except httpx.HTTPError:
                    pass
                if proc.poll() is not None:
                    raise BackendError(self._fail_msg(f"exited with code {proc.returncode}"))
                if time.perf_counter() > deadline:
                    raise BackendError(
                        self._fail_msg(f"/health did not answer within {self.startup_timeout:.0f}s")
                    )
                time.sleep(0.05)

    def _fail_msg(self, what: str) -> str:
        tail = self.log_tail()
        msg = (
            f"llama.cpp server for {self.gguf_path} {what}. Check that the file is a valid GGUF "
            f"model and that there is enough memory (ctx={self.ctx} x parallel={self.parallel})."
        )
        if tail:
            msg += f"\nlast lines of the server log{f' ({self.log_path})' if self.log_path else ''}:\n{tail}"
        return msg

    def log_tail(self, lines: int = 20) -> str:
        """The last lines of llama.cpp's log."""
        if self._log_file is not None and not self._log_file.closed:
            # pread: the child shares this file's offset; seeking would misplace its writes
            fd = self._log_file.fileno()
            size = os.fstat(fd).st_size
            data = os.pread(fd, min(size, 16384), max(0, size - 16384))
        elif self.log_path is not None and self.log_path.exists():
            with open(self.log_path, "rb") as f:
                f.seek(0, os.SEEK_END)
                f.seek(max(0, f.tell() - 16384))
                data = f.read()
        else:
            return ""
        return "\n".join(data.decode("utf-8", "replace").splitlines()[-lines:])

    def stop(self) -> None:
        """Stop the server (idempotent). An anonymous log is gone once closed; a given
        ``log_path`` is kept."""
        self._watch_stop.set()
        w, self._watcher = self._watcher, None
        if w is not None and w is not threading.current_thread():
            w.join(timeout=30.0)
        self._stop_server(grace=10.0)

    def _stop_server(self, grace: float) -> None:
        proc, self._proc, self._address = self._proc, None, None
        if self._finalizer is not None:
            self._finalizer.detach()
            self._finalizer = None
        if proc is not None:
            _stop_process(proc, grace=grace)
        self._close_log()

    def _close_log(self) -> None:
        if self._log_file is not None:
            with contextlib.suppress(OSError):
                self._log_file.close()
            self._log_file = None

    close = stop

    def __enter__(self) -> LlamaCppServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def main(argv: list[str] | None = None) -> int:
    """Serve a GGUF file in the foreground until interrupted."""
    ap = argparse.ArgumentParser(description="Serve a GGUF model through llama.cpp's OpenAI-compatible API.")
    ap.add_argument("gguf")
    ap.add_argument("--port", type=int, default=8080)
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--ctx", type=int, default=4096)
    ap.add_argument("--threads", type=int, default=max(1, (os.cpu_count() or 2)))
    ap.add_argument("--parallel", type=int, default=1)
    ap.add_argument("--alias", default=None)
    ap.add_argument("--api-key-env", default=None, help="name of an environment variable holding the API key")
    args = ap.parse_args(argv)
    srv = LlamaCppServer(
        args.gguf,
        port=args.port,
        ctx=args.ctx,
        threads=args.threads,
        host=args.host,
        parallel=args.parallel,
        alias=args.alias,
        api_key=os.environ.get(args.api_key_env) if args.api_key_env else None,
        log_path=None,
        verbose=True,
    )
    with srv:
        print(
            f"serving {srv.gguf_path.name} as model {srv.model!r} at {srv.base_url} "
            f"(started in {srv.startup_seconds:.1f}s); Ctrl-C to stop",
            flush=True,
        )
        try:
            while srv.is_running():
                time.sleep(0.5)
        except KeyboardInterrupt:
            pass
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
