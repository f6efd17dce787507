"""A backward that failed on a graph another optimizer's backward freed first (GS459): a
GAN whose discriminator's loss reads the generator's output not detached frees the
generator's graph, and the generator's own backward then dies in autograd. Named as that
(the older graph reaches no weight the step in between updated), not as a hidden state
carried between batches; a hidden state carried across a step of two optimizers (one the
recurrent net's, one the head's) still is; the detached discriminator step stays silent."""

from __future__ import annotations

import contextlib

import pytest
import torch

import gradscope


def _gan(how: str):
    """A least-squares GAN's rounds (the discriminator's step, then the generator's); the
    autograd error, where there is one, ends the script as it would a user's."""
    torch.manual_seed(0)
    g, d = torch.nn.Linear(4, 8), torch.nn.Linear(8, 1)
    opt_g = torch.optim.Adam(g.parameters(), 2e-4, betas=(0.8, 0.99))
    opt_d = torch.optim.Adam(d.parameters(), 2e-4, betas=(0.8, 0.99))
    fails = pytest.raises(RuntimeError, match="second time")
    with fails if how != "detached" else contextlib.nullcontext(), gradscope.watch() as w:
        for _ in range(3):
            real, fake = torch.randn(16, 8), torch.tanh(g(torch.randn(16, 4)))
            recon = fake.abs().log().mean() if how == "with-recon" else 0.0
            seen = fake.detach() if how == "detached" else fake
            loss_d = (1 - d(real)).pow(2).mean() + d(seen).pow(2).mean()
            opt_d.zero_grad()
            loss_d.backward()
            opt_d.step()
            loss_g = (1 - d(fake)).pow(2).mean() + recon
            opt_g.zero_grad()
            loss_g.backward()
            opt_g.step()
    return w.report


def _carried_two_optimizers():
    torch.manual_seed(0)
    rnn, head = torch.nn.GRU(4, 8), torch.nn.Linear(8, 1)
    opt_rnn = torch.optim.SGD(rnn.parameters(), lr=0.1)
    opt_head = torch.optim.SGD(head.parameters(), lr=0.1)
    with gradscope.watch() as w:
        h = torch.zeros(1, 2, 8)
        for _ in range(3):
            out, h = rnn(torch.randn(6, 2, 4), h)  # h never detached
            loss = head(out).pow(2).mean()
            opt_rnn.zero_grad()
            opt_head.zero_grad()
            try:
                loss.backward()
            except RuntimeError:
                break
            opt_rnn.step()
            opt_head.step()
    return w.report


@pytest.mark.parametrize("how", ["plain", "with-recon"])
def test_a_discriminator_loss_on_the_undetached_fake_is_named(how):
    (f,) = [f for f in _gan(how).findings if f.rule == "GS459"]
    assert "the other optimizer's loss reached it too" in f.message
    assert "carried from batch to batch" not in f.message
    assert "fake.detach()" in f.advice


def test_the_detached_discriminator_step_is_silent():
    assert "GS459" not in {f.rule for f in _gan("detached").findings}


def test_a_state_carried_across_two_optimizers_steps_is_still_carried():
    (f,) = [f for f in _carried_two_optimizers().findings if f.rule == "GS459"]
    assert "built at an earlier step" in f.message and "h.detach()" in f.advice


def _step_forgotten(rounds: int):
    """The centers' optimizer (center loss) zeroed every round and never stepped; the
    script dies in round `rounds` after its backward, before the steps."""
    torch.manual_seed(0)
    net, centers = torch.nn.Linear(8, 4), torch.nn.Parameter(torch.randn(3, 4))
    opt, center_opt = torch.optim.SGD(net.parameters(), 0.05), torch.optim.SGD([centers], 0.5)
    with pytest.raises(KeyError), gradscope.watch() as w:
        for round_ in range(1, rounds + 1):
            f, y = net(torch.randn(16, 8)), torch.randint(0, 3, (16,))
            loss = f.pow(2).mean() + 0.01 * (f - centers[y]).pow(2).sum(1).mean()
            opt.zero_grad()
            center_opt.zero_grad()
            loss.backward()
            if round_ == rounds:
                raise KeyError("a bad batch")
            opt.step()
    return w.report


def test_a_step_cut_short_by_the_crash_is_not_called_missing():
    assert "GS411" not in {f.rule for f in _gan("plain").findings}


def test_a_step_missing_round_after_round_is_still_named_when_the_run_ends_early():
    found = [f for f in _step_forgotten(3).findings if f.rule == "GS411"]
    assert found and "whose step() never did" in found[0].message
