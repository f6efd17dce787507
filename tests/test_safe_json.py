"""The one JSON writer (gradscope/safe_json.py) behind both JSON outputs: the report's
document and the --log lines read as they did before it, byte for byte, on values JSON
cannot hold; what neither could write before (tensors, numpy values, paths, dataclasses,
a tuple holding NaN in a log line) is strict JSON now."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch

from gradscope.safe_json import dumps, json_safe

ODD = 'caf\u00e9 \ud800 \udfff \u2028 \U0001f600 "q" \\'
"""Accents, lone surrogates, a line separator, an astral character, a quote, a backslash."""

REPORT_BEFORE = (
    "{\n"
    '  "version": 1,\n'
    '  "odd": "caf\\u00e9 \\ud800 \\udfff \\u2028 \\ud83d\\ude00 \\"q\\" \\\\",\n'
    '  "caf\\u00e9 \\ud800 \\udfff \\u2028 \\ud83d\\ude00 \\"q\\" \\\\": [\n'
    '    "nan",\n'
    '    "inf",\n'
    '    "-inf",\n'
    "    1.5,\n"
    "    0.30000000000000004\n"
    "  ],\n"
    '  "nested": {\n'
    '    "t": [\n'
    "      1,\n"
    "      [\n"
    '        "nan",\n'
    "        [\n"
    '          "inf",\n'
    "          null\n"
    "        ]\n"
    "      ],\n"
    '      "x"\n'
    "    ],\n"
    '    "ok": true,\n'
    '    "n": null\n'
    "  },\n"
    '  "findings": [\n'
    "    {\n"
    '      "subject": "caf\\u00e9 \\ud800 \\udfff \\u2028 \\ud83d\\ude00 \\"q\\" \\\\",\n'
    '      "value": "nan",\n'
    '      "threshold": "-inf"\n'
    "    }\n"
    "  ],\n"
    '  "big": "inf",\n'
    '  "neg": -0.0,\n'
    '  "int": 100000000000000000000\n'
    "}\n"
)
"""report/json.dumps(_document()) as the writer before safe_json wrote it."""

LOG_BEFORE = (
    '{"params": ["wcaf\\u00e9 \\ud800 \\udfff \\u2028 \\ud83d\\ude00 \\"q\\" \\\\", "b"]}\n'
    ""
    '{"step": 1, "loss": "nan", "grad_norm": "inf", "lrs": [0.1, "-inf"], "note": "ca'
    'f\\u00e9 \\ud800 \\udfff \\u2028 \\ud83d\\ude00 \\"q\\" \\\\"}\n'
    '{"step": 2, "loss": 1.25, "grad_norm": 2.5, "param_norms": [null, "nan"], "x": {'
    '"y": ["inf"]}}\n'
    '{"findings": [{"step": null, "subject": "caf\\u00e9 \\ud800 \\udfff \\u2028 \\ud83d\\u'
    'de00 \\"q\\" \\\\", "value": "inf", "threshold": "nan"}]}\n'
).encode("ascii")
"""The --log file of _write_log as StepLog wrote it before safe_json."""


class _Stub:
    """A step record or finding as the log writer reads one: its dict, nothing else."""

    def __init__(self, step, **values):
        self.step, self.micro_batches, self.values = step, 1, values

    def to_dict(self):
        return {"step": self.step, **self.values}


def _document():
    return {
        "version": 1,
        "odd": ODD,
        ODD: [math.nan, math.inf, -math.inf, 1.5, 0.1 + 0.2],
        "nested": {"t": (1, (math.nan, [math.inf, None]), "x"), "ok": True, "n": None},
        "findings": [{"subject": ODD, "value": math.nan, "threshold": -math.inf}],
        "big": 1e308 * 10,
        "neg": -0.0,
        "int": 10**20,
    }


def _write_log(path, steps=None):
    from gradscope.watcher.step_log import StepLog

    log = StepLog(str(path))
    steps = steps or [
        _Stub(1, loss=math.nan, grad_norm=math.inf, lrs=[0.1, -math.inf], note=ODD),
        _Stub(2, loss=1.25, grad_norm=2.5, param_norms=[None, math.nan], x={"y": [math.inf]}),
    ]
    log.write(steps, ["w" + ODD, "b"], [])
    log.end([_Stub(None, subject=ODD, value=math.inf, threshold=math.nan)])
    return path.read_bytes()


def test_the_report_document_is_written_byte_for_byte_as_before():
    from gradscope.report.json import dumps as report_dumps

    assert report_dumps(_document()) == REPORT_BEFORE


def test_the_log_is_written_byte_for_byte_as_before(tmp_path):
    assert _write_log(tmp_path / "steps.jsonl") == LOG_BEFORE


def test_a_tuple_holding_nan_in_a_log_line_is_strict_json(tmp_path):
    # before: the log's own walk passed tuples through, and json.dumps wrote a bare NaN
    steps = [_Stub(1, pair=(math.nan, -math.inf), deep=[(1.0, (math.inf,))])]
    lines = _write_log(tmp_path / "steps.jsonl", steps).decode().splitlines()
    strict = [json.loads(line, parse_constant=_refuse) for line in lines]
    assert strict[1] == {"step": 1, "pair": ["nan", "-inf"], "deep": [[1.0, ["inf"]]]}


def _refuse(name):
    raise AssertionError(f"{name} is not JSON")


@dataclasses.dataclass
class _Point:
    where: Path
    value: float
    rest: tuple = ()


@pytest.mark.parametrize(
    ("value", "safe"),
    [
        (torch.tensor(math.nan), "nan"),
        (torch.tensor([1.0, math.inf]), [1.0, "inf"]),
        (torch.tensor(3), 3),
        (np.float32(-math.inf), "-inf"),
        (np.float64(math.nan), "nan"),
        (np.int64(7), 7),
        (np.array([[0.5, math.nan]]), [[0.5, "nan"]]),
        (np.bool_(True), True),
        (Path("runs") / "a.jsonl", str(Path("runs") / "a.jsonl")),
        (_Point(Path("x"), math.inf, (math.nan,)), {"where": "x", "value": "inf", "rest": ["nan"]}),
        ({"k": [(_Point(Path("y"), 1.0),)]}, {"k": [[{"where": "y", "value": 1.0, "rest": []}]]}),
    ],
)
def test_values_json_cannot_hold_are_written_as_strict_json(value, safe):
    assert json_safe(value) == safe
    assert json.loads(dumps({"v": value}), parse_constant=_refuse) == {"v": safe}


def test_plain_values_are_left_as_they_are():
    plain = {"s": ODD, "i": 10**20, "b": False, "n": None, "f": -0.0, "l": [1, 2.5]}
    assert json_safe(plain) == plain
    assert dumps(plain) == json.dumps(plain)
