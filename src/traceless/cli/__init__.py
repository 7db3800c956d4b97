"""The ``traceless`` command line. Every command has ``--help``.

Errors traceless raises on purpose print one line (``error: ...`` with the fix) and exit
with the error class's code; nothing is half-written.
"""

from __future__ import annotations

import importlib
import os
import sys
from typing import Any

import typer

from traceless._version import __version__
from traceless.errors import TracelessError

__all__ = ["app", "main", "console", "build_app"]

_HELP = ("Agent memory that can prove it forgot: tiered memory with lineage, verifiable forget "
         "modes, leakage audits and selective-replay unlearning. Runs offline.")

# Every top-level command: (module, attribute, kind, one-line help). A command's module is
# imported only when that command runs (or for the full app), so `traceless forget modes`
# never pays for torch, scipy or the studies.
COMMANDS: dict[str, tuple[str, str, str, str]] = {
    "audit": ("traceless.cli._audit", "audit_cmd", "command",
              "Plant canaries, probe an agent, forget with every mode, print per-tier residue."),
    "memory": ("traceless.cli._memory", "memory_app", "group", "Inspect and fill a memory file."),
    "forget": ("traceless.cli._forget", "forget_app", "group",
               "Forget a record, literal, session or user with a named mode; list modes; verify receipts."),
    "scan": ("traceless.cli._erase", "scan_cmd", "command",
             "Read-only: where a user's data (or a literal) lives in a live memory system (mem0 …)."),
    "export": ("traceless.cli._deployment", "export_cmd", "command",
               "Read-only access export (Art. 15): what each instance holds on a person, one JSON file per store."),
    "keys": ("traceless.cli._keys", "keys_app", "group",
             "The receipt-signing key: export its public half for verifiers."),
    "log": ("traceless.cli._log", "log_app", "group",
            "The append-only receipt log (forget --log): verify inclusion and consistency; append receipts."),
    "data": ("traceless.cli._data", "data_app", "group",
             "Shipped datasets; import LoCoMo, LongMemEval and OpenAI-style chat logs as sessions."),
    "models": ("traceless.cli._models", "models_app", "group", "List and install the embedded offline models."),
    "study": ("traceless.cli._study", "study_app", "group", "Run the papers' studies (resumable)."),
    "report": ("traceless.cli._study", "report_cmd", "command", "Render a results dir: tables, figures, findings."),
}


def _load(name: str) -> Any:
    module, attr, _, _ = COMMANDS[name]
    obj = getattr(importlib.import_module(module), attr)
    if name == "memory" and "systems" not in {c.name for c in obj.registered_commands}:
        obj.command("systems")(importlib.import_module("traceless.cli._systems").systems_cmd)
    if name == "study":
        from traceless.cli._train import train_auditor_cmd

        if "train-auditor" not in {c.name for c in obj.registered_commands}:
            obj.command("train-auditor")(train_auditor_cmd)
    return obj


def build_app(only: str | None = None) -> typer.Typer:
    """The CLI app. ``only``: mount that command for real and the others as help-only
    stubs (fast start); ``None``: mount everything."""
    root = typer.Typer(name="traceless", help=_HELP, no_args_is_help=True, add_completion=False,
                       pretty_exceptions_enable=False)
    for name, (_, _, kind, help_) in COMMANDS.items():
        real = only is None or name == only
        if kind == "command":
            root.command(name, help=help_)(_load(name) if real else _stub)
        else:
            root.add_typer(_load(name) if real else typer.Typer(help=help_), name=name, help=help_)
    root.callback(invoke_without_command=True)(_root)
    return root


def _stub() -> None:  # pragma: no cover - only reachable through a name build_app mounted for real
    raise typer.Exit(2)


def _root(
    version: bool = typer.Option(False, "--version", help="Print the version and exit."),
) -> None:
    if version:
        typer.echo(f"traceless {__version__}")
        raise typer.Exit(0)


def __getattr__(name: str) -> Any:
    if name == "app":  # the full app, built on first use (tests, docs generation)
        full = build_app()
        globals()["app"] = full
        return full
    raise AttributeError(name)


def _command_of(argv: list[str]) -> str | None:
    return next((a for a in argv if not a.startswith("-")), None)


def main(argv: list[str] | None = None) -> None:
    """Console entry point."""
    args = sys.argv[1:] if argv is None else argv
    # No third-party pydantic plugin (an observability hook such as logfire's can see every value
    # validated: memory text, canaries) runs in the CLI, and none is searched for: the search
    # is an entry-point scan of every installed distribution at the first model class, which
    # a command that loads no model would pay for at start-up (issue #13.4). Set the variable
    # yourself to choose otherwise.
    os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")
    first = _command_of(args)
    only = first if first in COMMANDS else ""  # no command: every entry a help-only stub
    try:
        build_app(only)(args=args, standalone_mode=False)
    except TracelessError as e:
        typer.secho(f"error: {e}", fg=typer.colors.RED, err=True)
        sys.exit(e.exit_code)
    except typer.Exit as e:
        sys.exit(e.exit_code)
    except typer.Abort:
        typer.echo("aborted", err=True)
        sys.exit(130)
    except Exception as e:
        # usage errors from typer's (vendored) click: print the usage line, not a traceback
        show, code = getattr(e, "show", None), getattr(e, "exit_code", None)
        if callable(show) and isinstance(code, int):
            show()
            sys.exit(code)
        raise


def console() -> None:
    """The ``traceless`` script: :func:`main`, and then, when a native runtime that cannot
    survive interpreter finalization was loaded by the command (an adapter's
    ``traceless.systems.unsafe_at_finalization``: lancedb under crewai), the end of the
    process without finalizing it: atexit handlers run, stdout and stderr are flushed, and the
    exit status is the command's (``os._exit``)."""
    try:
        main()
    except SystemExit as e:
        _end(e.code)
    except BaseException:
        if not _finalization_unsafe():
            raise
        import traceback

        traceback.print_exc()
        _end(130 if isinstance(sys.exc_info()[1], KeyboardInterrupt) else 1)
    _end(0)


def _finalization_unsafe() -> bool:
    if "traceless.systems" not in sys.modules:  # no system was opened: nothing native loaded
        return False
    from traceless.systems import finalization_unsafe

    return bool(finalization_unsafe())


def _end(code: str | int | None) -> None:
    if not _finalization_unsafe():
        sys.exit(code)
    if code is not None and not isinstance(code, int):
        print(code, file=sys.stderr)
        code = 1
    import atexit

    atexit._run_exitfuncs()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code or 0)
