"""traceless's erasure of one user from a CrewAI memory on LanceDB (issue 38.1) against
CrewAI's own deletion plus LanceDB's own compaction, on the same instance of ``--memories``
memories (built as ``bench/bench_scan.py`` builds it: 500 users, the template's rows copied
with one LanceDB ``add``).

    /work/venv-crewai/bin/python bench/bench_erase_crewai.py [--memories 10000] [--reps 3]

Each rep copies the instance fresh, then times

* ``own``: ``Memory.forget(scope="/user/U")`` (CrewAI's deletion) and ``optimize()`` (LanceDB's
  compaction with its default 7-day cleanup: what CrewAI's storage runs in the background),
  then counts the copies of the user's own vectors (float32 bytes) and texts (those no other
  user's row holds) still in the files;
* ``traceless``: ``erase_system`` (plan, CrewAI's forget, the kernel's removals, the scalar
  index rebuilt, ``optimize(cleanup_older_than=0)``, every file checked for the erased vectors
  and texts, re-scan, bystanders, signed receipt).

p50 wall seconds over ``--reps``; exits 1 when traceless's receipt does not pass or claims
``clear`` while a file still holds an erased vector.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_scan import _runtime, build_crewai  # noqa: E402

from traceless.audit import make_canary  # noqa: E402
from traceless.systems import erase_system, load_system_config, system_class  # noqa: E402


def _vectors(memory: Path, scope: str) -> list[bytes]:
    """The user's vectors (float32 bytes) and texts that no other user's row holds (the filler
    copies share the template's vectors: those stay, with the other users' rows)."""
    import lancedb
    import numpy as np

    data = lancedb.connect(str(memory)).open_table("memories").to_arrow().to_pylist()
    mine = [r for r in data if r["scope"] == scope]
    others = {np.asarray(r["vector"], dtype="<f4").tobytes() for r in data if r["scope"] != scope}
    texts = {r["content"] for r in data if r["scope"] != scope}
    return sorted({np.asarray(r["vector"], dtype="<f4").tobytes() for r in mine} - others
                  | {r["content"].encode() for r in mine if r["content"] not in texts})


def _held(memory: Path, needles: list[bytes]) -> int:
    return sum(p.read_bytes().count(x) for p in memory.rglob("*") if p.is_file() for x in needles)


def _own(memory: Path, scope: str) -> float:
    import lancedb
    from crewai.memory import Memory
    from crewai.memory.storage.lancedb_storage import LanceDBStorage

    from traceless.systems._crewai import _console_off, _Embed, _llm

    t0 = time.perf_counter()
    mem = Memory(llm=_llm(None), storage=LanceDBStorage(path=str(memory)), embedder=_Embed(_runtime().embedder))
    with _console_off():
        mem.forget(scope=scope)
        mem.drain_writes()
        mem.close()
    lancedb.connect(str(memory)).open_table("memories").optimize()
    return time.perf_counter() - t0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--memories", type=int, default=10_000)
    ap.add_argument("--reps", type=int, default=3)
    args = ap.parse_args()
    canary = make_canary(__import__("numpy").random.default_rng(0))
    print(f"load {os.getloadavg()[0]:.2f}; {args.memories} memories; reps {args.reps}")
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp) / "base"
        build_crewai(base, args.memories, [canary])
        scope, ok, times = "/user/u0", True, {"own": [], "traceless": []}
        vecs = _vectors(base / "memory", scope)
        for rep in range(args.reps):
            for side in ("own", "traceless"):
                work = Path(tmp) / f"{side}{rep}"
                shutil.copytree(base, work)
                if side == "own":
                    times[side].append(_own(work / "memory", scope))
                    left = _held(work / "memory", vecs)
                else:
                    cfg = load_system_config("crewai", {"storage_path": str(work / "memory")})
                    t0 = time.perf_counter()
                    r = erase_system(system_class("crewai").attach(cfg, _runtime(), read_only=False), "u0",
                                     [canary], state_dir=work / "state", key=b"k" * 32)
                    times[side].append(time.perf_counter() - t0)
                    left = _held(work / "memory", vecs)
                    ok &= r.verification.passed and not (left and "memories=clear" in r.guarantee)
                    if rep == 0:
                        print("  traceless:", r.guarantee, *[n for n in r.notes if "LanceDB" in n])
                print(f"  rep {rep} {side:<9} {times[side][-1]:6.2f} s; copies of the user's {len(vecs)} own "
                      f"vectors and texts left in the files: {left}")
                shutil.rmtree(work)
    for side, ts in times.items():
        print(f"{side:<9} p50 {statistics.median(ts):6.2f} s")
    print(f"load {os.getloadavg()[0]:.2f}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
