"""The ``traceless`` command line. Every command has ``--help``.

Errors traceless raises on purpose print one line (``error: ...`` with the fix) and exit
with the error class's code; nothing is half-written.
"""

from __future__ import annotations

import sys

import typer

from traceless._version import __version__
from traceless.cli._audit import audit_cmd
from traceless.cli._forget import forget_app
from traceless.cli._keys import keys_app
from traceless.cli._memory import memory_app
from traceless.errors import TracelessError

__all__ = ["app", "main"]

app = typer.Typer(
    name="traceless",
    help="Agent memory that can prove it forgot: tiered memory with lineage, verifiable forget "
    "modes, leakage audits and selective-replay unlearning. Runs offline.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
app.command("audit")(audit_cmd)
app.add_typer(memory_app, name="memory")
app.add_typer(forget_app, name="forget")
app.add_typer(keys_app, name="keys")


def _mount_optional() -> None:
    # Sub-apps that live in their own modules (models catalog, studies, reports).
    try:
        from traceless.cli._models import models_app
    except ImportError:  # pragma: no cover - module always shipped; defensive for partial installs
        pass
    else:
        app.add_typer(models_app, name="models", help="List and install the embedded offline models.")
    try:
        from traceless.cli._study import report_cmd, study_app
    except ImportError:  # pragma: no cover
        pass
    else:
        from traceless.cli._train import train_auditor_cmd

        study_app.command("train-auditor")(train_auditor_cmd)
        app.add_typer(study_app, name="study", help="Run the papers' studies (resumable).")
        app.command("report")(report_cmd)


_mount_optional()


@app.callback(invoke_without_command=True)
def _root(
    version: bool = typer.Option(False, "--version", help="Print the version and exit."),
) -> None:
    if version:
        typer.echo(f"traceless {__version__}")
        raise typer.Exit(0)


def main(argv: list[str] | None = None) -> None:
    """Console entry point."""
    try:
        app(args=argv, standalone_mode=False)
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
