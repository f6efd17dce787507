"""The public Python API: everything the CLI does, callable from a test suite, with the
command's names: inspect (inspect_target, inspect_script), watch (watch_script), diff,
gradcheck, graph, check. Each is `api.<command>(target, options, settings)`: a frozen,
typed options object per command (InspectOptions, WatchOptions, GradcheckOptions,
GraphOptions, CheckOptions; keywords name its fields over it), returning the command's
result; its `outcome()` is what the CLI writes. The commands parse their strings into the
options and call one of these; `gradscope check` calls them for each configured entry.

Arguments of the wrong kind are a `GradscopeError` with one line that says what was given
and what is wanted (the CLI maps it to exit 2), never a raw AttributeError from deep
inside a pass. No torch at import: each function imports it when it runs.
"""

from __future__ import annotations

from gradscope.api.checking import check
from gradscope.api.diffing import diff
from gradscope.api.gradchecking import gradcheck
from gradscope.api.graphing import graph
from gradscope.api.inspecting import inspect, inspect_script, inspect_target
from gradscope.api.options import (
    CheckOptions,
    DiffOptions,
    GradcheckOptions,
    GraphOptions,
    InspectOptions,
    WatchOptions,
)
from gradscope.api.resolving import Resolved, resolve
from gradscope.api.watching import watch, watch_script

__all__ = [
    "CheckOptions",
    "DiffOptions",
    "GradcheckOptions",
    "GraphOptions",
    "InspectOptions",
    "Resolved",
    "WatchOptions",
    "check",
    "diff",
    "gradcheck",
    "graph",
    "inspect",
    "inspect_script",
    "inspect_target",
    "resolve",
    "watch",
    "watch_script",
]
