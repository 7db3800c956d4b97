"""The bystander check tells another writer's new records from an over-deletion (issue 40
items 3-5): the digest is per record (a multiset per store), so

* an application that adds other users' records while the erasure runs does not fail it (the
  receipt says the store had additions, without a count);
* a re-run of an interrupted erasure after the application wrote meanwhile re-baselines on
  the journalled records and passes (it used to fail ``bystanders_intact`` for good, and the
  run after that found nothing: no passing receipt was ever possible);
* a record of another user that is changed or removed still fails the check.

On the real ``DictSystem`` (``traceless.systems.testing``), with the "application" writing
through the system's own ``write``."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from traceless.memory import Session, Turn
from traceless.systems import load_system_config, open_system
from traceless.systems._erase_run import erase_system
from traceless.systems.kernel import bystander_changes, digest
from traceless.systems.testing import register_dict_system

KEY = b"k" * 32
SECRET = "DE89 3704 0044 0532 0130 00"


def _session(user: str, text: str) -> Session:
    return Session(user_id=user, session_id="s1", turns=[Turn(role="user", content=text)])


def _system(tmp_path: Path) -> Any:
    register_dict_system()
    s = open_system("dict", tmp_path / "inst", load_system_config("dict", {}), None)
    s.write([_session("ann", f"my IBAN is {SECRET}"), _session("bob", "I like stamps")])
    return s


class Crash(BaseException):
    """A kill between the erasure's changes and its verification."""


def _after_execute(s: Any, then: Callable[[], None]) -> None:
    orig = s.execute_erasure

    def run(plan: Any, literals: Any) -> Any:
        out = orig(plan, literals)
        then()
        return out
    s.execute_erasure = run


def test_changes_are_told_apart() -> None:
    before = {"m": digest(["a", "b"])}
    assert bystander_changes(before, {"m": digest(["a", "b", "c"])}) == ([], ["m"])
    assert bystander_changes(before, {"m": digest(["a"])}) == (["m"], [])
    assert bystander_changes(before, {"m": digest(["a", "B"])}) == (["m"], [])  # changed = gone + added
    assert bystander_changes(before, {}) == (["m"], [])
    assert bystander_changes(before, {"m": digest(["b", "a"])}) == ([], [])


def test_the_apps_new_records_during_the_erasure_do_not_fail_it(tmp_path: Path) -> None:
    s = _system(tmp_path)
    _after_execute(s, lambda: s.write([_session("carol", "carol's new memory")]))
    r = erase_system(s, "ann", [SECRET], state_dir=tmp_path / "state", key=KEY)
    assert r.verification.passed, r.verification.checks
    assert any("were added in" in n for n in r.notes), r.notes
    assert not any(ch.isdigit() for n in r.notes if "were added in" in n for ch in n)  # no count of theirs
    assert "carol's new memory" in (tmp_path / "inst" / "dict.json").read_text()


def test_a_bystander_removed_during_the_erasure_still_fails_it(tmp_path: Path) -> None:
    s = _system(tmp_path)

    def drop_bob() -> None:
        doc = s.inst.load()
        for store in doc.values():
            for k in [k for k, v in store.items() if v["owner"] == "bob"]:
                del store[k]
        s.inst.save(doc)
    _after_execute(s, drop_bob)
    r = erase_system(s, "ann", [SECRET], state_dir=tmp_path / "state", key=KEY)
    assert not r.verification.checks["bystanders_intact"]
    assert any(n.startswith("OVER-DELETION") for n in r.notes), r.notes


@pytest.mark.parametrize("app_writes", [True, False])
def test_an_interrupted_erasure_resumes_after_the_app_wrote(tmp_path: Path, app_writes: bool) -> None:
    s = _system(tmp_path)

    def crash() -> None:
        raise Crash
    _after_execute(s, crash)
    with pytest.raises(Crash):
        erase_system(s, "ann", [SECRET], state_dir=tmp_path / "state", key=KEY)
    assert list((tmp_path / "state" / "erasures").glob("*.json"))  # the journal is left for the re-run
    if app_writes:
        s.write([_session("carol", "written while the erasure was interrupted")])
    again = open_system("dict", tmp_path / "inst", load_system_config("dict", {}), None)
    r = erase_system(again, "ann", [SECRET], state_dir=tmp_path / "state", key=KEY)
    assert r.verification.passed, (r.verification.checks, r.notes)
    assert not list((tmp_path / "state" / "erasures").glob("*.json"))
    text = (tmp_path / "inst" / "dict.json").read_text()
    assert SECRET not in text and "I like stamps" in text
