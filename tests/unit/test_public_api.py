"""The top-level API: the README's "Python API" example runs as written."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[2] / "README.md"


def _example() -> str:
    text = README.read_text(encoding="utf-8")
    m = re.search(r"^### Python API\n+```python\n(.*?)^```", text, re.S | re.M)
    assert m, "README lost its 'Python API' example"
    return m.group(1)


def test_readme_example_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    code = _example()
    assert len(code.strip().splitlines()) <= 10
    monkeypatch.chdir(tmp_path)
    exec(compile(code, str(README), "exec"), {"__name__": "readme"})
    out = capsys.readouterr().out
    assert "Lisbon" in out and "AER_max" in out
    assert (tmp_path / "memory.db").exists()


def test_memory_forget_and_lineage(tmp_path: Path) -> None:
    from traceless import FORGET_MODES, MEMORY_SYSTEMS, Memory, verify
    from traceless.errors import ConfigError, ReceiptError

    assert "full_purge" in FORGET_MODES and "mem0" in MEMORY_SYSTEMS
    with Memory(tmp_path / "m.db", embedder="hashing") as mem:
        (rid,) = mem.add("My locker code is QX4-AMBER-1234, I swim on Mondays.", user="bob")
        assert mem.lineage(rid)["children"][0].op == "embed"
        with pytest.raises(ConfigError, match="user="):
            mem.forget("QX4-AMBER-1234")
        r = mem.forget("QX4-AMBER-1234", user="bob")
        assert r.matched and not mem.store.containing("QX4-AMBER-1234")
        tampered = r.model_copy(update={"mode": "noop"})
        with pytest.raises(ReceiptError, match="signature"):
            verify(tampered)


def test_the_api_type_checks_as_documented(tmp_path: Path) -> None:
    # ``forget`` and ``audit`` are subpackages made callable at run time; a typed user must
    # see the functions (mypy said "Module not callable" for both before the fix)
    from mypy import api

    user = tmp_path / "user.py"
    user.write_text(_example() + (
        "from traceless import forget\n"
        "from traceless.forget import ForgetTarget\n"
        "r = forget(mem.store, ForgetTarget.literal('Lisbon', 'alice'), 'full_purge')\n"
        "reveal_type(r)\n"
        "reveal_type(result)\n"), encoding="utf-8")
    root = Path(__file__).resolve().parents[2]
    out, err, status = api.run(["--strict", "--no-error-summary", "--cache-dir", str(root / ".mypy_cache"),
                                str(user)])
    assert status == 0, out + err
    assert 'Revealed type is "traceless.forget._receipt.Receipt"' in out
    assert 'Revealed type is "traceless.audit._system_audit.SystemAuditResult"' in out
