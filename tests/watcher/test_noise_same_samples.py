"""The critical batch size (GS430) reads each backward call of a step as an independent
micro-batch. An online learner that calls backward at every time step of one batch of
sequences, each loss against the sequences' labels, and steps once per sequence (e-prop's
accumulate-then-apply) made 40 "micro-batches" of the same 8 samples: GS430 advised fewer
micro-batches, which would drop time steps. Calls whose losses read the very same target
tensor are not measured; a real accumulation of fresh micro-batches still is."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

import gradscope


def _batch_rules(online: bool) -> list[str]:
    torch.manual_seed(0)
    encode, readout = nn.Linear(10, 32), nn.Linear(32, 2)
    opt = torch.optim.Adam([*encode.parameters(), *readout.parameters()], lr=1e-3)
    with gradscope.watch() as w:
        for _ in range(12):
            y = torch.randint(0, 2, (8,))
            rates = 0.05 + 0.4 * (torch.arange(10)[None] % 2 == y[:, None]).float()
            state = torch.zeros(8, 32)
            opt.zero_grad()
            for _ in range(40):
                if not online:  # a fresh micro-batch each call: plain accumulation
                    y = torch.randint(0, 2, (8,))
                    rates = 0.05 + 0.4 * (torch.arange(10)[None] % 2 == y[:, None]).float()
                    state = torch.zeros(8, 32)
                state = 0.9 * state.detach() + encode(torch.bernoulli(rates))
                loss = F.cross_entropy(readout(torch.tanh(state)), y) / 40
                loss.backward()
            opt.step()
    return [f.rule for f in w.report.findings]


def test_backward_at_every_time_step_of_one_batch_is_not_micro_batches():
    assert "GS430" not in _batch_rules(online=True)


def test_fresh_micro_batches_are_still_measured():
    assert "GS430" in _batch_rules(online=False)
