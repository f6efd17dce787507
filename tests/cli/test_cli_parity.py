"""The command line can grow no behaviour the API lacks: every Typer parameter of a
command is a field of its options object, its target (the API function's first
argument), or one of the few every command shares (where the report goes, the settings)."""

from __future__ import annotations

import inspect as pyinspect
from dataclasses import fields

import pytest

from gradscope import api
from gradscope.cli import check_cmd, diff_cmd, gradcheck_cmd, graph_cmd, inspect_cmd, watch_cmd

SHARED = {"ctx", "format", "output", "width", "debug", "config", "fail_on"}
"""What every command shares: where the report goes and in what shape, the settings file
and --fail-on (config.Settings), the traceback switch."""

COMMANDS = [
    # the command, its options, its target parameters, parameters that are settings
    (inspect_cmd.inspect, api.InspectOptions, {"target"}, set(inspect_cmd.THRESHOLD_FLAGS)),
    (watch_cmd.watch, api.WatchOptions, {"script"}, {"threshold"}),
    (graph_cmd.graph, api.GraphOptions, {"target"}, set()),
    (check_cmd.check, api.CheckOptions, set(), set()),
    (gradcheck_cmd.gradcheck, api.GradcheckOptions, {"specs"}, set()),
    (diff_cmd.diff, api.DiffOptions, {"ref", "new"}, set()),
]

READ_INTO = {"name_map": "names"}
"""A flag whose value the command reads into a field of another name (a file of names)."""


@pytest.mark.parametrize("command, options, targets, settings", COMMANDS)
def test_every_typer_parameter_is_a_field_of_the_commands_options(
    command, options, targets, settings
):
    names = {f.name for f in fields(options)}
    parameters = set(pyinspect.signature(command).parameters)
    missing = {
        p for p in parameters - SHARED - targets - settings if READ_INTO.get(p, p) not in names
    }
    assert not missing, f"{command.__name__}: {sorted(missing)} reach no {options.__name__}"


def test_the_settings_flags_are_thresholds():
    """The flags read into settings, not options, are threshold keys (config.Thresholds)."""
    from gradscope.config import Thresholds

    keys = set(Thresholds.keys())
    assert {flag.replace("_", "-") for flag in inspect_cmd.THRESHOLD_FLAGS} <= keys
