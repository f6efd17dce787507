"""The stop at a script's first backward cannot be swallowed, and no optimizer step runs."""

from __future__ import annotations

import sys
import textwrap

import pytest
import torch
from torch.optim import optimizer as optim_mod

from gradscope.errors import TargetError
from gradscope.inspector import script

PRELUDE = """
import contextlib, sys
import torch
from torch.optim import optimizer as optim_mod
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1))
torch.save({k: v.clone() for k, v in model.state_dict().items()}, "before.pt")
opt = torch.optim.SGD(model.parameters(), lr=0.5, momentum=0.9, weight_decay=0.1)
x, y = torch.randn(16, 4), torch.randn(16, 1)
torch.save((x, y), "batch.pt")

def log(what):
    with open("events.log", "a") as f:
        f.write(what + "\\n")

def loss_of():
    loss = F.mse_loss(model(x), y)
    log(f"loss {loss.item()!r}")
    return loss
"""

SWALLOWERS = {
    "bare except": """
        for step in range(3):
            try:
                opt.zero_grad()
                loss_of().backward()
                opt.step()
                log("stepped")
            except:
                log("caught")
        """,
    "except BaseException": """
        for step in range(3):
            try:
                opt.zero_grad()
                loss_of().backward()
                opt.step()
                log("stepped")
            except BaseException as exc:
                print("step failed:", exc)
        """,
    "suppress(BaseException)": """
        for step in range(3):
            with contextlib.suppress(BaseException):
                opt.zero_grad()
                loss_of().backward()
            opt.step()
            log("stepped")
        """,
    "retrying while loop": """
        for step in range(3):
            done, attempts = False, 0
            while not done and attempts < 10000:
                attempts += 1
                try:
                    opt.zero_grad()
                    loss_of().backward()
                    opt.step()
                    log("stepped")
                    done = True
                except:
                    continue
        """,
    "while True retry, no calls in the handler": """
        attempts = 0
        while True:
            attempts += 1
            if attempts > 10000:
                break
            try:
                loss = loss_of()
                loss.backward()
                opt.step()
                log("stepped")
                break
            except:
                continue
        """,
    "nested swallowers": """
        def train_step():
            try:
                opt.zero_grad()
                torch.autograd.backward(loss_of())
                opt.step()
            except BaseException:
                pass
            log("stepped")

        attempts = 0
        while attempts < 10000:
            attempts += 1
            try:
                train_step()
            except BaseException:
                pass
        """,
    "swallowed on the last line": """
        opt.zero_grad()
        try:
            loss_of().backward()
        except BaseException:
            pass
        """,
    "sys.exit in the handler": """
        try:
            loss_of().backward()
            opt.step()
            log("stepped")
        except BaseException:
            sys.exit(0)
        """,
}


def _run(tmp_path, monkeypatch, body: str):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "train.py").write_text(PRELUDE + textwrap.dedent(body))
    trace, profile = sys.gettrace(), sys.getprofile()
    step_hooks = dict(optim_mod._global_optimizer_pre_hooks)
    model, stats = script.run("train.py")
    assert (sys.gettrace(), sys.getprofile()) == (trace, profile)  # tracing put back
    assert dict(optim_mod._global_optimizer_pre_hooks) == step_hooks
    events = (tmp_path / "events.log").read_text().splitlines()
    return model, stats, events


def _assert_first_step_inspected(tmp_path, model, stats, events):
    """Parameters as they were, the first loss reported, gradients as plain autograd has them."""
    assert "stepped" not in events
    losses = [e for e in events if e.startswith("loss ")]
    assert len(losses) == 1, events  # one forward: the script did not run on
    before = torch.load(tmp_path / "before.pt")
    for name, value in model.state_dict().items():
        assert torch.equal(value, before[name]), f"{name} was modified"
    assert all(p.grad is None for p in model.parameters())
    assert stats.loss_value == float(losses[0].split()[1])
    x, y = torch.load(tmp_path / "batch.pt")
    loss = torch.nn.functional.mse_loss(model(x), y)
    grads = torch.autograd.grad(loss, list(model.parameters()))
    expected = {
        n: g.norm().item() for (n, _), g in zip(model.named_parameters(), grads, strict=True)
    }
    for p in stats.params:
        assert p.grad_norm == pytest.approx(expected[p.name], rel=1e-6)


@pytest.mark.parametrize("case", sorted(SWALLOWERS))
def test_a_script_cannot_swallow_the_stop(tmp_path, monkeypatch, case):
    model, stats, events = _run(tmp_path, monkeypatch, SWALLOWERS[case])
    _assert_first_step_inspected(tmp_path, model, stats, events)
    assert "the script caught gradscope's stop" in stats.loss_source
    assert "no optimizer step ran" in stats.loss_source
    if case not in ("swallowed on the last line", "sys.exit in the handler"):
        assert "and went on at train.py:" in stats.loss_source


def test_what_the_script_did_after_the_stop_is_said(tmp_path, monkeypatch):
    _, stats, _ = _run(tmp_path, monkeypatch, SWALLOWERS["swallowed on the last line"])
    assert "it ran to its end" in stats.loss_source
    _, stats, _ = _run(tmp_path, monkeypatch, SWALLOWERS["sys.exit in the handler"])
    assert "it then called sys.exit(0)" in stats.loss_source


def test_a_finally_block_runs_but_its_optimizer_step_is_refused(tmp_path, monkeypatch):
    body = """
        class Custom(torch.optim.Optimizer):
            def __init__(self, params):
                super().__init__(params, {})
            def step(self, closure=None):
                for group in self.param_groups:
                    for p in group["params"]:
                        p.data.mul_(0.5)  # a step that needs no gradient at all

        opt = Custom(model.parameters())
        adam = torch.optim.AdamW(model.parameters(), lr=1.0)
        for step in range(3):
            try:
                loss_of().backward()
            finally:
                log("finally ran")
                try:
                    adam.step()
                finally:
                    opt.step()
                    log("stepped")
        """
    model, stats, events = _run(tmp_path, monkeypatch, body)
    _assert_first_step_inspected(tmp_path, model, stats, events)
    assert "finally ran" in events  # the user's cleanup runs as the stop passes
    assert (
        "went on after gradscope's stop; refused: AdamW.step() ×1, Custom.step() ×1"
        in stats.loss_source
    )


def test_a_plain_script_stops_without_a_note(tmp_path, monkeypatch):
    body = """
        for step in range(3):
            opt.zero_grad()
            loss_of().backward()
            opt.step()
            log("stepped")
        """
    model, stats, events = _run(tmp_path, monkeypatch, body)
    _assert_first_step_inspected(tmp_path, model, stats, events)
    assert stats.loss_source == "the first backward() of train.py (train.py:26)"


def test_an_exception_after_the_stop_still_inspects_the_step(tmp_path, monkeypatch):
    body = """
        try:
            loss_of().backward()
        except BaseException:
            raise RuntimeError("wrapped by the script's framework")
        """
    model, stats, events = _run(tmp_path, monkeypatch, body)
    _assert_first_step_inspected(tmp_path, model, stats, events)
    assert "it then raised RuntimeError" in stats.loss_source


def test_steps_before_the_first_backward_are_the_scripts_own(tmp_path, monkeypatch):
    """Only what would train on the inspected gradient is refused."""
    body = """
        opt.step()  # no gradient yet: a no-op the script is free to make
        log("early step")
        loss_of().backward()
        """
    _, _, events = _run(tmp_path, monkeypatch, body)
    assert "early step" in events


def test_a_first_backward_that_cannot_be_inspected_stops_the_script_too(tmp_path, monkeypatch):
    """The error is gradscope's, not the script's to catch: it used to be an Exception."""
    body = """
        for step in range(3):
            try:
                loss = loss_of()
                torch.autograd.backward([loss, loss * 2])
                opt.step()
                log("stepped")
            except Exception:
                pass
        """
    monkeypatch.chdir(tmp_path)
    (tmp_path / "train.py").write_text(PRELUDE + textwrap.dedent(body))
    trace = sys.gettrace()
    with pytest.raises(TargetError, match="first backward takes several tensors"):
        script.run("train.py")
    assert "stepped" not in (tmp_path / "events.log").read_text()
    assert sys.gettrace() is trace


# --- loops over loaders: unwinding past a generator is not catching the stop -----------------

LOADERS = {
    "DataLoader with a sampler (mnist)": """
        from torch.utils.data import DataLoader, TensorDataset
        loader = DataLoader(TensorDataset(x, y), batch_size=16, shuffle=True, num_workers=0)
        for epoch in range(2):
            for batch_idx, (data, target) in enumerate(loader):
                opt.zero_grad()
                loss = F.mse_loss(model(data), target)
                log(f"loss {loss.item()!r}")
                loss.backward()
                opt.step()
                log("stepped")
        """,
    "DataLoader with worker processes": """
        from torch.utils.data import DataLoader, TensorDataset
        loader = DataLoader(TensorDataset(x, y), batch_size=16, shuffle=True, num_workers=2)
        for epoch in range(2):
            for batch_idx, (data, target) in enumerate(loader):
                opt.zero_grad()
                loss = F.mse_loss(model(data), target)
                log(f"loss {loss.item()!r}")
                loss.backward()
                opt.step()
                log("stepped")
        """,
    "two DataLoaders zipped (dcgan)": """
        from torch.utils.data import DataLoader, TensorDataset
        real = DataLoader(TensorDataset(x, y), batch_size=16, shuffle=True)
        noise = DataLoader(TensorDataset(x), batch_size=16, sampler=None, drop_last=True)
        for i, ((data, target), (z,)) in enumerate(zip(real, noise)):
            opt.zero_grad()
            loss = F.mse_loss(model(data), target)
            log(f"loss {loss.item()!r}")
            loss.backward()
            opt.step()
            log("stepped")
        """,
    "the script's own generator, with a finally": """
        def batches(n):
            try:
                for _ in range(n):
                    yield x, y
            finally:
                log("loader closed")

        for data, target in batches(3):
            opt.zero_grad()
            loss_of().backward()
            opt.step()
            log("stepped")
        """,
    "itertools chains": """
        import itertools

        def batches():
            while True:
                yield x, y

        for step, (data, target) in enumerate(
            itertools.chain(itertools.islice(batches(), 2), itertools.repeat((x, y), 2))
        ):
            opt.zero_grad()
            loss_of().backward()
            opt.step()
            log("stepped")
        """,
}


@pytest.mark.parametrize("case", sorted(LOADERS))
def test_a_loop_over_a_loader_is_not_a_script_that_caught_the_stop(
    tmp_path, monkeypatch, capfd, case
):
    model, stats, events = _run(tmp_path, monkeypatch, LOADERS[case])
    _assert_first_step_inspected(tmp_path, model, stats, events)
    assert stats.loss_source.startswith("the first backward() of train.py (train.py:")
    assert ";" not in stats.loss_source, stats.loss_source  # no note: it simply stopped
    err = capfd.readouterr().err
    assert "Exception ignored" not in err and "Stop" not in err, err


def test_a_loop_over_a_dataloader_that_swallows_the_stop_is_still_reported(
    tmp_path, monkeypatch, capfd
):
    body = """
        from torch.utils.data import DataLoader, TensorDataset
        loader = DataLoader(TensorDataset(x, y), batch_size=16, shuffle=True)
        for epoch in range(2):
            for data, target in loader:
                try:
                    opt.zero_grad()
                    loss_of().backward()
                    opt.step()
                    log("stepped")
                except BaseException:
                    log("caught")
        """
    model, stats, events = _run(tmp_path, monkeypatch, body)
    _assert_first_step_inspected(tmp_path, model, stats, events)
    assert "caught" in events
    assert "the script caught gradscope's stop and went on at train.py:" in stats.loss_source
    assert "Exception ignored" not in capfd.readouterr().err
