"""HuggingFace Trainer (its own loop, accumulation, accelerate's clipping) under watch."""

from __future__ import annotations

import pytest

transformers = pytest.importorskip("transformers")
pytest.importorskip("accelerate")

pytestmark = pytest.mark.slow


def test_trainer_steps_accumulation_and_clipping(tmp_path):
    import torch

    import gradscope

    torch.manual_seed(0)
    config = transformers.GPT2Config(vocab_size=64, n_positions=32, n_embd=32, n_layer=2, n_head=2)
    model = transformers.GPT2LMHeadModel(config)
    tokens = torch.randint(0, 64, (64, 16))
    data = [{"input_ids": t, "labels": t} for t in tokens]
    args = transformers.TrainingArguments(
        output_dir=str(tmp_path),
        max_steps=12,
        per_device_train_batch_size=4,
        gradient_accumulation_steps=2,
        max_grad_norm=1.0,
        learning_rate=1e-3,
        logging_steps=1000,
        save_strategy="no",
        report_to=[],
        use_cpu=True,
        disable_tqdm=True,
    )
    trainer = transformers.Trainer(model=model, args=args, train_dataset=data)
    with gradscope.watch() as w:
        trainer.train()
    steps = w.run.steps
    assert len(steps) == 12
    assert {r.backward_calls for r in steps} == {2}
    assert {r.max_norm for r in steps} == {1.0}
    assert all(r.loss is not None and r.loss > 0 for r in steps)
    names = w.run.names()
    assert "transformer.h.0.attn.c_attn.weight" in names
    assert w.report.findings == [], [f.message for f in w.report.findings]
