"""What every command shares: the one exception → exit-code boundary, and common options.

No torch here: `gradscope --help` imports this.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Annotated

import typer

from gradscope.errors import ExitCode, GradscopeError, UserCodeError

DebugOpt = Annotated[
    bool,
    typer.Option(
        "--debug",
        help="Show the traceback of the user's code "
        "when it raises (gradscope's own frames hidden).",
    ),
]
OutputOpt = Annotated[
    str | None,
    typer.Option(
        "--output",
        "-o",
        metavar="FILE",
        help="Write the report to FILE (atomically) instead of stdout.",
    ),
]
FailOnOpt = Annotated[
    str | None,
    typer.Option(
        "--fail-on",
        metavar="LEVEL",
        help="Exit 1 when a finding is at or above LEVEL: info, warning, error (default) or never.",
    ),
]
ConfigOpt = Annotated[
    str | None,
    typer.Option(
        "--config",
        "-c",
        metavar="FILE",
        help="A TOML file with the keys of [tool.gradscope], used instead of pyproject.toml.",
    ),
]


def error(message: str) -> None:
    """One line on stderr, the way every code-2 failure is reported."""
    sys.stderr.write(f"gradscope: error: {message}\n")
    sys.stderr.flush()


@contextmanager
def guarded(debug: bool = False) -> Iterator[None]:
    """Map exceptions to exit codes in one place: 2 for what the user can fix, 130 for Ctrl-C."""
    try:
        yield
    except typer.Exit:
        raise
    except UserCodeError as exc:
        if debug:
            sys.stderr.write(exc.user_traceback())
        error(f"{exc}" + ("" if debug else " (rerun with --debug for the traceback)"))
        raise typer.Exit(ExitCode.ERROR) from None
    except GradscopeError as exc:
        error(str(exc))
        raise typer.Exit(exc.exit_code) from None
    except KeyboardInterrupt:
        error("interrupted")
        raise typer.Exit(ExitCode.INTERRUPTED) from None
    except BrokenPipeError:
        raise typer.Exit(ExitCode.OK) from None
