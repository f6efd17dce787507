"""Real training code under watch, step by step against the independent oracle: every true
update seen (optimizer steps, LBFGS closures, hand-written `p.data.add_` updates), with
the loss and the gradient norms the oracle measured in a plain run of the same seeded
script."""

from __future__ import annotations

import math

import pytest

from . import runs

pytestmark = pytest.mark.slow

RTOL = 1e-4
"""watch takes a float32 tensor's norm in float32 on the CPU (a float64 norm copies the
tensor: 10x the cost), which is good to about sqrt(n) float32 roundings: 2.7e-5 for
mnist's 1.18M-element fc1.weight against the oracle's float64. Norms that overflow or
underflow float32 are redone in float64, so nothing is off by more than that."""

COMPARED = [
    "nanogpt",  # AdamW, clip_grad_norm_ after a disabled GradScaler's unscale_, lr schedule
    "nanogpt-accum",  # the same with 4 backward calls (loss / 4) per step
    "mingpt",  # AdamW in two param groups, model.zero_grad, clip
    "dcgan",  # two Adam optimizers, D stepping on two backward calls
    "word-lm",  # hand-written update p.data.add_(p.grad, alpha=-lr) after clip 0.25
    "word-lm-adamw",  # the same script with its --use-optimizer switch
    "sine-lbfgs",  # LBFGS with a closure, float64 model
    "vae",  # loss reduced by sum (large loss and gradient norms)
    "mnist",  # Adadelta + StepLR
]


def _close(a: float | None, b: float | None) -> bool:
    if a is None or b is None:
        return a is b
    return math.isclose(a, b, rel_tol=RTOL, abs_tol=1e-12)


@pytest.mark.parametrize("name", COMPARED)
def test_every_true_step_is_seen(name):
    truth = runs.plain(name)
    run = runs.watched(name).run
    assert truth, "the oracle saw no step: the fixture is broken"
    assert run.status == "completed", run.error
    assert len(run.steps) == len(truth), f"watch saw {len(run.steps)} of {len(truth)} steps"
    assert [run.optimizers[r.optimizer] for r in run.steps] == [t.kind for t in truth]


@pytest.mark.parametrize("name", COMPARED)
def test_loss_and_gradient_norms_match_the_oracle_at_every_step(name):
    truth = runs.plain(name)
    run = runs.watched(name).run
    assert run.steps, "watch saw no step"
    wrong = []
    for t, r in zip(truth, run.steps, strict=False):
        members = run.members[r.optimizer] if r.optimizer < len(run.members) else ()
        mine = sorted(
            (
                v
                for i, v in enumerate(r.param_norms)
                if v is not None and (not members or i in members)
            ),
            reverse=True,
        )
        if not _close(r.loss, t.loss):
            wrong.append(f"step {t.step}: loss {r.loss!r}, oracle {t.loss!r}")
        if not _close(r.grad_norm, t.grad_norm):
            wrong.append(f"step {t.step}: grad norm {r.grad_norm!r}, oracle {t.grad_norm!r}")
        if len(mine) != len(t.param_norms) or not all(
            _close(a, b) for a, b in zip(mine, t.param_norms, strict=True)
        ):
            wrong.append(f"step {t.step}: per-parameter norms differ from the oracle's")
    assert not wrong, f"{len(wrong)} mismatches; first: " + "; ".join(wrong[:4])


def test_accumulated_backward_calls_are_one_step():
    run = runs.watched("nanogpt-accum").run
    assert {r.backward_calls for r in run.steps} == {4}
    assert run.backward_calls == 4 * len(run.steps)
