"""The Lightning callback on real fits: the same rule ids as `gradscope.watch()` around
the same fit, nothing on a healthy one, the stop, the resume, the outputs, a crash, and
unscaled norms under a fused optimizer and 16-mixed."""

from __future__ import annotations

import json
import logging
import math

import pytest

L = pytest.importorskip("lightning")

pytestmark = pytest.mark.slow

BAD = ("error", "warning")


def _torch():
    import torch

    return torch


class Net(L.LightningModule):
    """A tiny regression; `bug`: "no-zero-grad", "no-optimizer", "raise-at-5", "nan-at-6"."""

    def __init__(self, bug: str | None = None, fused: bool = False) -> None:
        super().__init__()
        torch = _torch()
        torch.manual_seed(0)
        self.net = torch.nn.Sequential(
            torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1)
        )
        self.extra = torch.nn.Linear(8, 1)
        self.bug = bug
        self.fused = fused
        self.automatic_optimization = bug != "no-zero-grad"
        self.reference: list[float] = []

    def training_step(self, batch, i):
        torch = _torch()
        x, y = batch
        out = self.net(x)
        if self.bug == "no-optimizer":
            out = out + self.extra(x)
        if self.bug == "raise-at-5" and self.global_step == 5:
            raise RuntimeError("the data loader broke")
        if self.bug == "nan-at-6" and self.global_step == 6:
            out = out * float("nan")
        loss = torch.nn.functional.mse_loss(out, y)
        if self.bug == "no-zero-grad":  # manual optimization that never calls zero_grad
            self.manual_backward(loss)
            self.optimizers().step()
        return loss

    def on_after_backward(self):
        """The independent reference: the full gradient's norm, unscaled by hand."""
        torch = _torch()
        scaler = getattr(self.trainer.precision_plugin, "scaler", None)
        scale = float(scaler.get_scale()) if scaler is not None else 1.0
        grads = [p.grad.double() for p in self.net.parameters() if p.grad is not None]
        self.reference.append(
            float(torch.linalg.vector_norm(torch.cat([g.flatten() for g in grads]))) / scale
        )

    def configure_optimizers(self):
        torch = _torch()
        if self.fused:
            return torch.optim.AdamW(self.net.parameters(), lr=1e-3, fused=True)
        return torch.optim.SGD(self.net.parameters(), lr=0.05)


def _data(n: int = 256):
    torch = _torch()
    g = torch.Generator().manual_seed(0)
    x = torch.randn(n, 8, generator=g)
    y = x.sum(1, keepdim=True) / 3
    return torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=8)


def _fit(model, callbacks=(), steps: int = 30, ckpt_path=None, checkpoints=False, **trainer):
    _torch().manual_seed(0)
    t = L.Trainer(
        max_steps=steps,
        accelerator="cpu",
        logger=False,
        enable_checkpointing=checkpoints,
        enable_progress_bar=False,
        enable_model_summary=False,
        callbacks=list(callbacks),
        **trainer,
    )
    t.fit(model, _data(), ckpt_path=ckpt_path)
    return t


def _rules(report, severities=BAD) -> set[str]:
    return {f.rule for f in report.findings if str(f.severity) in severities and not f.ignored_by}


def _watched(bug):
    import gradscope

    with gradscope.watch() as w:
        _fit(Net(bug))
    return w.report


@pytest.mark.parametrize(("bug", "rule"), [("no-zero-grad", "GS412"), ("no-optimizer", "GS411")])
def test_seeded_bug_same_rule_as_watch_said_as_it_happens(bug, rule, caplog, every_step):
    from gradscope.integrations.lightning import GradscopeCallback

    cb = GradscopeCallback()
    with caplog.at_level(logging.INFO, logger="lightning.pytorch.callbacks.gradscope"):
        _fit(Net(bug), [cb])
    assert rule in _rules(cb.report)
    assert _rules(cb.report) == _rules(_watched(bug))
    live = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert any(m.startswith(f"gradscope {rule} error") for m in live), live
    assert len(cb.report.run.steps) == 30


def test_healthy_fit_no_warning_and_report_logged(caplog, every_step):
    from gradscope.integrations.lightning import GradscopeCallback

    cb = GradscopeCallback(flush_every=1)
    with caplog.at_level(logging.INFO, logger="lightning.pytorch.callbacks.gradscope"):
        _fit(Net(), [cb], steps=40)
    assert cb.watch.live.judgements >= 35  # judged as it went, and nothing said
    assert _rules(cb.report) == set()
    assert cb.report.run.status == "completed"
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert any("40 steps" in r.getMessage() or "steps" in r.getMessage() for r in caplog.records)


def test_stop_on_error_stops_the_fit_and_writes_the_partial_report(tmp_path, every_step):
    from gradscope.integrations.lightning import GradscopeCallback

    out = tmp_path / "report.json"
    cb = GradscopeCallback(outputs=[str(out)], stop_on_error=True, flush_every=1)
    trainer = _fit(Net("nan-at-6"), [cb], steps=60)
    assert trainer.global_step < 60
    doc = json.loads(out.read_text())
    assert "GS401" in {f["rule"] for f in doc["findings"]}
    assert cb.report.run.status == "stopped"
    assert len(cb.report.run.steps) == trainer.global_step


def test_without_stop_on_error_the_fit_runs_on():
    from gradscope.integrations.lightning import GradscopeCallback

    cb = GradscopeCallback(flush_every=1)
    trainer = _fit(Net("nan-at-6"), [cb], steps=12)
    assert trainer.global_step == 12
    assert "GS401" in _rules(cb.report)


def test_outputs_by_extension_and_one_unwritable_is_a_warning(tmp_path, caplog):
    from gradscope.integrations.lightning import GradscopeCallback

    names = [tmp_path / "r.json", tmp_path / "r.md", tmp_path / "run.png", tmp_path / "r.txt"]
    gone = tmp_path / "missing" / "r.json"
    cb = GradscopeCallback(outputs=[str(n) for n in [*names, gone]])
    with caplog.at_level(logging.WARNING, logger="lightning.pytorch.callbacks.gradscope"):
        _fit(Net(), [cb], steps=12)
    doc = json.loads(names[0].read_text())
    assert doc["kind"] == "watch" and len(doc["steps"]) == 12
    assert names[1].read_text().strip() and names[2].read_bytes()[:4] == b"\x89PNG"
    assert "steps" in names[3].read_text()
    said = [r.getMessage() for r in caplog.records]
    assert any(str(gone) in m and "not written" in m for m in said), said


def test_a_crash_ends_the_watch_with_the_partial_report(tmp_path):
    from gradscope.integrations.lightning import GradscopeCallback

    out = tmp_path / "report.json"
    cb = GradscopeCallback(outputs=[str(out)])
    with pytest.raises(RuntimeError, match="data loader broke"):
        _fit(Net("raise-at-5"), [cb], steps=20)
    assert cb.report.run.status == "crashed"
    assert len(cb.report.run.steps) == 5
    assert json.loads(out.read_text())["findings"] is not None
    from torch.optim import optimizer

    assert not optimizer._global_optimizer_pre_hooks  # the watch was left


def test_resume_continues_the_report_from_the_checkpoint(tmp_path):
    from lightning.pytorch.callbacks import ModelCheckpoint

    from gradscope.integrations.lightning import GradscopeCallback

    first = GradscopeCallback()
    saver = ModelCheckpoint(dirpath=tmp_path, save_last=True, every_n_train_steps=10)
    _fit(Net(), [first, saver], steps=10, checkpoints=True)
    second = GradscopeCallback()
    _fit(Net(), [second], steps=20, ckpt_path=str(tmp_path / "last.ckpt"))
    steps = list(second.report.run.steps)
    assert [s.step for s in steps] == list(range(1, 21))
    earlier = [s.grad_norm for s in first.report.run.steps]
    assert [s.grad_norm for s in steps[:10]] == earlier
    assert [s.param_norms for s in steps[:10]] == [s.param_norms for s in first.report.run.steps]
    assert _rules(second.report) == set()


def test_fused_adamw_16_mixed_norms_are_unscaled():
    torch = _torch()
    from gradscope.integrations.lightning import GradscopeCallback

    cb = GradscopeCallback(flush_every=1)
    model = Net(fused=True)
    from lightning.pytorch.plugins import MixedPrecision

    # Trainer(precision="16-mixed") on CPU falls back to bf16-mixed (no scaler): the
    # plugin Lightning would build for a GPU, with torch's CPU GradScaler
    amp = MixedPrecision("16-mixed", "cpu", scaler=torch.amp.GradScaler("cpu"))
    trainer = _fit(model, [cb], steps=12, plugins=[amp])
    scaler = trainer.precision_plugin.scaler
    assert isinstance(scaler, torch.amp.GradScaler) and scaler.get_scale() > 1000
    steps = list(cb.report.run.steps)
    assert len(steps) == len(model.reference) == 12
    for s, ref in zip(steps, model.reference, strict=True):
        if s.skipped:
            continue
        assert math.isclose(s.grad_norm, ref, rel_tol=1e-6), (s.step, s.grad_norm, ref)
