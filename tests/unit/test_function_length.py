"""No function in ``src/traceless`` is longer than 80 lines (issue #25: functions that fit on a
screen), except the ones listed below with their reason. The lengths come from
``bench/function_lengths.py`` (``end_lineno - lineno + 1`` of every ``def``, methods and nested
functions included); an entry that is no longer too long must leave the list."""

from __future__ import annotations

import textwrap
from pathlib import Path
from types import ModuleType

from _bench import load_bench

import traceless

LIMIT = 80
PACKAGE = Path(traceless.__file__).resolve().parent  # the sources under test (PYTHONPATH decides)

ALLOWED: dict[str, str] = {}


def _lengths() -> ModuleType:
    return load_bench("function_lengths")


def test_no_function_is_over_80_lines_but_the_listed_ones() -> None:
    long = {f"{r.path}::{r.qualname}": r.lines for r in _lengths().long_functions(PACKAGE, LIMIT)}
    unlisted = {k: n for k, n in long.items() if k not in ALLOWED}
    assert not unlisted, (f"functions over {LIMIT} lines (split them, or list one in ALLOWED with its reason): "
                          + ", ".join(f"{k} ({n} lines)" for k, n in sorted(unlisted.items(), key=lambda kv: -kv[1])))
    stale = sorted(set(ALLOWED) - set(long))
    assert not stale, f"no longer over {LIMIT} lines (or gone): remove from ALLOWED: {', '.join(stale)}"


def test_the_lister_counts_def_to_last_line_methods_and_nested_functions_included(tmp_path: Path) -> None:
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    body = "\n".join(f"    x{i} = {i}" for i in range(79))  # def line + 79 = 80 lines: allowed
    (pkg / "a.py").write_text(f"def fits():\n{body}\n\n\ndef over():\n{body}\n    return x0\n", encoding="utf-8")
    nested = textwrap.indent(f"def inner():\n{body}\n    return 1\n", "        ")
    (pkg / "b.py").write_text(f"class C:\n    @staticmethod\n    def m():\n{nested}        return inner\n",
                              encoding="utf-8")
    rows = _lengths().long_functions(pkg, LIMIT)
    assert [(r.path, r.qualname, r.lines, r.lineno) for r in rows] == [
        ("pkg/b.py", "C.m", 83, 3), ("pkg/a.py", "over", 81, 83), ("pkg/b.py", "C.m.<locals>.inner", 81, 4)]
