"""A CVAE's KL to the standard normal, written out as ACT (action chunking) and the VAE
examples write it, `-0.5 * (1 + logvar - mu² - exp(logvar))`, or as torch.distributions
computes it: read from the graph as a term bounded below by 0. Subtracted, the run ascends it
(the latent pushed away from its prior) and was given a clean verdict; weighted by 0, the
latent goes unregularised and the policy's sampling at z = 0 reads a latent it never saw,
also in silence. A healthy weight stays silent, and the look-alikes built of the same ops (a
Gaussian NLL, an entropy, a square subtracted) bound nothing."""

from __future__ import annotations

import pytest
import torch
import torch.distributions as D
import torch.nn.functional as F
from torch import nn

import gradscope
from gradscope.findings import Severity
from gradscope.watcher import loss_graph

STEPS = 110  # the loss's kind is read again at step 101
OBS, ACT, CHUNK, LATENT = 4, 2, 3, 2


def _kl(mu: torch.Tensor, logvar: torch.Tensor) -> torch.Tensor:
    return (-0.5 * (1 + logvar - mu.pow(2) - logvar.exp())).sum(1).mean(0)


def _cvae_run(kl_sign: float, kl_weight: float) -> list:
    """A CVAE policy over chunks of actions: encoder (obs, chunk) -> (mu, logvar), decoder
    (z, obs) -> chunk, L1 reconstruction plus the weighted KL."""
    torch.manual_seed(0)
    encoder = nn.Linear(OBS + ACT * CHUNK, 2 * LATENT)
    decoder = nn.Sequential(nn.Linear(LATENT + OBS, 16), nn.ReLU(), nn.Linear(16, ACT * CHUNK))
    opt = torch.optim.AdamW([*encoder.parameters(), *decoder.parameters()], lr=1e-2)
    obs = torch.randn(16, OBS)
    chunk = torch.tanh(obs[:, :ACT]).repeat(1, CHUNK)
    with gradscope.watch() as w:
        for _ in range(STEPS):
            mu, logvar = encoder(torch.cat([obs, chunk], 1)).chunk(2, -1)
            z = mu + (0.5 * logvar).exp() * torch.randn_like(mu)
            l1 = F.l1_loss(decoder(torch.cat([z, obs], 1)), chunk)
            loss = l1 + kl_sign * kl_weight * _kl(mu, logvar)
            opt.zero_grad()
            loss.backward()
            opt.step()
    return w.report.findings


def test_a_subtracted_kl_is_a_bounded_loss_ascended():
    findings = _cvae_run(-1.0, 10.0)
    loud = [f for f in findings if f.severity >= Severity.WARNING and not f.explained_by]
    (found,) = loud  # the gradient's growth (GS404) is explained by it
    assert found.rule == "GS418" and "gaussian-kl" in found.message, findings
    assert "remove the minus sign" in found.advice


def test_a_kl_weighted_by_zero_is_named():
    found = {f.rule: f for f in _cvae_run(1.0, 0.0)}
    assert "GS469" in found and "gaussian-kl" in found["GS469"].message, found
    assert "prior" in found["GS469"].advice and "ramp-up" not in found["GS469"].advice


def test_a_weighted_kl_is_silent():
    assert [f for f in _cvae_run(1.0, 10.0) if f.severity >= Severity.INFO] == []


@pytest.fixture
def latent() -> tuple[torch.Tensor, torch.Tensor]:
    h = torch.randn(4, 6, requires_grad=True)
    mu, logvar = (2.0 * h).chunk(2, -1)
    return mu, logvar


def test_the_kl_s_written_forms_are_read(latent):
    mu, logvar = latent
    std = (0.5 * logvar).exp()
    forms = {
        "l1 (mean) + gaussian-kl (sum) × 10": F.l1_loss(mu, logvar) + 10 * _kl(mu, logvar),
        "gaussian-kl (sum)": 0.5 * (mu * mu + logvar.exp() - logvar - 1).sum(-1).mean(),
        "mse (mean) - gaussian-kl (sum)": F.mse_loss(mu, logvar)
        - D.kl_divergence(D.Normal(mu, std), D.Normal(0.0, 1.0)).sum(),
        "gaussian-kl (mean)": (-0.5 * (1 + 2 * logvar - mu**2 - (2 * logvar).exp())).mean(),
        "gaussian-kl (sum) × 2": (std.pow(2) + mu.pow(2) - 1 - torch.log(std.pow(2))).sum(),
    }
    for described, loss in forms.items():
        assert loss_graph.read(loss).describe() == described


def test_the_look_alikes_are_not_a_kl(latent):
    mu, logvar = latent
    x = torch.randn_like(mu)
    look_alikes = (
        (0.5 * (logvar + (x - mu) ** 2 / logvar.exp())).mean(),  # a Gaussian NLL
        (0.5 * (logvar + (x - mu) ** 2 * torch.exp(-logvar))).mean(),
        -(logvar + 1).mean(),  # an entropy bonus
        (logvar.exp() + logvar - mu.pow(2)).mean(),  # exp(L) + L: no pair
        (logvar.exp() - logvar - mu.pow(2)).mean(),  # a square subtracted: unbounded
        (logvar.exp() - logvar - mu.exp() + mu).mean(),  # two pairs of opposite signs
        ((2 * logvar).exp() - 3 * logvar).mean(),  # exp(2L) beside another multiple of L
    )
    for loss in look_alikes:  # exp(L) - L beside -mu² is read, but bounds nothing
        kind = loss_graph.read(loss)
        assert kind.lower_bound() is None and not kind.negated_terms(), kind.describe()
