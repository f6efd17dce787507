"""What every command shares: the one exception → exit-code boundary, and common options.

No torch here: `gradscope --help` imports this.
"""

from __future__ import annotations

import sys
import traceback
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import fields
from typing import Annotated, Any, NoReturn, TypeVar

import typer

from gradscope.errors import ExitCode, GradscopeError, UserCodeError, guard_os_exit
from gradscope.fmt import printable
from gradscope.report.outputs import Format
from gradscope.report.write import LEDGER, NotWritten
from gradscope.stdio import standard_streams
from gradscope.stdio import user_stdout_to_stderr as user_stdout_to_stderr

T = TypeVar("T")

DebugOpt = Annotated[
    bool,
    typer.Option(
        "--debug",
        help="Show the traceback of the user's code "
        "when it raises (gradscope's own frames hidden).",
    ),
]
OutputOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--output",
        "-o",
        metavar="FILE",
        help="Write the report to FILE (atomically) instead of stdout, in the format its "
        "extension names (.json, .xml JUnit, .md markdown; else --format). Repeatable: one "
        "run writes several reports; -o - keeps the report on stdout too.",
    ),
]
FailOnOpt = Annotated[
    str | None,
    typer.Option(
        "--fail-on",
        metavar="LEVEL",
        show_default="error, or the config's fail-on",
        help="Exit 1 when a finding is at or above LEVEL: info, warning, error or never.",
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

FormatOpt = Annotated[
    Format | None,
    typer.Option(
        "--format",
        "-f",
        show_default="terminal, or the -o file's extension",
        help="terminal (rich), json (versioned schema), junit (XML for CI "
        "dashboards) or markdown (job summaries).",
    ),
]
WidthOpt = Annotated[
    int | None,
    typer.Option(
        "--width",
        metavar="COLS",
        min=40,
        help="Terminal report width (default: the terminal's).",
    ),
]


def options_from(cls: type[T], params: Mapping[str, Any], **read: Any) -> T:
    """The command's options object from its parameters of the same names (its fields:
    tests/cli/test_cli_parity.py); `read`: the fields the command parsed from strings."""
    values = {**params, **read}
    return cls(**{f.name: values[f.name] for f in fields(cls) if f.name in values})  # type: ignore[arg-type]


def note(message: str) -> None:
    """One informational line on stderr (progress in CI, what was written where); the
    user's text in it is shown as it is, control characters made visible."""
    sys.stderr.write(f"gradscope: {printable(message)}\n")
    sys.stderr.flush()


def error(message: str) -> None:
    """One line on stderr, the way every code-2 failure is reported."""
    sys.stderr.write(f"gradscope: error: {printable(message)}\n")
    sys.stderr.flush()


REPORT_BUG = "this is a bug in gradscope; please report it with the output of --debug"


@contextmanager
def guarded(debug: bool = False) -> Iterator[None]:
    """Map exceptions to exit codes in one place.

    2: what the user can fix, including their code raising or calling sys.exit or os._exit
    (our code wraps what it calls in UserCodeError; a SystemExit or other BaseException
    that still arrives here can only come from the user's code). 130: Ctrl-C. 3: anything
    else is a bug in gradscope.
    """
    standard_streams()
    LEDGER.reset()
    try:
        with guard_os_exit():
            yield
    except typer.Exit:
        raise
    except UserCodeError as exc:
        _user_code_failed(exc, debug)
    except NotWritten as exc:  # the outputs that could be written were
        for line in exc.lines:
            error(line)
        raise typer.Exit(exc.exit_code) from None
    except GradscopeError as exc:
        error(str(exc))
        raise typer.Exit(exc.exit_code) from None
    except KeyboardInterrupt:
        error("interrupted" + _not_written())
        raise typer.Exit(ExitCode.INTERRUPTED) from None
    except BrokenPipeError:
        raise typer.Exit(ExitCode.OK) from None
    except Exception as exc:
        internal_error(exc, debug)
    except BaseException as exc:  # SystemExit and friends, raised by the user's code
        _user_code_failed(UserCodeError("your code", exc), debug)


def _not_written() -> str:
    """The -o files a Ctrl-C came before (during start-up: no run, so no report yet)."""
    missing = LEDGER.missing()
    if not missing:
        return ""
    return f" before there was a report: {', '.join(missing)} not written"


def _user_code_failed(exc: UserCodeError, debug: bool) -> NoReturn:
    if debug:
        sys.stderr.write(exc.user_traceback())
    error(f"{exc}" + ("" if debug else " (rerun with --debug for the traceback)"))
    raise typer.Exit(ExitCode.ERROR) from None


def internal_error(exc: BaseException, debug: bool) -> NoReturn:
    report_internal_error(exc, debug)
    raise typer.Exit(ExitCode.INTERNAL) from None


def report_internal_error(exc: BaseException, debug: bool) -> None:
    """One line that asks for a report; the full traceback under --debug."""
    if debug:
        sys.stderr.write("".join(traceback.format_exception(type(exc), exc, exc.__traceback__)))
    first = (str(exc).strip().splitlines() or [""])[0]
    error(f"internal error: {type(exc).__name__}: {first} ({REPORT_BUG})")
