"""gradscope: gradient diagnostics for PyTorch models and custom autograd Functions.

Importing the package is cheap; torch is imported by the functions that need it.
"""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"
__all__ = [
    "ExitCode",
    "Finding",
    "Report",
    "Severity",
    "__version__",
    "inspect",
    "inspect_script",
    "inspect_target",
    "load_settings",
    "watch",
    "watch_script",
]


def __getattr__(name: str) -> Any:
    if name in ("inspect", "inspect_target", "inspect_script", "watch", "watch_script"):
        from gradscope import api

        return getattr(api, name)
    if name in ("Finding", "Severity"):
        from gradscope import findings

        return getattr(findings, name)
    if name == "Report":
        from gradscope.inspector.results import Report

        return Report
    if name == "load_settings":
        from gradscope.config import load

        return load
    if name == "ExitCode":
        from gradscope.errors import ExitCode

        return ExitCode
    raise AttributeError(f"module 'gradscope' has no attribute {name!r}")


def __dir__() -> list[str]:
    """The lazy public names too, so `dir(gradscope)` and completion show them."""
    return sorted(set(globals()) | set(__all__))
