"""The command line: parse options, call the library, pick a reporter, set the exit code.

Importing this module must stay cheap (no torch): `gradscope --help` and
`--version` run it.
"""

from __future__ import annotations

import sys
import warnings
from typing import Annotated, Any

import typer

from gradscope import __version__
from gradscope.cli import (
    check_cmd,
    diff_cmd,
    gradcheck_cmd,
    graph_cmd,
    inspect_cmd,
    listing,
    watch_cmd,
)
from gradscope.cli import common as clikit
from gradscope.cli.typer_lazy import defer_value_checks
from gradscope.errors import ExitCode


def _no_type(self: Any, ctx: Any) -> str:
    return ""


def _usage_name(self: Any) -> str:
    name = self.metavar or self.name.upper()
    return (name if self.required else f"[{name}]") + ("..." if self.nargs != 1 else "")


def _one_vocabulary() -> None:
    """Help speaks one language across commands: NAME for a required argument, [NAME] for
    an optional one, no Python types ("TARGET <str>"). Typer 0.29 prints {NAME} and types;
    these two hooks exist there and are harmless elsewhere."""
    argument = typer.core.TyperArgument
    argument.display_type = _no_type  # type: ignore[method-assign]
    argument._usage_display_name = _usage_name  # type: ignore[method-assign]


_one_vocabulary()
defer_value_checks()
app = typer.Typer(
    name="gradscope",
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"]},
    help="Gradient diagnostics for PyTorch: None grads, NaN/Inf, exploding and vanishing "
    "gradients, custom autograd Functions, autograd graphs.\n\n"
    "Exit codes: 0 nothing at or above --fail-on, 1 findings at or above it, "
    "2 gradscope could not run (bad target or config, the user's code raised or called "
    "sys.exit), 3 gradscope itself failed (a bug: please report it), 130 interrupted.",
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"gradscope {__version__}")
        raise typer.Exit()


@app.callback()
def root(
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_version, is_eager=True, help="Print the version and exit."
        ),
    ] = False,
) -> None:
    """Gradient diagnostics for PyTorch."""


app.command("inspect", help=inspect_cmd.HELP, **inspect_cmd.SETTINGS)(inspect_cmd.inspect)
app.command("check", help=check_cmd.HELP)(check_cmd.check)
app.command("gradcheck", help=gradcheck_cmd.HELP)(gradcheck_cmd.gradcheck)
app.command("graph", help=graph_cmd.HELP)(graph_cmd.graph)
app.command("examples")(listing.examples)
app.command("rules")(listing.rules)
app.command("watch", help=watch_cmd.HELP, context_settings={"allow_extra_args": True})(
    watch_cmd.watch
)
app.command("diff", help=diff_cmd.HELP)(diff_cmd.diff)


def main() -> None:
    # torch warns on import when numpy is absent; it says nothing about the user's model
    warnings.filterwarnings("ignore", message="Failed to initialize NumPy")
    try:
        app()
    except SystemExit:
        raise
    except KeyboardInterrupt:
        clikit.error("interrupted")
        sys.exit(ExitCode.INTERRUPTED)
    except BaseException as exc:  # the last resort: whatever escaped every command's boundary
        clikit.report_internal_error(exc, debug="--debug" in sys.argv)
        sys.exit(ExitCode.INTERNAL)


if __name__ == "__main__":  # pragma: no cover
    main()
