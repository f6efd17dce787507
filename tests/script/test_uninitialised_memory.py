"""Memory `torch.empty` and its kin leave uninitialised holds no value: neither the live watch
of a script's step nor the replay of `inspect` names its allocation as the op that made NaN.

`nan_filled_empty` (conftest.py) makes every such allocation NaN, so what a run would meet
by chance, it meets every time.
"""

from __future__ import annotations

import pytest
import torch
from torch import nn

from gradscope.api import inspect
from gradscope.inspector import script


@pytest.fixture
def here(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    return tmp_path


STEP = """
import torch
from torch import nn
torch.manual_seed(0)
model = nn.Linear(4, 4)
x = torch.randn(8, 4)
h = model(x)
{body}
loss.backward()
"""

WRITTEN = {
    "empty": "buf = torch.empty(8, 4)\nbuf.copy_(h)",
    "empty_like": "buf = torch.empty_like(h)\ntorch.mul(h.detach(), 1.0, out=buf)",
    "empty_strided": "buf = torch.empty_strided((8, 4), (4, 1))\nbuf.copy_(h)",
    "new_empty": "buf = h.new_empty(8, 4)\nbuf.copy_(h)",
    "new_empty_strided": "buf = h.new_empty_strided((8, 4), (4, 1))\nbuf.copy_(h)",
    "empty_permuted": "buf = torch.empty_permuted((8, 4), (1, 0))\nbuf.copy_(h)",
    "new": "buf = h.detach().new(8, 4)\nbuf.copy_(h)",
    "resize_": "buf = torch.zeros(2)\nbuf.resize_(8, 4)\nbuf.copy_(h)",
    "rows written one by one": (
        "buf = torch.empty(8, 4)\nfor i in range(8):\n    buf[i].copy_(h[i])"
    ),
    "filled, then added to": "buf = torch.empty(8, 4)\nbuf.zero_()\nbuf.add_(h)",
}


@pytest.mark.parametrize("case", list(WRITTEN))
def test_a_healthy_step_that_writes_empty_memory_before_reading_it_has_no_producer(
    here, nan_filled_empty, case
):
    body = WRITTEN[case] + "\nloss = buf.pow(2).mean() + h.sum() * 0"
    (here / "step.py").write_text(STEP.format(body=body))
    inspected = script.run_step("step.py", explain=True)
    assert inspected.stats.loss_finite and inspected.evidence == {}


@pytest.mark.parametrize("case", list(WRITTEN))
def test_the_producer_is_the_op_that_made_nan_not_the_allocation(here, nan_filled_empty, case):
    body = WRITTEN[case] + "\nloss = (buf - 100).log().mean() + h.sum() * 0  # LOG"
    (here / "step.py").write_text(STEP.format(body=body))
    line = next(i for i, t in enumerate(STEP.format(body=body).splitlines(), 1) if "# LOG" in t)
    inspected = script.run_step("step.py", explain=True)
    assert not inspected.stats.loss_finite
    (said,) = inspected.evidence["non-finite"]
    made = f"first non-finite value made by `log` at step.py:{line} from finite inputs"
    assert said.startswith(made + ", some of them below its domain (negative)")  # buf - 100


def test_memory_read_before_it_is_written_is_named_as_such(here, nan_filled_empty):
    body = "buf = torch.empty(8, 4)  # EMPTY\nloss = (h + buf).mean()  # READ"
    text = STEP.format(body=body)
    (here / "step.py").write_text(text)
    lines = {
        tag: i for i, t in enumerate(text.splitlines(), 1) for tag in ("EMPTY", "READ") if tag in t
    }
    [said] = script.run_step("step.py", explain=True).evidence["non-finite"]
    assert "made by" not in said
    assert f"`add` at step.py:{lines['READ']} read them from memory" in said
    assert f"`empty` at step.py:{lines['EMPTY']} left uninitialised" in said


class Buffered(nn.Module):
    """A forward that fills a buffer it allocated with torch.empty, then takes a log."""

    def __init__(self, shift: float) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.shift = shift

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.lin(x)
        out = torch.empty_like(h)
        torch.add(h.detach(), self.shift, out=out)
        rows = h.new_empty(h.shape)
        for i in range(h.shape[0]):
            rows[i].copy_(out[i])
        return rows.log() + h


def test_inspect_names_the_log_not_the_empty_buffers(nan_filled_empty):
    torch.manual_seed(0)
    report = inspect(Buffered(shift=-100.0), torch.randn(8, 4))
    said = [e for f in report.findings for e in f.evidence if "non-finite value" in e]
    assert said and all("made by `log`" in e for e in said), said


def test_inspect_of_a_healthy_buffered_forward_finds_nothing(nan_filled_empty):
    torch.manual_seed(0)
    report = inspect(Buffered(shift=100.0), torch.randn(8, 4))
    assert report.stats.loss_finite
    assert not [f for f in report.findings if "non-finite" in f.slug]
