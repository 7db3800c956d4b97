"""Every function in ``src/traceless`` longer than a limit (default 80 lines), longest first
(issue #25: functions that fit on a screen).

    python bench/function_lengths.py [--limit 80] [--root src/traceless]

A function's length is ``end_lineno - lineno + 1`` of its ``def`` node (decorators not
counted, the docstring and nested functions counted); nested functions and methods are
listed on their own as well. Prints one ``LINES path:line qualname`` row per function, then a
summary line with the count and the longest. Exits 0 always: a listing, not a check (the
check is ``tests/unit/test_function_length.py``).
"""

from __future__ import annotations

import argparse
import ast
from pathlib import Path
from typing import NamedTuple

ROOT = Path(__file__).resolve().parents[1]


class LongFunction(NamedTuple):
    lines: int
    path: str
    lineno: int
    qualname: str


def _walk(node: ast.AST, prefix: str) -> list[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
    found: list[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]] = []
    for child in ast.iter_child_nodes(node):
        if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
            name = f"{prefix}{child.name}"
            found.append((name, child))
            found.extend(_walk(child, f"{name}.<locals>."))
        elif isinstance(child, ast.ClassDef):
            found.extend(_walk(child, f"{prefix}{child.name}."))
        else:
            found.extend(_walk(child, prefix))
    return found


def long_functions(root: Path, limit: int = 80) -> list[LongFunction]:
    """The functions under ``root`` (``*.py``) with more than ``limit`` lines, longest first;
    ``path`` is relative to ``root``'s parent (``traceless/report/_afterdelete.py``)."""
    rows: list[LongFunction] = []
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        rel = path.relative_to(root.parent).as_posix()
        for qualname, fn in _walk(tree, ""):
            length = (fn.end_lineno or fn.lineno) - fn.lineno + 1
            if length > limit:
                rows.append(LongFunction(length, rel, fn.lineno, qualname))
    return sorted(rows, key=lambda r: (-r.lines, r.path, r.lineno))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--limit", type=int, default=80, help="longest allowed function, in lines")
    ap.add_argument("--root", type=Path, default=ROOT / "src" / "traceless", help="package folder")
    args = ap.parse_args()
    rows = long_functions(args.root, args.limit)
    for r in rows:
        print(f"{r.lines:5d} {r.path}:{r.lineno} {r.qualname}")
    longest = f", longest {rows[0].lines} lines ({rows[0].qualname})" if rows else ""
    print(f"{len(rows)} functions over {args.limit} lines{longest}")


if __name__ == "__main__":
    main()
