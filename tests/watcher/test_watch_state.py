"""Silent bugs of state, named by their mechanism within two optimizer steps: a model
trained in eval mode (GS440), BatchNorm statistics that never moved (GS441), Adam's eps
above √v̂ (GS442), the same batch every step (GS443); and their healthy look-alikes,
on which they stay silent. Real tiny scripts (a char-level LM with dropout, a classifier
with BatchNorm), transformers models from config, and a GAN."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from watch_scripts import script as script_path
from watch_scripts import watched

from gradscope import api
from gradscope.findings import Severity

OURS = {"GS440", "GS441", "GS442", "GS443", "GS444"}


def rules(report) -> dict[str, list]:
    out: dict[str, list] = {}
    for f in report.findings:
        out.setdefault(f.rule, []).append(f)
    return out


@pytest.mark.parametrize(
    ("script", "case", "steps", "first"),
    [
        ("state_lm.py", "eval-start", "2", 1),  # model.eval() before the loop
        ("state_lm.py", "eval-left", "6", 6),  # the evaluation at step 5 never switches back
        ("state_cls.py", "eval-left", "4", 4),  # the evaluation at step 3, BatchNorm too
    ],
)
def test_a_model_left_in_eval_mode_is_named_at_its_first_step_with_the_eval_line(
    script, case, steps, first
):
    found = rules(watched(script, case, steps))
    (f,) = found["GS440"]
    assert f.severity == Severity.WARNING and f.steps[0] == first
    line = eval_line(script, "    " if case == "eval-start" else "        ")
    assert f"switched by eval() at tests/watcher/scripts/{script}:{line}" in f.message
    assert "model.train()" in f.advice and "dropout module passed inputs" in f.message
    if script == "state_cls.py":
        assert "1 BatchNorm module normalised with running statistics" in f.message
        assert any("BatchNorm1d" in e for e in f.evidence)
    assert report_leads(watched(script, case, steps), "GS440")


def eval_line(script: str, indent: str) -> int:
    """The line of the script's model.eval() call indented by `indent`."""
    lines = open(script_path(script), encoding="utf-8").read().splitlines()
    return next(n + 1 for n, line in enumerate(lines) if line == indent + "model.eval()")


def report_leads(report, rule_id: str) -> bool:
    """The rule's finding comes first: nothing is listed before it."""
    return bool(report.findings) and report.findings[0].rule == rule_id


@pytest.mark.parametrize(
    ("case", "why"),
    [
        ("momentum0", "its momentum is 0"),
        ("frozen-scratch", "in eval mode at every step sampled"),
    ],
)
def test_batchnorm_statistics_that_never_moved_are_named(case, why):
    report = watched("state_cls.py", case, "2")
    found = rules(report)
    (f,) = found["GS441"]
    assert f.subject == "0.1" and "BatchNorm1d" in f.message and why in f.message
    assert set(found) & OURS == {"GS441"} and report_leads(report, "GS441")


@pytest.mark.parametrize(
    ("script", "case", "advice"),
    [
        ("state_lm.py", "eps-large", "lower eps"),  # eps=0.1 on gradients of ~1e-3
        ("state_lm.py", "eps-tiny", "natural scale"),  # the default eps, loss × 1e-9
        ("state_cls.py", "eps-large", "lower eps"),  # eps=1 on a classifier
    ],
)
def test_adam_eps_above_root_v_is_named_within_two_steps(script, case, advice):
    report = watched(script, case, "2")
    (f,) = rules(report)["GS442"]
    assert f.steps == (1, 2) and "is above √v̂ for 100% of the elements" in f.message
    assert advice in f.advice and f.value is not None and f.value > 0.99
    assert report_leads(report, "GS442")


def test_a_loss_stalled_by_a_dominating_eps_points_to_eps_not_the_learning_rate():
    report = watched("state_lm.py", "eps-tiny", "120")
    found = rules(report)
    (cause,) = found["GS442"]
    (stall,) = found["GS415"]
    assert report.findings[0] is cause and stall.explained_by == f"GS442:{cause.subject}"
    assert "adam-eps-dominates (GS442): fix that first" in stall.advice


@pytest.mark.parametrize(
    ("script", "case", "steps", "fell_by"),
    [
        ("state_lm.py", "one-batch", "60", 49),  # fetched once before the loop
        ("state_lm.py", "next-iter", "60", 53),  # next(iter(loader)) inside the loop
        ("state_cls.py", "one-batch", "30", 8),
        ("state_lm.py", "full-batch", "60", 49),  # by design: still said, as information
    ],
)
def test_the_same_batch_every_step_is_information(script, case, steps, fell_by):
    report = watched(script, case, steps)
    (f,) = rules(report)["GS443"]
    assert f.severity == Severity.INFO and f.steps[:3] == (1, 2, 3) and f.steps[-1] == fell_by
    assert "targets were the same at every pair of consecutive steps" in f.message
    assert f"by step {fell_by}: each step trains on one batch" in f.message
    assert "next(iter(loader))" in f.advice and "if this is an overfit test, ignore" in f.advice
    assert report_leads(report, "GS443")


@pytest.mark.parametrize(
    ("script", "case"),
    [
        ("state_lm.py", "one-batch"),
        ("state_lm.py", "next-iter"),
        ("state_lm.py", "full-batch"),
        ("state_cls.py", "one-batch"),
    ],
)
def test_the_same_batch_is_named_at_its_second_repeat_before_the_loss_falls(script, case):
    """Steps 1-2 and 2-3 on identical targets: said at step 3, the loss not yet fallen
    (the mechanism, not its effect); one pair alone (a run of 2 steps) is not yet enough."""
    report = watched(script, case, "3")
    (f,) = rules(report)["GS443"]
    assert f.steps == (1, 2, 3) and "(2-3, 3-4)" not in f.message
    assert "steps compared (1-2, 2-3)" in f.message and "the loss went from" in f.message
    assert report_leads(report, "GS443")
    assert "GS443" not in rules(watched(script, case, "2"))


@pytest.mark.parametrize("case", ["shuffled", "buffer", "few-batches"])
def test_fresh_batches_in_a_reused_buffer_or_shuffled_are_not_one_batch(case):
    """One data_ptr refilled with new values, a shuffled loader, three batches cycled:
    compared by value, each step's targets differ from the last."""
    for steps in ("3", "30"):
        assert "GS443" not in rules(watched("state_lm.py", case, steps))


@pytest.mark.parametrize(
    ("script", "case"),
    [
        ("state_lm.py", "healthy"),  # eval() ... train() every 10 steps
        ("state_lm.py", "eps-ok"),  # eps=1e-4, √v̂ larger still
        ("state_lm.py", "few-batches"),  # three batches cycled
        ("state_lm.py", "low-lr"),  # fine-tuning at lr 1e-5
        ("state_lm.py", "shuffled"),  # a DataLoader with shuffle
        ("state_lm.py", "buffer"),  # new data copied into one reused buffer
        ("state_cls.py", "healthy"),
        ("state_cls.py", "frozen-backbone"),  # pretrained, frozen, BatchNorms in eval
        ("state_cls.py", "norm-eval"),  # pretrained BatchNorms in eval, weights trained
        ("state_cls.py", "contrastive"),  # labels 0..B-1 at every step
        ("state_cls.py", "guess"),  # a no_grad label guess in train mode at every step
        ("state_cls.py", "ema-teacher"),  # an EMA copy with BatchNorm run under no_grad
        ("state_cls.py", "update-bn"),  # swa_utils.update_bn: BatchNorms recalibrated
    ],
)
def test_healthy_look_alikes_stay_silent(script, case):
    report = watched(script, case, "30")
    assert report.run.status == "completed"
    assert report.findings == [], [f.message for f in report.findings]


def test_a_gan_whose_labels_are_the_same_every_step_is_not_one_batch():
    torch.manual_seed(0)
    gen = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 2))
    disc = nn.Sequential(nn.Linear(2, 16), nn.ReLU(), nn.Dropout(0.1), nn.Linear(16, 1))
    opt_g = torch.optim.Adam(gen.parameters(), lr=1e-3)
    opt_d = torch.optim.Adam(disc.parameters(), lr=1e-3)
    labels = torch.cat([torch.ones(16, 1), torch.zeros(16, 1)])
    with api.watch() as w:
        for _ in range(30):
            real, fake = torch.randn(16, 2) + 3, gen(torch.randn(16, 4))
            d_loss = F.binary_cross_entropy_with_logits(
                disc(torch.cat([real, fake.detach()])), labels
            )
            opt_d.zero_grad()
            d_loss.backward()
            opt_d.step()
            disc.eval()  # the generator's step through a discriminator in eval mode
            g_loss = F.binary_cross_entropy_with_logits(disc(fake), torch.ones(16, 1))
            disc.train()
            opt_g.zero_grad()
            g_loss.backward()
            opt_g.step()
    assert not {f.rule for f in w.report.findings} & OURS


def _steps_in_modes(forward_eval: bool, step_eval: bool) -> set[str]:
    """A loop whose forward runs in one mode and whose step() in another (an evaluation
    between backward and step, or a train() just before step)."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.Dropout(0.5), nn.Linear(16, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with api.watch() as w:
        for _ in range(4):
            model.train(not forward_eval)
            loss = F.cross_entropy(model(torch.randn(8, 8)), torch.randint(0, 2, (8,)))
            opt.zero_grad()
            loss.backward()
            model.train(not step_eval)
            if step_eval:
                with torch.no_grad():
                    model(torch.randn(8, 8))  # a validation batch before the step
            opt.step()
    return {f.rule for f in w.report.findings}


def test_the_mode_judged_is_the_one_the_forward_ran_in_not_the_one_at_step():
    assert "GS440" not in _steps_in_modes(forward_eval=False, step_eval=True)
    assert "GS440" in _steps_in_modes(forward_eval=True, step_eval=False)


def test_the_eval_line_is_the_callers_and_the_patch_is_put_back():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.Dropout(0.5), nn.Linear(16, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with api.watch() as w:
        model.eval()  # this line is the one named
        for _ in range(2):
            loss = F.cross_entropy(model(torch.randn(8, 8)), torch.randint(0, 2, (8,)))
            opt.zero_grad()
            loss.backward()
            opt.step()
    (f,) = [f for f in w.report.findings if f.rule == "GS440"]
    assert "test_watch_state.py:" in f.message and f.steps == (1, 2)
    assert nn.Module.train.__module__ == "torch.nn.modules.module"  # put back


def test_a_model_without_dropout_or_batchnorm_in_eval_mode_is_silent():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.LayerNorm(16), nn.Linear(16, 2))
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    model.eval()  # nothing in it behaves otherwise in train mode
    with api.watch() as w:
        for _ in range(3):
            loss = F.cross_entropy(model(torch.randn(8, 8)), torch.randint(0, 2, (8,)))
            opt.zero_grad()
            loss.backward()
            opt.step()
    assert not {f.rule for f in w.report.findings} & OURS


def _bert(labels: int = 3):
    """A tiny BERT classifier; transformers imported here, not at the module's top, where
    its absence skipped every test of the file and its objects slowed every watch's scan
    of the live objects in the tests before these."""
    transformers = pytest.importorskip("transformers")
    config = transformers.BertConfig(
        vocab_size=64,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=32,
        num_labels=labels,
    )
    torch.manual_seed(0)
    return transformers.BertForSequenceClassification(config)


def _train_bert(model, params, steps: int = 4):
    opt = torch.optim.AdamW(params, lr=1e-3)
    g = torch.Generator().manual_seed(0)
    with api.watch() as w:
        for _ in range(steps):
            ids = torch.randint(0, 64, (8, 12), generator=g)
            out = model(input_ids=ids, labels=torch.randint(0, 3, (8,), generator=g))
            opt.zero_grad()
            out.loss.backward()
            opt.step()
    return w.report


@pytest.mark.slow
def test_a_transformers_model_left_in_eval_mode_is_named():
    model = _bert()
    model.eval()  # from_pretrained's default: the script never calls model.train()
    report = _train_bert(model, model.parameters(), steps=2)
    (f,) = [f for f in report.findings if f.rule == "GS440"]
    assert f.subject == "BertForSequenceClassification" and f.steps == (1, 2)
    assert "dropout modules passed inputs" in f.message


@pytest.mark.slow
def test_lora_on_a_transformers_model_in_train_mode_is_silent():
    peft = pytest.importorskip("peft")
    config = peft.LoraConfig(r=4, lora_alpha=8, target_modules=["query", "value"])
    model = peft.get_peft_model(_bert(), config)
    model.train()
    report = _train_bert(model, [p for p in model.parameters() if p.requires_grad])
    assert not {f.rule for f in report.findings} & OURS, [f.message for f in report.findings]


def forward_line(script: str, indent: str) -> int:
    """The line of the script's evaluation forward `model(batch(256)[0])` (or the LM's)."""
    lines = open(script_path(script), encoding="utf-8").read().splitlines()
    return next(
        n + 1
        for n, line in enumerate(lines)
        if line.startswith(indent + "model(")
        or (line.startswith(indent + "F.cross_entropy(model(fixed"))
    )


@pytest.mark.parametrize(
    ("script", "case", "steps", "after", "severity"),
    [
        ("state_cls.py", "eval-train", "4", 3, Severity.WARNING),  # BatchNorm absorbs it
        ("state_cls.py", "eval-inference", "4", 3, Severity.WARNING),  # inference_mode
        ("state_lm.py", "eval-train", "6", 5, Severity.INFO),  # dropout only: noisy numbers
    ],
)
def test_an_evaluation_in_train_mode_is_named_with_its_line(script, case, steps, after, severity):
    """A forward without gradients of the trained model, in train mode, after step
    `after`: named at that step, with the forward's line."""
    report = watched(script, case, steps)
    (f,) = rules(report)["GS444"]
    assert f.severity == severity and f.steps == (after,)
    line = forward_line(script, " " * 12)
    assert f"{script}:{line}, first after step {after}, while in train mode" in f.message
    assert ("BatchNorm 0.1" in f.message) == (severity == Severity.WARNING)
    assert "dropped activations" in f.message and "model.eval() before" in f.advice
    assert report_leads(report, "GS444")
    assert "GS444" in rules(watched(script, case, str(after)))  # the run's last step
    assert "GS444" not in rules(watched(script, case, str(after - 1)))  # before it


def test_an_evaluation_in_train_mode_is_silent_after_eval():
    """model.eval() ... model.train() around the same evaluations: nothing."""
    for script, steps in (("state_cls.py", "30"), ("state_lm.py", "30")):
        assert "GS444" not in rules(watched(script, "healthy", steps))
