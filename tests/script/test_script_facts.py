"""What a script's first step hides is said: gradient accumulation, torch.compile's name
prefix, and models that ran but that the loss does not reach (a GAN's generator)."""

from __future__ import annotations

import textwrap

import pytest
import torch
from torch import nn

from gradscope import api, config
from gradscope.inspector import script, script_facts

# --- gradient accumulation -----------------------------------------------------------------------


def _scalar() -> torch.Tensor:
    w = torch.tensor([1.0, 2.0], requires_grad=True)
    return (w * 3).sum()  # 9.0


@pytest.mark.parametrize(
    "make, expected",
    [
        (lambda t: t / 4, "the loss backwarded is 2.25 (= 9 / 4: gradient accumulation?)"),
        (lambda t: t / torch.tensor(8.0), "the loss backwarded is 1.125 (= 9 / 8: gradient"),
        (lambda t: torch.ops.aten.div.Scalar(t, 3), "is 3 (= 9 / 3: gradient accumulation?)"),
        (lambda t: t * 0.5, "is 4.5 (= 9 × 0.5: gradient accumulation or a loss weight?)"),
        (lambda t: 0.25 * t, "is 2.25 (= 9 × 0.25: gradient accumulation or a loss weight?)"),
        (lambda t: torch.tensor(2.0) * t, "is 18 (= 9 × 2: gradient accumulation or a loss"),
    ],
)
def test_a_loss_scaled_by_a_constant_is_said(make, expected):
    said = script_facts.loss_scaling(make(_scalar()))
    assert said is not None and expected in said


@pytest.mark.parametrize(
    "make",
    [
        lambda t: t,  # no scaling
        lambda t: t / 1,  # a factor of one says nothing
        lambda t: t / t.detach().new_tensor([2.0, 2.0]).sum().requires_grad_(),  # not constant
        lambda t: t / (t.detach() * 0 + 2).expand(3)[0] * 1,  # the last op: × 1
        lambda t: (t * torch.ones(3)).sum(),  # a sum, not a scaling
    ],
)
def test_other_losses_say_nothing(make):
    assert script_facts.loss_scaling(make(_scalar())) is None


def _per_step_sum(steps: int) -> torch.Tensor:
    """A loop's `total = total + term` over `steps` steps (a world model's per-step losses)."""
    w = torch.tensor([1.0, 2.0], requires_grad=True)
    total: torch.Tensor | int = 0
    for k in range(steps):
        total = total + (w * (k + 1)).pow(2).mean()
    assert isinstance(total, torch.Tensor)
    return total


@pytest.mark.parametrize(
    "make",
    [
        # an exact GP's NLML: a quadratic form's sum over n points and a log-det, over n
        lambda: ((torch.ones(60, requires_grad=True) * 2).sum() * 0.5 + 3.0) / 60,
        lambda: (torch.ones(5, 12, requires_grad=True).exp().sum() + 1) / torch.tensor(60.0),
        lambda: _per_step_sum(12) / 12,  # T per-step losses added, then over T
        lambda: (_per_step_sum(12) + _per_step_sum(12)) / 12,
    ],
)
def test_a_sum_divided_by_its_own_count_is_a_mean_not_accumulation(make):
    assert script_facts.loss_scaling(make()) is None


@pytest.mark.parametrize(
    "make, divisor",
    [
        (lambda: _per_step_sum(12) / 5, 5),  # 12 terms over 5: a scaling
        (lambda: _per_step_sum(2) / 4, 4),
        (lambda: torch.ones(60, requires_grad=True).pow(2).mean() / 60, 60),  # a mean, over 60
        (lambda: torch.ones(8, requires_grad=True).sum() / 4, 4),
    ],
)
def test_a_divisor_that_counts_nothing_the_loss_adds_is_still_said(make, divisor):
    said = script_facts.loss_scaling(make())
    assert said is not None and f"/ {divisor}: gradient accumulation?" in said


ACCUMULATING = """
import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
accum = 4
for i in range(8):
    x, y = torch.randn(16, 4), torch.randn(16, 1)
    full = F.mse_loss(model(x), y)
    open("full.txt", "w").write(repr(full.item()))
    loss = full / accum
    loss.backward()
    if (i + 1) % accum == 0:
        opt.step()
        opt.zero_grad()
"""


def test_gradient_accumulation_is_said_in_the_loss_source(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "train.py").write_text(ACCUMULATING)
    _, stats = script.run("train.py")
    full = float((tmp_path / "full.txt").read_text())
    assert stats.loss_value == pytest.approx(full / 4, rel=1e-6)
    assert (
        f"the loss backwarded is {full / 4:.4g} (= {full:.4g} / 4: gradient accumulation?)"
        in stats.loss_source
    )


def test_accumulation_under_a_grad_scaler_is_said_of_the_unscaled_loss(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    body = ACCUMULATING.replace("    loss.backward()", "    scaler.scale(loss).backward()").replace(
        "accum = 4", "accum = 4\nscaler = torch.amp.GradScaler('cpu', init_scale=1024.0)"
    )
    (tmp_path / "train.py").write_text(body)
    _, stats = script.run("train.py")
    full = float((tmp_path / "full.txt").read_text())
    assert stats.loss_scale == 1024.0
    assert stats.loss_value == pytest.approx(full / 4, rel=1e-6)
    assert f"(= {full:.4g} / 4: gradient accumulation?)" in stats.loss_source


# --- torch.compile -------------------------------------------------------------------------------

COMPILED = """
import torch
from torch import nn

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(4, 8), nn.Tanh())
        self.head = nn.Linear(8, 1)
        self.unused = nn.Linear(4, 4)
    def forward(self, x):
        return self.head(self.body(x))

torch.manual_seed(0)
net = Net()
WRAP
opt = torch.optim.Adam(net.parameters())
for _ in range(3):
    loss = net(torch.randn(8, 4)).pow(2).mean()
    loss.backward()
    opt.step()
    opt.zero_grad()
"""

NAMES = ["body.0.weight", "body.0.bias", "head.weight", "head.bias", "unused.weight", "unused.bias"]


def _compiled_report(tmp_path, monkeypatch, wrap: str):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "train.py").write_text(COMPILED.replace("WRAP", wrap))
    (tmp_path / "gradscope.toml").write_text('ignore = ["none-grad:unused.*"]\n')
    return api.inspect_script("train.py", settings=config.load("gradscope.toml"))


@pytest.mark.filterwarnings("ignore:`torch.jit.script_method` is deprecated")
def test_a_compiled_submodule_keeps_its_names(tmp_path, monkeypatch):
    report = _compiled_report(
        tmp_path, monkeypatch, 'net.body = torch.compile(net.body, backend="eager")'
    )
    assert [p.name for p in report.stats.params] == NAMES
    assert [m.name for m in report.stats.modules] == [
        "",
        "body",
        "body.0",
        "body.1",
        "head",
        "unused",
    ]
    assert all(p.has_grad for p in report.stats.params[:4])
    assert report.findings == []  # the ignore glob matches the stripped names
    assert {f.subject for f in report.ignored} == {"unused.weight", "unused.bias"}


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore:`torch.jit.script_method` is deprecated")
def test_a_compiled_model_keeps_its_names_under_inductor(tmp_path, monkeypatch):
    """A real torch.compile (inductor; about half a minute on a small CPU)."""
    torch._dynamo.reset()
    report = _compiled_report(tmp_path, monkeypatch, "net = torch.compile(net)")
    assert report.stats.model_class == "Net"
    assert [p.name for p in report.stats.params] == NAMES
    assert report.findings == []
    assert {f.subject for f in report.ignored} == {"unused.weight", "unused.bias"}
    # the gradients are those of plain autograd on the same weights and batch
    assert all(p.has_grad and p.grad_norm > 0 for p in report.stats.params[:4])


# --- several models: what the first backward's loss reaches --------------------------------------

DCGAN = """
import torch
from torch import nn

class Generator(nn.Module):
    def __init__(self):
        super().__init__()
        self.main = nn.Sequential(nn.Linear(2, 8), nn.ReLU(), nn.Linear(8, 3), nn.Tanh())
    def forward(self, z):
        return self.main(z)

class Discriminator(nn.Module):
    def __init__(self):
        super().__init__()
        self.main = nn.Sequential(nn.Linear(3, 8), nn.LeakyReLU(0.2), nn.Linear(8, 1), nn.Sigmoid())
    def forward(self, x):
        return self.main(x).view(-1)

torch.manual_seed(0)
netG, netD = Generator(), Discriminator()
criterion = nn.BCELoss()
optD = torch.optim.Adam(netD.parameters(), lr=2e-4)
optG = torch.optim.Adam(netG.parameters(), lr=2e-4)
for step in range(3):
    real = torch.randn(16, 3)
    # (1) update D: maximize log(D(x)) + log(1 - D(G(z)))
    netD.zero_grad()
    errD_real = criterion(netD(real), torch.ones(16))
    FIRST
    errD_real.backward()
    fake = netG(torch.randn(16, 2))
    errD_fake = criterion(netD(fake.detach()), torch.zeros(16))
    errD_fake.backward()
    optD.step()
    # (2) update G: maximize log(D(G(z)))
    netG.zero_grad()
    errG = criterion(netD(fake), torch.ones(16))
    errG.backward()
    optG.step()
"""


def test_the_canonical_dcgan_loop_reports_the_discriminator(tmp_path, monkeypatch):
    """errD_real.backward() comes before the generator runs: the step is D's alone."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "dcgan.py").write_text(DCGAN.replace("FIRST", "pass"))
    _, stats = script.run("dcgan.py")
    assert stats.model_class == "Discriminator"
    assert [p.name for p in stats.params] == [
        "main.0.weight", "main.0.bias", "main.2.weight", "main.2.bias",
    ]  # fmt: skip
    assert all(p.has_grad for p in stats.params)


def test_a_model_the_loss_does_not_reach_is_left_out_and_named(tmp_path, monkeypatch):
    """The first backward is D's loss on fake.detach(): G ran, but this step is D's."""
    monkeypatch.chdir(tmp_path)
    first = "errD_real = criterion(netD(netG(torch.randn(16, 2)).detach()), torch.zeros(16))"
    (tmp_path / "dcgan.py").write_text(DCGAN.replace("FIRST", first))
    report = api.inspect_script("dcgan.py")
    assert report.stats.model_class == "Discriminator"
    assert report.findings == []  # no none-grad false alarm on the generator
    assert "Generator ran before it but this loss reaches none of its parameters: left out" in (
        report.stats.loss_source
    )


def test_models_the_loss_reaches_are_reported_together(tmp_path, monkeypatch):
    """The generator's step goes through D: both are in it, keyed by class name."""
    monkeypatch.chdir(tmp_path)
    first = "criterion(netD(netG(torch.randn(16, 2))), torch.ones(16)).backward()"
    (tmp_path / "dcgan.py").write_text(DCGAN.replace("FIRST", first))
    report = api.inspect_script("dcgan.py")
    names = [p.name for p in report.stats.params]
    assert names[:2] == ["Discriminator.main.0.weight", "Discriminator.main.0.bias"]
    assert names[4:6] == ["Generator.main.0.weight", "Generator.main.0.bias"]
    assert all(p.has_grad for p in report.stats.params)
    assert report.findings == []


def test_a_loss_cut_off_from_every_model_is_still_reported(tmp_path, monkeypatch):
    """When the loss reaches no model at all, that is the bug (GS101), not a model to drop."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "cut.py").write_text(
        textwrap.dedent("""
        import torch
        from torch import nn
        net = nn.Linear(3, 1)
        w = torch.ones(1, requires_grad=True)
        (net(torch.randn(4, 3)).detach() * w).sum().backward()
        """)
    )
    report = api.inspect_script("cut.py")
    assert {f.subject for f in report.findings if f.slug == "none-grad"} == {"weight", "bias"}
    assert "left out" not in report.stats.loss_source


def test_unwrapping_needs_no_dynamo():
    net = nn.Linear(2, 2)
    assert script_facts.unwrap_compiled(net) is net
