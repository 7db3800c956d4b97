"""Issue 34: one literal-match rule and one bystander digest in ``traceless.systems`` (the
kernel's ``count_literals`` / ``byte_forms`` / ``digest``), and the audit's copy count by the
same rule. A second implementation in an adapter (``text.count(lit)``, ``lit in value``, a
``hashlib.sha256`` over other users' records) fails this test."""

from __future__ import annotations

import ast
from pathlib import Path

from traceless.systems.kernel import count_literals, digest, literal_forms

SRC = Path(__file__).resolve().parents[2] / "src" / "traceless"
ALLOWED_SHA = {"kernel.py", "_erase_run.py", "conformance.py", "_mem0_live.py"}
"""The kernel; the request id (a keyed hash of the request, not a digest of records); the
suite's file fingerprints; mem0's per-record content hash (vector bytes, fed to ``digest``)."""


def _literal_names(fn: ast.AST) -> set[str]:
    return {a.arg for a in ast.walk(fn) if isinstance(a, ast.arg) and "lit" in a.arg}


def _second_rules(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            if node.func.attr == "sha256" and path.name not in ALLOWED_SHA:
                out.append(f"{path.name}:{node.lineno}: hashlib.sha256 (use kernel.digest)")
            if node.func.attr == "count" and node.args and isinstance(node.args[0], ast.Name) \
                    and "lit" in node.args[0].id:
                out.append(f"{path.name}:{node.lineno}: .count({node.args[0].id}) (use kernel.count_literals)")
        if isinstance(node, ast.Compare) and any(isinstance(op, ast.In) for op in node.ops) \
                and isinstance(node.left, ast.Name) and "lit" in node.left.id:
            out.append(f"{path.name}:{node.lineno}: `{node.left.id} in ...` (use kernel.count_literals)")
    return out


def test_no_adapter_has_a_literal_rule_or_digest_of_its_own() -> None:
    files = [p for p in (SRC / "systems").rglob("*.py") if p.name != "kernel.py"] + [SRC / "audit" / "_engine.py"]
    found = [f for p in files for f in _second_rules(p)]
    assert not found, "\n".join(found)


def test_the_check_finds_a_second_rule(tmp_path: Path) -> None:
    p = tmp_path / "_adapter.py"
    p.write_text("import hashlib\ndef scan(text, literals):\n    n = sum(text.count(lit) for lit in literals)\n"
                 "    d = hashlib.sha256(b'x')\n    return any(lit in text for lit in literals)\n")
    assert len(_second_rules(p)) == 3


def test_the_rule_counts_every_form_a_record_holds() -> None:
    assert literal_forms("Zoë") == ("Zoë", "Zo\\u00eb", "Zo\\u00EB")
    assert count_literals('{"name": "Zo\\u00eb"} and Zoë', ["Zoë"]) == 2
    assert count_literals("abc", []) == 0
    assert digest(["b", "a"]) == digest(["a", "b"]) != digest(["a", "b", "b"])
