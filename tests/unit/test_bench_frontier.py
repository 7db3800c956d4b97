"""bench/bench_frontier.py's comparison: every differing cell is listed (not the first ten
only) and a reply that quotes the cell's canary is printed with the canary masked."""

from __future__ import annotations

from types import ModuleType

from _bench import load_bench

from traceless.studies import ResultRow


def _bench() -> ModuleType:
    return load_bench("bench_frontier")


def _row(key: str, reply: str, canary: str) -> ResultRow:
    return ResultRow(model_tag="m", key=key, group="g", config={}, seed=0, model={}, code_version="x",
                     prompt=None, reply=reply, timing={}, metrics={}, extra={"canary": canary}, created=0.0)


def test_every_differing_reply_is_listed_with_its_canary_masked() -> None:
    bench = _bench()
    canary = "QX-FALCON-4821"
    rows = [_row(f"inst=a/aer/k={i}", f"token {canary}" if i % 2 else "no idea", canary) for i in range(14)]
    naive = {r.key: (r.reply or "") for r in rows}
    for i in range(12):  # 12 differ: more than the ten printed side by side
        naive[f"inst=a/aer/k={i}"] = f"it is {canary}." if i % 3 else "sorry"
    diffs = bench.differing(rows, naive)
    assert [k for k, _, _ in diffs] == [f"inst=a/aer/k={i}" for i in range(12)]
    assert all(canary not in a and canary not in b for _, a, b in diffs)
    assert ("inst=a/aer/k=1", "token [canary]", "it is [canary].") in diffs
    assert bench.differing(rows, {r.key: r.reply for r in rows}) == []
