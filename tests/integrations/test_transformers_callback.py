"""The transformers callback on real Trainer runs (GPT2 from a config, no download): the
same rule ids as `gradscope.watch()` around the same train, nothing on a healthy one,
the stop, the resume through trainer_state.json, the outputs, and the pre-clip norm and
clip fraction under max_grad_norm against an independent reference."""

from __future__ import annotations

import functools
import json
import logging
import math

import pytest

transformers = pytest.importorskip("transformers")
pytest.importorskip("accelerate")

pytestmark = pytest.mark.slow

BAD = ("error", "warning")


def _model():
    import torch

    torch.manual_seed(0)
    config = transformers.GPT2Config(vocab_size=64, n_positions=32, n_embd=32, n_layer=2, n_head=2)
    return transformers.GPT2LMHeadModel(config)


def _data():
    import torch

    g = torch.Generator().manual_seed(0)
    tokens = torch.randint(0, 64, (96, 16), generator=g)
    return [{"input_ids": t, "labels": t} for t in tokens]


def _args(tmp_path, steps=12, **given):
    kw = {
        "output_dir": str(tmp_path),
        "max_steps": steps,
        "per_device_train_batch_size": 4,
        "learning_rate": 1e-3,
        "logging_steps": 1000,
        "save_strategy": "no",
        "report_to": [],
        "use_cpu": True,
        "disable_tqdm": True,
        "seed": 0,
        **given,
    }
    return transformers.TrainingArguments(**kw)


def _trainer(tmp_path, callbacks=(), model=None, optimizers=(None, None), **given):
    model = model if model is not None else _model()
    return transformers.Trainer(
        model=model,
        args=_args(tmp_path, **given),
        train_dataset=_data(),
        callbacks=list(callbacks),
        optimizers=optimizers,
    )


def _rules(report) -> set[str]:
    return {f.rule for f in report.findings if str(f.severity) in BAD and not f.ignored_by}


def _without_head_bias(model):
    """The optimizer of every parameter but one (a layer added after it was built)."""
    import torch

    kept = [p for n, p in model.named_parameters() if n != "transformer.ln_f.bias"]
    return torch.optim.AdamW(kept, lr=1e-3), None


def test_parameter_in_no_optimizer_same_rule_as_watch_said_as_it_happens(
    tmp_path, caplog, every_step
):
    import gradscope
    from gradscope.integrations.transformers import GradscopeCallback

    cb = GradscopeCallback()
    model = _model()
    with caplog.at_level(logging.WARNING, logger="transformers.gradscope"):
        _trainer(tmp_path, [cb], model, _without_head_bias(model)).train()
    assert "GS411" in _rules(cb.report)
    model = _model()
    with gradscope.watch() as w:
        _trainer(tmp_path, [], model, _without_head_bias(model)).train()
    assert _rules(cb.report) == _rules(w.report)
    said = [r.getMessage() for r in caplog.records]
    assert any(m.startswith("gradscope GS411 error") for m in said), said


def test_healthy_train_no_warning_and_report_logged(tmp_path, caplog, every_step):
    from gradscope.integrations.transformers import GradscopeCallback

    cb = GradscopeCallback(flush_every=1)
    with caplog.at_level(logging.WARNING, logger="transformers.gradscope"):
        _trainer(tmp_path, [cb], gradient_accumulation_steps=2).train()
    assert cb.watch.live.judgements >= 10  # judged as it went, and nothing said
    assert _rules(cb.report) == set(), [f.message for f in cb.report.findings]
    said = [r.getMessage() for r in caplog.records]
    assert not [m for m in said if m.startswith("gradscope GS")], said
    assert any("verdict" in m for m in said), said  # the report, logged at the end


def test_pre_clip_norm_and_exact_clip_fraction(tmp_path):
    """HF's on_pre_optimizer_step sees clipped gradients; the reference here is each
    parameter's gradient as its last accumulation left it (a post-accumulate hook),
    before accelerate's clip_grad_norm_."""
    import torch
    from transformers import TrainerCallback

    from gradscope.integrations.transformers import GradscopeCallback

    model = _model()
    last: dict[int, float] = {}
    for p in model.parameters():
        p.register_post_accumulate_grad_hook(
            lambda p: last.__setitem__(id(p), float(p.grad.double().square().sum()))
        )
    reference: list[float] = []

    class Reference(TrainerCallback):
        def on_pre_optimizer_step(self, args, state, control, **kwargs):
            reference.append(math.sqrt(sum(last.values())))
            after = [p.grad.double().square().sum() for p in model.parameters()]
            reference_after.append(float(torch.stack(after).sum().sqrt()))

    reference_after: list[float] = []
    cb = GradscopeCallback(flush_every=4)
    hosts = [cb, Reference()]
    trainer = _trainer(
        tmp_path, hosts, model, steps=16, max_grad_norm=0.95, gradient_accumulation_steps=2
    )
    trainer.train()
    steps = list(cb.report.run.steps)
    assert len(steps) == len(reference) == 16
    for s, ref, after in zip(steps, reference, reference_after, strict=True):
        assert math.isclose(s.grad_norm, ref, rel_tol=1e-6), (s.step, s.grad_norm, ref)
        assert s.max_norm == 0.95 and s.clipped == (ref > 0.95)
        assert math.isclose(s.clipped_norm, after, rel_tol=1e-5), (s.step, s.clipped_norm, after)
    clipped = sum(s.clipped for s in steps)
    assert 0 < clipped < 16, [s.grad_norm for s in steps]  # the fraction is a real one
    assert clipped == sum(r > 0.95 for r in reference)


def test_stop_on_error_stops_training_with_the_partial_report(tmp_path, every_step):
    import torch

    from gradscope.integrations.transformers import GradscopeCallback

    model = _model()
    original = model.forward

    @functools.wraps(original)  # the Trainer keeps the columns forward's signature names
    def forward(*args, **kwargs):  # a batch that goes NaN from the 5th step on
        out = original(*args, **kwargs)
        if forward.calls >= 4:
            out.loss = out.loss * torch.tensor(float("nan"))
        forward.calls += 1
        return out

    forward.calls = 0
    model.forward = forward
    out = tmp_path / "report.md"
    cb = GradscopeCallback(outputs=[str(out)], stop_on_error=True, flush_every=1)
    trainer = _trainer(tmp_path, [cb], model, steps=40)
    trainer.train()
    assert trainer.state.global_step < 40
    assert cb.report.run.status == "stopped"
    assert "GS401" in _rules(cb.report) and "GS401" in out.read_text()


def test_resume_continues_the_report_from_trainer_state(tmp_path):
    from gradscope.integrations.transformers import GradscopeCallback

    first = GradscopeCallback()
    _trainer(tmp_path, [first], steps=6, save_strategy="steps", save_steps=6).train()
    saved = json.loads((tmp_path / "checkpoint-6" / "trainer_state.json").read_text())
    ours = saved["stateful_callbacks"]["GradscopeCallback"]["attributes"]["gradscope"]
    assert len(ours["records"]) == 6
    second = GradscopeCallback()
    trainer = _trainer(tmp_path, [second], steps=12)
    trainer.train(resume_from_checkpoint=str(tmp_path / "checkpoint-6"))
    steps = list(second.report.run.steps)
    assert [s.step for s in steps] == list(range(1, 13))
    assert [s.grad_norm for s in steps[:6]] == [s.grad_norm for s in first.report.run.steps]
    assert [s.loss for s in steps[:6]] == [s.loss for s in first.report.run.steps]


def test_a_second_train_afresh_is_a_new_report(tmp_path):
    from gradscope.integrations.transformers import GradscopeCallback

    cb = GradscopeCallback()
    _trainer(tmp_path, [cb], steps=4).train()
    _trainer(tmp_path, [cb], steps=3).train()
    assert [s.step for s in cb.report.run.steps] == [1, 2, 3]


def test_with_block_ends_the_watch_on_an_exception(tmp_path):
    from gradscope.integrations.transformers import GradscopeCallback

    model = _model()
    original = model.forward

    @functools.wraps(original)
    def forward(*args, **kwargs):
        forward.calls += 1
        if forward.calls == 4:
            raise RuntimeError("a corrupt shard")
        return original(*args, **kwargs)

    forward.calls = 0
    model.forward = forward
    out = tmp_path / "report.json"
    cb = GradscopeCallback(outputs=[str(out)])
    with pytest.raises(RuntimeError, match="corrupt shard"), cb:
        _trainer(tmp_path, [cb], model, steps=10).train()
    assert cb.report.run.status == "crashed"
    assert len(cb.report.run.steps) == 3
    assert json.loads(out.read_text())["kind"] == "watch"
