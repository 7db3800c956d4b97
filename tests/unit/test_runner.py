"""The generic study runner: durable rows, resume after a crash or SIGKILL, refusals,
generation cache across resume, concurrency, config parsing."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, ClassVar

import pytest
from pydantic import BaseModel, Field

from traceless.errors import ConfigError, ResumeError, StudyError
from traceless.models import ChatMessage, GenerationConfig, ScriptedBackend
from traceless.studies import (
    STUDIES,
    Cell,
    CellResult,
    RunContext,
    Study,
    derive_seed,
    load_config,
    parse_sets,
    read_manifest,
    read_rows,
    run_study,
)

HERE = Path(__file__).resolve().parent


class ToyConfig(BaseModel):
    """A small grid."""

    groups: int = 4
    """Number of groups."""
    per_group: int = 5
    """Cells per group."""
    seed: int = 7
    """Base seed."""
    ks: list[int] = Field(default_factory=lambda: [1, 3])
    """A list knob (for --set parsing)."""
    delay: float = 0.0
    """Seconds each reply takes (for the SIGKILL test)."""


class ToyStudy(Study[ToyConfig]):
    """Each cell asks the model to echo a number; the metric is the number's parity."""

    name: ClassVar[str] = "toy-runner-test"
    version: ClassVar[str] = "1"
    config_cls: ClassVar[type[BaseModel]] = ToyConfig
    resume_may_change: ClassVar[frozenset[str]] = frozenset({"groups", "delay"})
    boom_after: ClassVar[int | None] = None
    yielded: ClassVar[int] = 0

    def cells(self, config: ToyConfig) -> Iterable[Cell]:
        for g in range(config.groups):
            for i in range(config.per_group):
                yield Cell(key=f"g={g}/i={i}", group=f"g={g}", params={"g": g, "i": i},
                           seed=derive_seed(config.seed, g, i))

    def run_group(self, ctx: RunContext[ToyConfig], cells: list[Cell]) -> Iterator[CellResult]:
        prompts = [[ChatMessage(role="user", content=f"echo {c.seed % 1000}")] for c in cells]
        gens = ctx.generate_batch(prompts, GenerationConfig(max_new_tokens=8))
        for c, p, g in zip(cells, prompts, gens, strict=True):
            if ToyStudy.boom_after is not None and ToyStudy.yielded >= ToyStudy.boom_after:
                raise RuntimeError("injected crash")
            ToyStudy.yielded += 1
            yield CellResult(key=c.key, prompt=p, reply=g.text, metrics={"even": int(g.text.split()[-1]) % 2 == 0},
                             timing=CellResult.timing_of(g), extra={"group": c.group})


if ToyStudy.name not in STUDIES:
    STUDIES.register(ToyStudy.name)(ToyStudy)


def echo_backend(delay: float = 0.0) -> ScriptedBackend:
    def reply(messages: list[ChatMessage], cfg: GenerationConfig) -> str:
        if delay:
            time.sleep(delay)
        return "value " + messages[-1].content.split()[-1]

    return ScriptedBackend(reply, name="echo")


def comparable(out: Path) -> list[tuple[Any, ...]]:
    return [(r.model_tag, r.key, r.group, r.seed, json.dumps(r.config, sort_keys=True), r.reply,
             json.dumps(r.metrics, sort_keys=True), json.dumps(r.prompt)) for r in read_rows(out)]


@pytest.fixture(autouse=True)
def _reset() -> Iterator[None]:
    ToyStudy.boom_after = None
    ToyStudy.yielded = 0
    yield
    ToyStudy.boom_after = None


def test_uninterrupted_run_writes_every_cell_and_manifest(tmp_path: Path) -> None:
    out = tmp_path / "run"
    s = run_study("toy-runner-test", out, backend=echo_backend(), model_tag="echo", progress=False)
    assert (s.cells_total, s.cells_run, s.cells_skipped, s.finished) == (20, 20, 0, True)
    rows = read_rows(out)
    assert len(rows) == 20
    r = rows[0]
    assert r.model == {"name": "echo", "backend": "ScriptedBackend"}
    assert r.config["study"]["groups"] == 4 and r.config["cell"] == {"g": 0, "i": 0}
    assert r.reply is not None and r.reply.startswith("value ")
    assert r.prompt == [{"role": "user", "content": f"echo {r.seed % 1000}"}]
    assert r.code_version
    man = read_manifest(out)
    assert man.study == "toy-runner-test" and man.runs["echo"].finished and man.runs["echo"].cells_done == 20


def test_crash_midway_then_resume_is_identical_and_pays_no_generation_twice(tmp_path: Path) -> None:
    ref = tmp_path / "ref"
    run_study("toy-runner-test", ref, backend=echo_backend(), model_tag="echo", progress=False)

    out = tmp_path / "crashed"
    ToyStudy.boom_after, ToyStudy.yielded = 7, 0
    be = echo_backend()
    with pytest.raises(RuntimeError, match="injected crash"):
        run_study("toy-runner-test", out, backend=be, model_tag="echo", progress=False)
    assert len(read_rows(out)) == 7
    man = read_manifest(out)
    assert not man.runs["echo"].finished and man.runs["echo"].cells_done == 7
    calls_before = len(be.calls)  # group 0 (5) + group 1 (5) generated before the crash

    ToyStudy.boom_after = None
    be2 = echo_backend()
    s = run_study("toy-runner-test", out, resume=True, backend=be2, model_tag="echo", progress=False)
    assert (s.cells_skipped, s.cells_run, s.finished) == (7, 13, True)
    # group 1's three unfinished cells were answered from the persisted generation cache
    assert s.cache_hits == 3
    assert len(be2.calls) == 20 - calls_before
    assert comparable(out) == comparable(ref)


def test_resume_of_a_finished_run_runs_nothing(tmp_path: Path) -> None:
    out = tmp_path / "run"
    run_study("toy-runner-test", out, backend=echo_backend(), model_tag="echo", progress=False)
    be = echo_backend()
    s = run_study("toy-runner-test", out, resume=True, backend=be, model_tag="echo", progress=False)
    assert (s.cells_run, s.cells_skipped, s.finished) == (0, 20, True)
    assert be.calls == []


def test_threaded_groups_give_the_same_rows(tmp_path: Path) -> None:
    ref, par = tmp_path / "ref", tmp_path / "par"
    run_study("toy-runner-test", ref, backend=echo_backend(), model_tag="echo", progress=False)
    s = run_study("toy-runner-test", par, backend=echo_backend(0.01), model_tag="echo", workers=3, progress=False)
    assert s.finished
    assert comparable(par) == comparable(ref)


def test_crash_in_a_worker_thread_is_raised_and_resumable(tmp_path: Path) -> None:
    ref, out = tmp_path / "ref", tmp_path / "out"
    run_study("toy-runner-test", ref, backend=echo_backend(), model_tag="echo", progress=False)
    ToyStudy.boom_after, ToyStudy.yielded = 6, 0
    with pytest.raises(RuntimeError, match="injected crash"):
        run_study("toy-runner-test", out, backend=echo_backend(0.01), model_tag="echo", workers=2, progress=False)
    ToyStudy.boom_after = None
    run_study("toy-runner-test", out, resume=True, backend=echo_backend(), model_tag="echo", progress=False)
    assert comparable(out) == comparable(ref)


def test_max_cells_slices_and_resume_completes(tmp_path: Path) -> None:
    ref, out = tmp_path / "ref", tmp_path / "out"
    run_study("toy-runner-test", ref, backend=echo_backend(), model_tag="echo", progress=False)
    s = run_study("toy-runner-test", out, backend=echo_backend(), model_tag="echo", progress=False, max_cells=8)
    assert (s.cells_run, s.finished) == (8, False)
    s = run_study("toy-runner-test", out, resume=True, backend=echo_backend(), model_tag="echo", progress=False)
    assert (s.cells_run, s.finished) == (12, True)
    assert comparable(out) == comparable(ref)


def test_two_models_in_one_dir(tmp_path: Path) -> None:
    out = tmp_path / "run"
    run_study("toy-runner-test", out, backend=echo_backend(), model_tag="m1", progress=False)
    other = ScriptedBackend(lambda m, c: "value 2", name="two")
    s = run_study("toy-runner-test", out, resume=True, backend=other, model_tag="m2", progress=False)
    assert s.cells_run == 20
    man = read_manifest(out)
    assert set(man.runs) == {"m1", "m2"}
    assert {r.model_tag for r in read_rows(out)} == {"m1", "m2"}
    assert len(read_rows(out, "m2")) == 20


def test_grow_an_allowed_field_on_resume(tmp_path: Path) -> None:
    out = tmp_path / "run"
    run_study("toy-runner-test", out, {"groups": 2}, backend=echo_backend(), model_tag="echo", progress=False)
    s = run_study("toy-runner-test", out, {"groups": 4}, resume=True, backend=echo_backend(), model_tag="echo",
                  progress=False)
    assert (s.cells_skipped, s.cells_run) == (10, 10)


def test_refusals(tmp_path: Path) -> None:
    out = tmp_path / "run"
    run_study("toy-runner-test", out, backend=echo_backend(), model_tag="echo", progress=False)
    with pytest.raises(StudyError, match="--resume"):
        run_study("toy-runner-test", out, backend=echo_backend(), model_tag="echo", progress=False)
    with pytest.raises(ResumeError, match="config differs.*per_group"):
        run_study("toy-runner-test", out, {"per_group": 2}, resume=True, backend=echo_backend(),
                  model_tag="echo", progress=False)
    with pytest.raises(ResumeError, match="identity"):
        run_study("toy-runner-test", out, resume=True, backend=ScriptedBackend(default="x", name="other"),
                  model_tag="echo", progress=False)

    class OtherStudy(ToyStudy):
        name: ClassVar[str] = "toy-other"

    with pytest.raises(ResumeError, match="toy-runner-test.*not 'toy-other'"):
        run_study(OtherStudy(), out, resume=True, backend=echo_backend(), model_tag="echo", progress=False)

    class V2(ToyStudy):
        version: ClassVar[str] = "2"

    with pytest.raises(ResumeError, match="version 1; this is version 2"):
        run_study(V2(), out, resume=True, backend=echo_backend(), model_tag="echo", progress=False)

    junk = tmp_path / "junk"
    junk.mkdir()
    (junk / "x.txt").write_text("x")
    with pytest.raises(StudyError, match="not empty"):
        run_study("toy-runner-test", junk, backend=echo_backend(), model_tag="echo", progress=False)


def test_config_parsing(tmp_path: Path) -> None:
    assert parse_sets(ToyConfig, ["ks=1,3,6", "groups=2"]) == {"ks": [1, 3, 6], "groups": 2}
    assert parse_sets(ToyConfig, ["ks=6"]) == {"ks": [6]}
    with pytest.raises(ConfigError, match="no field 'nope'"):
        parse_sets(ToyConfig, ["nope=1"])
    with pytest.raises(ConfigError, match="key=value"):
        parse_sets(ToyConfig, ["groups"])
    f = tmp_path / "c.toml"
    f.write_text("groups = 3\nks = [10]\n")
    cfg = load_config(ToyConfig, f, ["per_group=2"])
    assert (cfg.groups, cfg.ks, cfg.per_group) == (3, [10], 2)
    with pytest.raises(ConfigError, match="'groups'"):
        load_config(ToyConfig, None, ["groups=many"])


def test_derive_seed_is_stable_and_distinct() -> None:
    assert derive_seed(1, "a", 2) == derive_seed(1, "a", 2)
    assert len({derive_seed(1, "a", i) for i in range(100)}) == 100
    assert derive_seed(1, "a") != derive_seed(2, "a")


_CHILD = """
import sys
sys.path.insert(0, {here!r})
import test_runner as t
from traceless.studies import run_study
run_study("toy-runner-test", {out!r}, {{"delay": 0.05}}, backend=t.echo_backend(0.05), model_tag="echo",
          progress=False)
"""


def test_sigkill_midway_then_resume_is_identical(tmp_path: Path) -> None:
    ref, out = tmp_path / "ref", tmp_path / "killed"
    run_study("toy-runner-test", ref, {"delay": 0.05}, backend=echo_backend(), model_tag="echo", progress=False)
    proc = subprocess.Popen([sys.executable, "-c", _CHILD.format(here=str(HERE), out=str(out))],
                            env={**os.environ, "PYTHONPATH": str(HERE)})
    db = out / "results.sqlite"
    deadline = time.time() + 60
    n = 0
    while time.time() < deadline:
        if db.exists():
            try:
                with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as c:
                    n = c.execute("SELECT COUNT(*) FROM cells").fetchone()[0]
            except sqlite3.Error:
                n = 0
            if n >= 6:
                break
        time.sleep(0.02)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert 6 <= n < 20, "the child should be killed midway"
    kept = len(read_rows(out))
    assert 6 <= kept < 20
    s = run_study("toy-runner-test", out, resume=True, backend=echo_backend(), model_tag="echo", progress=False)
    assert s.finished and s.cells_skipped == kept
    assert comparable(out) == comparable(ref)


def test_default_workers_follow_the_backend() -> None:
    from traceless.models import CachingBackend
    from traceless.run._runner import _default_workers

    class Http(ScriptedBackend):
        def concurrency(self) -> int:
            return 4

    class Served(Http):
        def slots(self) -> int:  # a llama.cpp server with one slot
            return 1

    assert _default_workers(None) == 1
    assert _default_workers(echo_backend()) == 1
    assert _default_workers(Http(default="x")) == 4
    assert _default_workers(Served(default="x")) == 1
    assert _default_workers(CachingBackend(Http(default="x"))) == 4  # the cache forwards the capabilities
    assert _default_workers(CachingBackend(Served(default="x"))) == 1


def test_two_models_running_at_once_keep_both_records(tmp_path: Path) -> None:
    import threading

    out = tmp_path / "run"
    run_study("toy-runner-test", out, {"groups": 1}, backend=echo_backend(), model_tag="seed", progress=False)
    errors: list[BaseException] = []

    def go(tag: str, delay: float) -> None:
        try:
            run_study("toy-runner-test", out, {"groups": 1}, resume=True, backend=echo_backend(delay),
                      model_tag=tag, progress=False)
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)

    ts = [threading.Thread(target=go, args=("fast", 0.0)), threading.Thread(target=go, args=("slow", 0.02))]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors
    man = read_manifest(out)
    assert set(man.runs) == {"seed", "fast", "slow"}
    assert all(r.finished for r in man.runs.values())


def test_shards_split_a_run_and_finish_it(tmp_path: Path) -> None:
    ref, out = tmp_path / "ref", tmp_path / "out"
    run_study("toy-runner-test", ref, backend=echo_backend(), model_tag="echo", progress=False)
    s0 = run_study("toy-runner-test", out, backend=echo_backend(), model_tag="echo", progress=False, shard=(0, 2))
    assert (s0.cells_run, s0.finished, s0.part_finished) == (10, False, True)  # its shard is done
    assert {r.group for r in read_rows(out)} == {"g=0", "g=2"}
    s1 = run_study("toy-runner-test", out, resume=True, backend=echo_backend(), model_tag="echo", progress=False,
                   shard=(1, 2))
    assert (s1.cells_run, s1.finished, s1.part_finished) == (10, True, True)
    cut = run_study("toy-runner-test", tmp_path / "cut", backend=echo_backend(), model_tag="echo", progress=False,
                    shard=(0, 2), max_cells=3)
    assert not cut.part_finished and not cut.finished
    assert read_manifest(out).runs["echo"].finished
    assert comparable(out) == comparable(ref)
    with pytest.raises(ConfigError, match="shard 2/2"):
        run_study("toy-runner-test", tmp_path / "bad", backend=echo_backend(), model_tag="e", shard=(2, 2))


def test_ctrl_c_with_concurrent_groups_stops_promptly(tmp_path: Path) -> None:
    """Ctrl-C while groups run in worker threads: queued groups never start, running ones stop
    at their next result, the manifest records the run as unfinished, and resume completes it."""
    import os
    import signal
    import threading

    out = tmp_path / "int"
    cfg = {"groups": 12}
    sent = threading.Event()
    slow = echo_backend(0.05)

    def reply(messages: list[ChatMessage], gc: GenerationConfig) -> str:
        # Ctrl-C once some rows are on disk, not after a fixed delay: on a loaded machine a
        # timer fired before the first row (or after the last) and the test failed by chance
        if not sent.is_set() and (out / "results.sqlite").exists() and len(read_rows(out)) >= 5:
            sent.set()
            os.kill(os.getpid(), signal.SIGINT)
        return slow.generate(messages, gc).text

    # Python's own Ctrl-C handler, whatever this process inherited: a test suite started as a
    # background job (`cmd &` in a script) inherits SIGINT ignored, and then nothing is raised
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(KeyboardInterrupt):
            run_study("toy-runner-test", out, cfg, backend=ScriptedBackend(reply, name="echo"), model_tag="echo",
                      workers=2, progress=False)
    finally:
        signal.signal(signal.SIGINT, before)
    assert sent.is_set()
    n = len(read_rows(out))
    assert 0 < n < 12 * 5 // 2  # without the stop, every queued group would have run
    assert not read_manifest(out).runs["echo"].finished
    s = run_study("toy-runner-test", out, cfg, resume=True, backend=echo_backend(), model_tag="echo", progress=False)
    assert s.finished and s.cells_skipped == n


def test_sigterm_stops_a_cli_run_like_ctrl_c() -> None:
    import os
    import signal

    from traceless.cli._study import _sigterm_as_interrupt

    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(KeyboardInterrupt), _sigterm_as_interrupt():
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(5)  # the handler interrupts this
    assert signal.getsignal(signal.SIGTERM) is before


def test_a_served_llamacpp_model_gets_slots_and_as_many_groups_in_flight(monkeypatch: pytest.MonkeyPatch) -> None:
    """The engine options' slots reach the backend factory, and the runner keeps as many
    groups in flight as the server has slots; the environment below the edge changes nothing."""
    import traceless.models
    from traceless.models import EngineOptions
    from traceless.run._runner import _default_workers, _load_backend

    seen: list[dict[str, Any]] = []

    class Served(ScriptedBackend):
        def __init__(self, parallel: int) -> None:
            super().__init__(default="x")
            self.parallel = parallel

        def concurrency(self) -> int:
            return max(4, self.parallel)

        def slots(self) -> int:
            return self.parallel

    def fake_load(spec: str, **kw: Any) -> ScriptedBackend:
        seen.append(kw)
        eng = kw.get("engine") or EngineOptions()
        return Served(int(kw.get("parallel") or eng.parallel or 1))

    monkeypatch.setattr(traceless.models, "load_backend", fake_load)
    monkeypatch.setenv("TRACELESS_LLAMACPP_PARALLEL", "6")  # not read below the edge
    be = _load_backend("llamacpp:qwen2.5-coder-0.5b-instruct", {"engine": EngineOptions(parallel=6)})
    assert seen[-1] == {"engine": EngineOptions(parallel=6)}
    assert _default_workers(be) == 6
    assert _default_workers(_load_backend("llamacpp:qwen2.5-coder-0.5b-instruct", None)) == 1
    assert seen[-1] == {}
