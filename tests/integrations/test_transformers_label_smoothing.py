"""The HF Trainer's `label_smoothing_factor` (its LabelSmoother, log_softmax over dim=-1):
the watch failed with an internal error in the backward hook at step 1 and judged
nothing, under the callback and under `gradscope watch` alike."""

from __future__ import annotations

import pytest

transformers = pytest.importorskip("transformers")
pytest.importorskip("accelerate")

pytestmark = pytest.mark.slow


def test_a_trainer_with_label_smoothing_is_watched_to_the_end(tmp_path):
    import torch

    from gradscope.integrations.transformers import GradscopeCallback

    torch.manual_seed(0)
    config = transformers.GPT2Config(vocab_size=64, n_positions=32, n_embd=32, n_layer=2, n_head=2)
    model = transformers.GPT2LMHeadModel(config)
    tokens = torch.randint(0, 64, (32, 16))
    data = [{"input_ids": t, "labels": t} for t in tokens]
    args = transformers.TrainingArguments(
        output_dir=str(tmp_path),
        max_steps=6,
        per_device_train_batch_size=4,
        learning_rate=1e-3,
        label_smoothing_factor=0.1,
        save_strategy="no",
        report_to=[],
        use_cpu=True,
        disable_tqdm=True,
        seed=0,
    )
    callback = GradscopeCallback()
    transformers.Trainer(model=model, args=args, train_dataset=data, callbacks=[callback]).train()
    report = callback.watch.report
    assert not report.faults, report.internal_error()
    assert len(report.run.steps) == 6
    kind = report.to_dict()["summary"]["per_optimizer"][0]["loss_kind"]
    assert "label_smoothing" in {t["kind"] for t in kind["terms"]}, kind
