"""Nothing lost quietly: one output that cannot be written (a full volume, a folder gone)
loses no other, and stderr names each that was not; a report on a stdout that cannot
encode it (ASCII only) is written in ASCII, in each format's own escapes."""

from __future__ import annotations

import json
import shutil
import xml.etree.ElementTree as ET
from dataclasses import replace

import pytest
import torch
from torch import nn

from gradscope.api import inspect
from gradscope.cli import app
from gradscope.errors import ExitCode
from gradscope.findings import RULES
from gradscope.outcome import CheckReport, Outcome
from gradscope.report.ascii_text import for_encoding
from gradscope.report.outputs import Destination, Format, Plan, deliver
from gradscope.report.write import NotWritten

FULL = "/dev/full"  # every write: ENOSPC, a full volume


class Unused(nn.Module):
    """A head forward never calls: a GS101 finding, and a terminal report to show."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(2, 1)
        self.head_ü = nn.Linear(1, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(x)


def _outcome(**kw) -> Outcome:
    torch.manual_seed(0)
    report = inspect(Unused(), torch.ones(3, 2), label="model · ü")
    return replace(report.outcome(), **kw)


def _plan(tmp_path, first: str) -> Plan:
    gone = tmp_path / "gone"
    gone.mkdir()
    plan = Plan(
        (
            Destination(Format.json, first),
            Destination(Format.markdown, str(tmp_path / "r.md")),
            Destination(Format.junit, str(gone / "r.xml")),
            Destination(Format.json, str(tmp_path / "r.json")),
            Destination(Format.terminal, None),
        )
    )
    shutil.rmtree(gone)  # the folder the script removed
    return plan


@pytest.mark.parametrize(
    ("kw", "code"),
    [
        ({}, ExitCode.ERROR),  # a finding (exit 1) and an output lost: 2
        ({"stopped_by": ExitCode.INTERRUPTED}, ExitCode.INTERRUPTED),  # a worse code stays
        ({"could_not_run": "the script crashed"}, ExitCode.ERROR),
    ],
)
def test_an_output_that_cannot_be_written_loses_no_other(tmp_path, capsys, kw, code):
    plan = _plan(tmp_path, FULL)
    with pytest.raises(NotWritten) as raised:
        deliver(plan, _outcome(**kw), RULES["GS101"].severity)  # GS101: exit 1
    assert raised.value.exit_code == code
    assert len(raised.value.lines) == 2
    assert raised.value.lines[0] == f"cannot write {FULL}: No space left on device"
    assert "gone/r.xml: folder" in raised.value.lines[1]
    assert "model · ü" in (tmp_path / "r.md").read_text()
    assert json.loads((tmp_path / "r.json").read_text())["label"] == "model · ü"
    assert "head_ü" in capsys.readouterr().out  # stdout, written last, still written


def test_the_cli_names_each_lost_output_on_its_own_line_and_writes_the_rest(runner, tmp_path):
    out = tmp_path / "r.json"
    done = runner.invoke(
        app, ["inspect", "healthy-mlp", "-o", FULL, "-o", str(out), "-o", FULL, "-o", "-"]
    )
    assert done.exit_code == 2, done.output
    assert (
        done.stderr.splitlines()
        == [f"gradscope: error: cannot write {FULL}: No space left on device"] * 2
    )
    assert json.loads(out.read_text())["kind"] == "inspect"
    assert "healthy-mlp" in done.stdout or "MLP" in done.stdout


REMOVES_ITS_OUTPUT_FOLDER = """
import shutil
import torch
from torch import nn
model = nn.Linear(2, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for _ in range(2):
    model(torch.ones(4, 2)).pow(2).mean().backward()
    opt.step()
    opt.zero_grad()
shutil.rmtree("out")
"""


def test_watch_writes_every_output_but_the_one_whose_folder_the_script_removed(
    runner, tmp_path, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "out").mkdir()
    (tmp_path / "train.py").write_text(REMOVES_ITS_OUTPUT_FOLDER)
    done = runner.invoke(app, ["watch", "train.py", "-o", "out/r.json", "-o", "r.md", "-o", "-"])
    assert done.exit_code == 2, done.output
    [line] = done.stderr.strip().splitlines()[-1:]
    assert line.startswith(f"gradscope: error: cannot write {tmp_path / 'out' / 'r.json'}")
    assert "train.py" in (tmp_path / "r.md").read_text()
    assert "2 optimizer steps" in done.stdout


def test_watch_still_says_how_the_run_ended_when_an_output_is_lost(runner, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "out").mkdir()
    crashes = REMOVES_ITS_OUTPUT_FOLDER + "raise RuntimeError('after the loop')\n"
    (tmp_path / "train.py").write_text(crashes)
    done = runner.invoke(app, ["watch", "train.py", "-o", "out/r.json", "-o", "r.md"])
    assert done.exit_code == 2, done.output
    lines = done.stderr.strip().splitlines()
    ended = [i for i, line in enumerate(lines) if "RuntimeError: after the loop" in line]
    lost = [i for i, line in enumerate(lines) if "cannot write" in line]
    assert ended and lost and ended[-1] < lost[0], lines  # how it ended, then what was lost
    assert "after 2 optimizer steps" in lines[ended[-1]]
    assert "train.py" in (tmp_path / "r.md").read_text()


def test_ascii_text_keeps_utf8_as_it_is_and_falls_back_only_where_it_must():
    text = "loss 0.3 → 0.2 · x² ≈ 1 ┃━┏┓ ▁▄█ name_ü"
    assert for_encoding(text, "utf-8") == text
    plain = for_encoding(text, "ascii")
    assert plain == "loss 0.3 -> 0.2 - x^2 ~ 1 |-++ _:# name_\\xfc"
    assert for_encoding("lone \udc80", "utf-8") == "lone \\udc80"
    assert for_encoding("x", "no-such-codec") == "x"


def test_ascii_text_escapes_json_and_xml_their_own_way():
    doc = json.dumps({"label": "model · ü 😀"}, ensure_ascii=False)
    escaped = for_encoding(doc, "ascii", "json")
    assert escaped.isascii() and json.loads(escaped) == {"label": "model · ü 😀"}
    xml = '<?xml version="1.0" encoding="utf-8"?><t name="a · ü">b → c</t>'
    parsed = ET.fromstring(for_encoding(xml, "ascii", "xml").encode())
    assert parsed.get("name") == "a · ü" and parsed.text == "b → c"


def test_every_format_on_an_ascii_stdout(tmp_path, monkeypatch, capsysbinary):
    import io
    import sys

    for fmt in Format:
        stream = io.TextIOWrapper(io.BytesIO(), encoding="ascii", errors="strict")
        monkeypatch.setattr(sys, "stdout", stream)
        deliver(Plan((Destination(fmt, None),)), _outcome(), None)
        stream.flush()
        text = stream.buffer.getvalue().decode("ascii")  # type: ignore[attr-defined]
        if fmt is Format.json:
            assert json.loads(text)["label"] == "model · ü"
        elif fmt is Format.junit:
            assert "model · ü" in ET.tostring(ET.fromstring(text.encode()), "unicode")
        else:
            assert "head_" in text and "model - \\xfc" in text


def test_report_of_a_check_on_an_ascii_stdout_is_written(monkeypatch):
    import io
    import sys

    stream = io.TextIOWrapper(io.BytesIO(), encoding="ascii", errors="strict")
    monkeypatch.setattr(sys, "stdout", stream)
    deliver(Plan((Destination(Format.terminal, None),)), CheckReport([_outcome()], None), None)
    stream.flush()
    assert "model - \\xfc" in stream.buffer.getvalue().decode("ascii")  # type: ignore[attr-defined]
