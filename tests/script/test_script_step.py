"""`inspect --script --step N`: the backward of optimizer step N, numbered as watch numbers it."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from gradscope.cli import app
from gradscope.errors import TargetError
from gradscope.inspector import script

SCRIPTS = Path(__file__).parent / "scripts"
LOG_LINE = next(
    i
    for i, line in enumerate((SCRIPTS / "nan_at_step3.py").read_text().splitlines(), 1)
    if "# LOG:" in line
)


@pytest.fixture
def here(tmp_path, monkeypatch):
    for name in ("nan_at_step3.py", "accumulate.py"):
        shutil.copy(SCRIPTS / name, tmp_path / name)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _losses(here: Path) -> list[float]:
    return [float(line.split()[0]) for line in (here / "losses.log").read_text().splitlines()]


def test_step_3_finds_the_nan_and_names_the_op_and_line(runner, here):
    result = runner.invoke(app, ["inspect", "--script", "nan_at_step3.py", "--step", "3"])
    assert result.exit_code == 1, result.output
    out = " ".join(result.stdout.split())
    assert "the first backward() of optimizer step 3 of nan_at_step3.py" in out
    assert "GS102" in out and "is nan" in out
    assert f"first non-finite value made by `log` at nan_at_step3.py:{LOG_LINE}" in out
    assert len(_losses(here)) == 3  # steps 1 and 2 ran, step 3's forward, then the stop
    # the table row that fits a log of zero: in the JSON (the terminal report leaves it out)
    result = runner.invoke(
        app, ["inspect", "--script", "nan_at_step3.py", "--step", "3", "-f", "json"]
    )
    gs102 = next(f for f in json.loads(result.stdout)["findings"] if f["rule"] == "GS102")
    assert "an op applied outside its domain" in gs102["table_row"]["cause"]


def test_the_python_api_reaches_the_same_step_with_the_same_evidence(here):
    import gradscope

    report = gradscope.inspect_script("nan_at_step3.py", step=3)
    (f,) = [f for f in report.findings if f.rule == "GS102"]
    assert f"made by `log` at nan_at_step3.py:{LOG_LINE} from finite inputs" in f.evidence[0]
    assert not [f for f in gradscope.inspect_script("nan_at_step3.py", step=1).findings]


def test_step_1_is_clean(runner, here):
    result = runner.invoke(app, ["inspect", "--script", "nan_at_step3.py", "--step", "1"])
    assert result.exit_code == 0, result.output
    assert "No findings" in result.stdout
    assert len(_losses(here)) == 1


def test_the_step_numbers_agree_with_watch(here):
    from gradscope.watcher import watch_script

    report = watch_script("nan_at_step3.py", ["1"])
    (gs401,) = [f for f in report.findings if f.rule == "GS401"]
    assert gs401.value == 3.0
    (here / "losses.log").unlink()
    watched = script.run_step("nan_at_step3.py", ["1"], step=int(gs401.value))
    assert not watched.stats.loss_finite
    assert script.run_step("nan_at_step3.py", ["1"], step=2).stats.loss_finite
    found = script.run_step("nan_at_step3.py", ["1"], step="first-nonfinite", explain=True)
    assert found.stats.loss_source.startswith(
        "the first backward() of optimizer step 3 of nan_at_step3.py"
    )
    assert "the first step whose loss is non-finite" in found.stats.loss_source
    assert found.evidence["non-finite"] == [
        f"first non-finite value made by `log` at nan_at_step3.py:{LOG_LINE} from finite inputs"
    ]


def test_accumulation_stops_at_the_first_backward_of_the_step(here):
    """Two backward() per step, a GradScaler whose first step it skips (a step all the same)."""
    from gradscope.watcher import watch_script

    steps = watch_script("accumulate.py").run.steps
    assert [(s.step, bool(s.skipped), s.backward_calls) for s in steps[:2]] == [
        (1, True, 2),
        (2, False, 2),
    ]
    (here / "events.log").unlink()
    inspected = script.run_step("accumulate.py", step=2)
    events = (here / "events.log").read_text().splitlines()
    assert [e.split()[0] for e in events] == ["backward", "backward", "step", "backward"]
    assert events[-1].startswith("backward 2 ")
    assert inspected.stats.loss_value == pytest.approx(float(events[-1].split()[2]))
    assert "optimizer step 2 of accumulate.py" in inspected.stats.loss_source
    assert "no optimizer step ran" not in inspected.stats.loss_source  # it simply stopped


def test_a_script_that_ends_before_the_step_is_one_line_exit_2(runner, here):
    result = runner.invoke(
        app, ["inspect", "--script", "nan_at_step3.py", "--step", "9", "--", "2"]
    )
    assert result.exit_code == 2
    (line,) = result.stderr.strip().splitlines()
    assert line.endswith(
        "nan_at_step3.py: the script made only 8 optimizer steps; there is no step 9 to inspect"
    )


@pytest.mark.parametrize("step", ["0", "-2", "three", "1.5"])
def test_a_step_below_1_is_one_line_exit_2(runner, here, step):
    result = runner.invoke(app, ["inspect", "--script", "nan_at_step3.py", f"--step={step}"])
    assert result.exit_code == 2, result.output
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert "give an optimizer step number >= 1" in result.stderr
    assert not (here / "losses.log").exists()  # refused before the script ran


def test_step_is_for_scripts_only(runner, here):
    result = runner.invoke(app, ["inspect", "healthy-mlp", "--step", "2"])
    assert result.exit_code == 2
    assert "--step is for a training script" in result.stderr


def test_first_nonfinite_on_a_finite_script_is_one_line_exit_2(runner, here):
    command = ["inspect", "--script", "accumulate.py", "--step", "first-nonfinite"]
    result = runner.invoke(app, command)
    assert result.exit_code == 2, result.output
    assert "stayed finite over all 6 optimizer steps" in result.stderr


def test_the_command_form_the_advice_gives_works(here):
    """`gradscope inspect --script SCRIPT --step N -- ARGS`, as a user types it."""
    command = "inspect --script nan_at_step3.py --step 3 --format json -- 1".split()
    proc = subprocess.run(
        [sys.executable, "-m", "gradscope", *command],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 1, proc.stderr
    import json

    doc = json.loads(proc.stdout)
    assert "optimizer step 3" in doc["summary"]["loss_source"]
    gs102 = next(f for f in doc["findings"] if f["rule"] == "GS102")
    assert any("`log` at nan_at_step3.py" in e for e in gs102["evidence"])
    assert "Exception ignored" not in proc.stderr


# --- the live explanation of the inspected step ------------------------------------------------

SQRT_AT_ZERO = """
import torch
from torch import nn
torch.manual_seed(0)
model = nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x = torch.randn(8, 4)
for step in range(3):
    out = model(x)
    loss = torch.sqrt(out.pow(2) * 0).sum() + out.mean()  # finite; its backward is not
    loss.backward()
    opt.step()
"""

CUT = """
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc, self.head = nn.Linear(4, 8), nn.Linear(8, 1)

    def forward(self, x):
        h = self.enc(x)
        return self.head(h.detach())


torch.manual_seed(0)
model = Net()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(3):
    with torch.no_grad():
        reference = model.enc(torch.randn(8, 4))  # a cut too, but not of this loss
    loss = model(torch.randn(8, 4)).pow(2).mean()
    loss.backward()
    opt.step()
"""


def test_a_nan_made_by_the_backward_names_its_node_and_forward_line(runner, here):
    (here / "sqrt0.py").write_text(SQRT_AT_ZERO)
    first = script.run_step("sqrt0.py", step=1, explain=True)
    (said,) = first.evidence["non-finite"]
    assert said.startswith(
        "the forward is finite; the backward of `sqrt` at sqrt0.py:10 (SqrtBackward0) made the "
        "first non-finite gradient from finite ones"
    )
    assert "its local derivative is infinite there" in said
    # step 1 wrote NaN into the weights: step 2's forward did not make it, and says so
    (second,) = script.run_step("sqrt0.py", step=2, explain=True).evidence["non-finite"]
    assert "the weights already held them (weight, bias)" in second
    found = script.run_step("sqrt0.py", step="first-nonfinite", explain=True)
    assert "step 1 of sqrt0.py" in found.stats.loss_source
    assert "the first step whose gradients are non-finite" in found.stats.loss_source
    # the CLI's default (the first backward) explains too; --no-explain does not watch
    result = runner.invoke(app, ["inspect", "--script", "sqrt0.py"])
    assert result.exit_code == 1 and "(SqrtBackward0) made the first non-finite" in " ".join(
        result.stdout.split()
    )
    result = runner.invoke(app, ["inspect", "--script", "sqrt0.py", "--no-explain"])
    assert result.exit_code == 1 and "SqrtBackward0" not in result.stdout


WATCH_SCRIPTS = Path(__file__).resolve().parent.parent / "watcher" / "scripts"


@pytest.mark.parametrize(
    ("kind", "op", "line", "masked"),
    [
        ("sqrt", "`sqrt`", "SqrtBackward0", False),
        ("acos", "`acos`", "AcosBackward0", False),
        ("log", "`log`", "LogBackward0", True),
        ("pow", "`pow`", "PowBackward0", True),
    ],
)
def test_the_backward_op_that_made_a_nan_is_named_as_watch_names_it(here, kind, op, line, masked):
    """The four ways a finite loss gets a NaN gradient (scripts/nan_backward.py, the script
    GS433 and GS434 are tested on): the op, its line, 0 × ∞ told from an infinite local
    derivative, and the nodes that only passed it on."""
    shutil.copy(WATCH_SCRIPTS / "nan_backward.py", here / "nan_backward.py")
    source = (here / "nan_backward.py").read_text().splitlines()
    inspected = script.run_step("nan_backward.py", [kind, "sgd", "3"], step=1, explain=True)
    said = inspected.evidence["non-finite"][-1]
    at = next(i for i, text in enumerate(source, 1) if text.endswith(f"# BUG: {kind}"))
    where = f"{op} at nan_backward.py:{at}"
    assert f"the backward of {where}" in said and f"({line}) made the first non-finite" in said
    assert ("its incoming gradient was 0 where it made NaN" in said) == masked
    assert "later node(s) only passed it on" in said
    safe = [f"safe-{kind}", "sgd", "3"]
    healthy = script.run_step("nan_backward.py", safe, step=1, explain=True)
    assert "non-finite" not in healthy.evidence


def test_a_graph_cut_in_the_step_is_named_for_the_parameters_it_cut_off(runner, here):
    (here / "cut.py").write_text(CUT)
    inspected = script.run_step("cut.py", step=2, explain=True)
    assert inspected.evidence == {
        "none-grad:enc.weight": ["graph cut by .detach(): `detach` at cut.py:13"],
        "none-grad:enc.bias": ["graph cut by .detach(): `detach` at cut.py:13"],
    }
    result = runner.invoke(app, ["inspect", "--script", "cut.py", "--step", "2"])
    assert result.exit_code == 1
    assert "evidence: graph cut by .detach(): `detach` at cut.py:13" in " ".join(
        result.stdout.split()
    )


def test_the_live_watch_is_gone_after_the_run(here):
    import torch

    (here / "cut.py").write_text(CUT)
    depth = torch._C._len_torch_function_stack()
    from torch.optim import optimizer

    hooks = dict(optimizer._global_optimizer_post_hooks)
    step = torch.amp.GradScaler.step
    script.run_step("cut.py", step=3, explain=True)
    assert torch._C._len_torch_function_stack() == depth
    assert dict(optimizer._global_optimizer_post_hooks) == hooks
    assert torch.amp.GradScaler.step is step


def _line_of(name: str, marker: str) -> int:
    text = (SCRIPTS / name).read_text().splitlines()
    return next(i for i, line in enumerate(text, 1) if marker in line)


def test_two_optimizers_each_step_counts_as_watch_counts_them(tmp_path, monkeypatch):
    """dcgan: D's step is step 1, G's is step 2; step 2's backward is G's."""
    from gradscope.watcher import watch_script

    shutil.copy(SCRIPTS / "dcgan.py", tmp_path / "dcgan.py")
    monkeypatch.chdir(tmp_path)
    steps = watch_script("dcgan.py").run.steps
    assert [s.backward_calls for s in steps[:4]] == [2, 1, 2, 1]
    assert steps[0].optimizer != steps[1].optimizer
    (tmp_path / "events.log").unlink()
    inspected = script.run_step("dcgan.py", step=2)
    events = (tmp_path / "events.log").read_text().splitlines()
    assert events == ["backward D real", "backward D fake", "step D", "backward G"]
    line = _line_of("dcgan.py", "# G-BACKWARD")
    assert f"optimizer step 2 of dcgan.py (dcgan.py:{line})" in inspected.stats.loss_source
    # errG reaches G and, through netD(fake), D: both models, as in the first backward's case
    assert {p.name.split(".")[0] for p in inspected.stats.params} == {"Sequential", "Sequential_1"}


def test_a_closure_backward_inside_the_step_is_that_step_s(tmp_path, monkeypatch):
    """LBFGS: step N's backward runs inside optimizer.step(closure), after step N-1 returned."""
    shutil.copy(SCRIPTS / "lbfgs.py", tmp_path / "lbfgs.py")
    monkeypatch.chdir(tmp_path)
    inspected = script.run_step("lbfgs.py", step=3)
    events = (tmp_path / "events.log").read_text().splitlines()
    calls_per_step = 2  # max_iter=2, and no early stop on this data: checked below
    assert len(events) == 2 * calls_per_step + 1
    assert inspected.stats.loss_value == pytest.approx(float(events[-1].split()[2]))
    line = _line_of("lbfgs.py", "# CLOSURE-BACKWARD")
    assert f"optimizer step 3 of lbfgs.py (lbfgs.py:{line})" in inspected.stats.loss_source


ODD_TENSORS = """
import torch
from torch import nn
with torch.device("meta"):
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))
model = model.to_empty(device="cpu")
for m in model.modules():
    if isinstance(m, nn.Linear):
        m.reset_parameters()
sparse = torch.sparse_coo_tensor(torch.tensor([[0, 1], [1, 0]]), torch.tensor([1.0, 2.0]), (2, 2))
dense = torch.sparse.mm(sparse, torch.eye(2))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(2):
    loss = model(torch.randn(8, 4)).pow(2).mean() + dense.sum() * 0
    loss.backward()
    opt.step()
"""


def test_the_live_watch_reads_no_meta_or_sparse_tensor(here, nan_filled_empty):
    """A model built on the meta device, a sparse op: the watch skips what it cannot read.
    `to_empty` gives the weights memory no one wrote (NaN here) until reset_parameters
    writes it: no op made NaN."""
    (here / "odd.py").write_text(ODD_TENSORS)
    inspected = script.run_step("odd.py", explain=True)
    assert inspected.stats.loss_finite and inspected.evidence == {}
    assert script.run_step("odd.py", step=2, explain=True).stats.loss_finite


LEFT_A_MODE = """
import torch
from torch import nn
from torch.overrides import TorchFunctionMode


class Mine(TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        return func(*args, **(kwargs or {}))


model = nn.Linear(2, 1)
Mine().__enter__()  # never left
model(torch.ones(3, 2)).sum().backward()
"""


def test_a_mode_the_script_left_above_the_watch_stays_and_the_watch_goes(here):
    import torch

    (here / "mode.py").write_text(LEFT_A_MODE)
    depth = torch._C._len_torch_function_stack()
    try:
        script.run_step("mode.py", explain=True)
        assert torch._C._len_torch_function_stack() == depth + 1  # the script's own
        assert type(torch._C._get_function_stack_at(depth)).__name__ == "Mine"
    finally:
        while torch._C._len_torch_function_stack() > depth:
            torch._C._pop_torch_function_stack()


SPARSE_AND_PAIRS = """
import torch
from torch import nn
torch.manual_seed(0)
emb = nn.Embedding(10, 4, sparse=True)  # sparse gradients
head = nn.Linear(4, 1)
opt = torch.optim.SGD([*emb.parameters(), *head.parameters()], lr=0.1)
for step in range(3):
    out = head(emb(torch.tensor([1, 2, 3]))).mean()
    aux = head.weight.pow(2).sum()
    torch.autograd.backward([out, aux])  # several tensors at once
    opt.step()
    opt.zero_grad()
"""


def test_first_nonfinite_steps_over_what_it_cannot_read(here, monkeypatch):
    """Sparse gradients and a backward of several tensors run as written; under torchrun the
    scan is refused (each rank would stop at its own step)."""
    (here / "sparse.py").write_text(SPARSE_AND_PAIRS)
    with pytest.raises(TargetError, match="stayed finite over all 3 optimizer steps"):
        script.run_step("sparse.py", step="first-nonfinite")
    with pytest.raises(TargetError, match="backward to inspect takes several tensors"):
        script.run_step("sparse.py", step=2)
    monkeypatch.setenv("WORLD_SIZE", "2")
    with pytest.raises(TargetError, match="under torchrun: each rank would judge its own loss"):
        script.run_step("sparse.py", step="first-nonfinite")
