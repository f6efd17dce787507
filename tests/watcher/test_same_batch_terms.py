"""GS443 on a loss of several terms: a TTS decoder's mel MSE plus its stop-token BCE, whose
0/1 labels come from the utterances' lengths and repeat whenever the lengths do
(fixed-length crops, a bucketed loader), and which the walk from the loss meets first. The
nearest term's targets repeating says nothing while the mel frames, the other term's
targets, change: silent. The same mel batch every step too (one batch trained over and over)
is still named."""

from __future__ import annotations

import torch
import torch.nn.functional as F

import gradscope


def _tts(one_batch: bool):
    torch.manual_seed(0)
    decoder, postnet, gate = torch.nn.Linear(6, 6), torch.nn.Linear(6, 6), torch.nn.Linear(6, 1)
    params = [*decoder.parameters(), *postnet.parameters(), *gate.parameters()]
    opt = torch.optim.Adam(params, 1e-3)
    lengths = torch.tensor([8, 6, 5, 3])
    stop = (torch.arange(8)[None] >= lengths[:, None] - 1).float()  # same lengths every step
    fixed = torch.randn(4, 8, 6)
    with gradscope.watch() as w:
        for _ in range(6):
            mel = fixed if one_batch else torch.randn(4, 8, 6)
            prev = torch.cat([torch.zeros(4, 1, 6), mel[:, :-1]], 1)  # teacher forcing
            h = decoder(prev)
            post = h + postnet(h)
            mel_loss = F.mse_loss(h, mel) + F.mse_loss(post, mel)  # before and after the postnet
            loss = mel_loss + F.binary_cross_entropy_with_logits(gate(h).squeeze(-1), stop)
            opt.zero_grad()
            loss.backward()
            opt.step()
    return {f.rule: f for f in w.report.findings}


def test_stop_labels_that_repeat_beside_new_mel_frames_are_no_same_batch():
    assert "GS443" not in _tts(one_batch=False)


def test_the_same_mel_batch_every_step_is_still_named():
    f = _tts(one_batch=True)["GS443"]
    assert "targets were the same at every pair of consecutive steps" in f.message
