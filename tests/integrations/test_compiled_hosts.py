"""torch.compile under the HF Trainer's callback (`torch_compile=True`, GPT2 from a
config) and the accelerate tracker (`Accelerator(dynamo_backend=...)`) with a sink on
(they write in a process of their own: test_compiled_sinks.py has every one): no graph
break, no recompile past the first compile, and the series the sink receives are the
uncompiled run's. The sinks' fixture: conftest.py; the checks: compiled_runs.py."""

from __future__ import annotations

import pytest
from compiled_runs import STEPS, compiled_counts, same_series

transformers = pytest.importorskip("transformers")
accelerate = pytest.importorskip("accelerate")

pytestmark = pytest.mark.slow  # compiles, a wandb service process, an MLflow store


def _trained(compiled: bool, sinks: dict, folder):
    import torch

    from gradscope.integrations.transformers import GradscopeCallback

    torch.manual_seed(0)
    config = transformers.GPT2Config(vocab_size=32, n_positions=16, n_embd=16, n_layer=1, n_head=2)
    g = torch.Generator().manual_seed(0)
    rows = [
        {"input_ids": t, "labels": t} for t in torch.randint(0, 32, (STEPS * 4, 8), generator=g)
    ]
    callback = GradscopeCallback(flush_every=3, **sinks)
    args = transformers.TrainingArguments(
        output_dir=str(folder),
        max_steps=STEPS,
        per_device_train_batch_size=4,
        learning_rate=1e-3,
        max_grad_norm=0.5,
        logging_steps=1000,
        save_strategy="no",
        report_to=[],
        use_cpu=True,
        disable_tqdm=True,
        seed=0,
        torch_compile=compiled,
        torch_compile_backend="aot_eager",
    )
    model = transformers.GPT2LMHeadModel(config)
    model.loss_type = "ForCausalLM"  # else transformers' own warning breaks the graph
    transformers.Trainer(model=model, args=args, train_dataset=rows, callbacks=[callback]).train()
    return callback.report


def test_a_compiled_hf_trainer_under_the_callback_with_a_sink(received, tmp_path):
    got, sinks = received
    # the sinks write in a process of their own: which are on changes nothing the
    # compiled graph sees (test_compiled_sinks.py's first test has every one)
    sinks = {"tensorboard": sinks["tensorboard"]}
    report, counted = compiled_counts(lambda: _trained(True, sinks, tmp_path / "c"))
    assert counted == ({}, 1, {}), counted
    assert report.run.unwritten == () and len(report.run.steps) == STEPS
    compiled = dict(got)
    got.clear()
    plain = _trained(False, {"tensorboard": str(tmp_path / "plain")}, tmp_path / "p")
    assert plain.run.unwritten == ()
    same_series(compiled, got["TensorboardSink"])


def _looped(compiled: bool, sinks: dict):
    import torch

    from gradscope.integrations.accelerate import GradscopeTracker

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 4))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    tracker = GradscopeTracker(flush_every=3, **sinks)
    acc = accelerate.Accelerator(
        cpu=True, log_with=[tracker], dynamo_backend="aot_eager" if compiled else "no"
    )
    model, opt = acc.prepare(model, opt)
    acc.init_trackers("compiled")
    g = torch.Generator().manual_seed(1)
    for i in range(STEPS):
        x = torch.randn(16, 8, generator=g)
        loss = torch.nn.functional.cross_entropy(model(x), x[:, :4].argmax(1))
        acc.backward(loss)
        acc.clip_grad_norm_(model.parameters(), 0.5)
        opt.step()
        opt.zero_grad()
        acc.log({"loss": float(loss)}, step=i)
    acc.end_training()
    return tracker.report


def test_a_compiled_accelerate_loop_under_the_tracker_with_a_sink(received, tmp_path):
    got, sinks = received
    # the sinks write in a process of their own: which are on changes nothing the
    # compiled graph sees (test_compiled_sinks.py's first test has every one)
    sinks = {"tensorboard": sinks["tensorboard"]}
    report, counted = compiled_counts(lambda: _looped(True, sinks))
    assert counted == ({}, 1, {}), counted
    assert report.run.unwritten == () and len(report.run.steps) == STEPS
    compiled = dict(got)
    got.clear()
    plain = _looped(False, {"tensorboard": str(tmp_path / "plain")})
    assert plain.run.unwritten == ()
    same_series(compiled, got["TensorboardSink"])
