"""What `gradscope watch` adds to a run, from Python: `api.watch_script` and the
`api.watch` context take `against` (a reference run's --log), `plot` and `tensorboard`."""

from __future__ import annotations

import os
import textwrap

import pytest
import torch
from torch import nn

from gradscope import api
from gradscope.errors import GradscopeError

SCRIPT = textwrap.dedent("""
    import sys
    import torch
    from torch import nn

    lr = float(sys.argv[1]) if len(sys.argv) > 1 else 0.01
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    data = [torch.randn(8, 4) for _ in range(12)]
    for x in data:
        loss = model(x).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
""")

PNG = b"\x89PNG\r\n\x1a\n"


@pytest.fixture
def script(tmp_path):
    path = tmp_path / "train.py"
    path.write_text(SCRIPT)
    return str(path)


def test_watch_script_compares_with_a_reference_and_draws_the_run(script, tmp_path):
    ref = tmp_path / "ref.jsonl"
    api.watch_script(script, log=str(ref))
    plot = tmp_path / "run.png"
    report = api.watch_script(script, ["0.5"], against=str(ref), plot=str(plot))
    assert report.judged and "GS607" in {f.rule for f in report.findings}
    assert plot.read_bytes()[:8] == PNG
    assert report.outcome().to_dict()["label"] == f"script {script}"


def test_watch_script_against_the_same_run_finds_no_divergence(script, tmp_path):
    ref = tmp_path / "ref.jsonl"
    api.watch_script(script, log=str(ref))
    report = api.watch_script(script, against=str(ref))
    assert report.judged and not {"GS607", "GS608"} & {f.rule for f in report.findings}


def test_watch_script_writes_tensorboard_events(script, tmp_path):
    pytest.importorskip("tensorboard")
    events = tmp_path / "events"
    api.watch_script(script, tensorboard=str(events))
    assert any(name.startswith("events.out.tfevents") for name in os.listdir(events))


def test_the_watch_context_draws_its_plot_when_it_ends(tmp_path):
    plot = tmp_path / "ctx.svg"
    torch.manual_seed(0)
    model = nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    with api.watch(plot=str(plot)) as w:
        for _ in range(6):
            loss = model(torch.randn(8, 4)).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
    assert w.report is not None and w.report.judged
    assert plot.read_text().lstrip().startswith("<?xml")


def test_a_plot_that_names_no_picture_is_refused_before_the_script_runs(script, tmp_path):
    with pytest.raises(GradscopeError, match=r"give a \.png, \.svg or \.pdf"):
        api.watch_script(script, plot=str(tmp_path / "run.txt"))
