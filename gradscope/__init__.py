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


# Every rule is declared with `@rule` on the function that makes its findings
# (gradscope/rules/registry.py): loading the modules that declare them here puts every
# family in findings.RULES wherever it is read (settings, docs, reports). None of them
# imports torch.
from gradscope.diff import findings as _diff_rules  # noqa: E402
from gradscope.diff.runs import findings as _runs_diff_rules  # noqa: E402
from gradscope.distributed import findings as _distributed_rules  # noqa: E402
from gradscope.gate import baseline as _baseline_rule  # noqa: E402
from gradscope.gradcheck import findings as _gradcheck_rules  # noqa: E402
from gradscope.rules import watch as _watch_rules  # noqa: E402  per-run and watch rules

del (
    _watch_rules,
    _baseline_rule,
    _gradcheck_rules,
    _distributed_rules,
    _diff_rules,
    _runs_diff_rules,
)
