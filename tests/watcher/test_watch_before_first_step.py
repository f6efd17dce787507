"""A run that fails or is interrupted before its first step still writes the report named
by -o, marked partial, as it does after step 1; what could not be drawn is said."""

from __future__ import annotations

import json

import pytest
from watch_scripts import gradscope

SIGINT_AT_START = """
import os, signal, time
print("loading data", flush=True)
os.kill(os.getpid(), signal.SIGINT)   # Ctrl-C while the data loads
time.sleep(5)
"""


@pytest.mark.slow
def test_syntax_error_with_plot_writes_the_o_report_and_says_the_plot_was_not(tmp_path):
    (tmp_path / "train.py").write_text("import torch\ndef step(:\n    pass\n")
    done = gradscope("watch", "train.py", "--plot", "p.png", "-o", "r.json", cwd=str(tmp_path))
    assert done.returncode == 2 and done.stdout == ""
    summary = json.loads((tmp_path / "r.json").read_text())["summary"]
    assert summary["status"] == "crashed" and summary["partial"] is True
    assert summary["verdict"] == "not judged" and summary["where"] == "train.py:2"
    assert "--plot p.png: not drawn, no step was recorded" in done.stderr
    assert not (tmp_path / "p.png").exists()


@pytest.mark.slow
def test_ctrl_c_before_the_first_step_writes_the_o_reports(tmp_path):
    (tmp_path / "train.py").write_text(SIGINT_AT_START)
    args = ("watch", "train.py", "-o", "report.json", "-o", "report.txt")
    done = gradscope(*args, cwd=str(tmp_path))
    assert done.returncode == 130
    assert done.stdout == "loading data\n"  # the script's own; no empty report on stdout
    summary = json.loads((tmp_path / "report.json").read_text())["summary"]
    assert summary["status"] == "interrupted" and summary["partial"] is True
    assert summary["nothing_judged"] == (
        "nothing was judged: the run was interrupted before its first optimizer step"
    )
    text = (tmp_path / "report.txt").read_text()  # the terminal report, to the file named
    assert "partial" in text and "verdict: NOT JUDGED" in text
    assert done.stderr.rstrip().endswith("gradscope: error: interrupted after 0 optimizer steps")
