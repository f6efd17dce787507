"""A WaveNet-like stack (van den Oord et al. 2016): causal dilated convolutions, gated
activations, a residual and a skip 1x1 convolution per block, the output read from the sum of
the skips only, so the last block's residual convolution is computed and never used (as in
many WaveNet implementations); next-sample cross-entropy on a quantised sine."""

import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)


class CausalConv1d(nn.Conv1d):
    def __init__(self, cin, cout, k, dilation):
        super().__init__(cin, cout, k, dilation=dilation)
        self.pad = (k - 1) * dilation

    def forward(self, x):
        return super().forward(F.pad(x, (self.pad, 0)))


class WaveNet(nn.Module):
    def __init__(self, q=8, ch=8, blocks=3):
        super().__init__()
        self.emb = nn.Embedding(q, ch)
        self.filt = nn.ModuleList(CausalConv1d(ch, ch, 2, 2**i) for i in range(blocks))
        self.gate = nn.ModuleList(CausalConv1d(ch, ch, 2, 2**i) for i in range(blocks))
        self.res = nn.ModuleList(nn.Conv1d(ch, ch, 1) for _ in range(blocks))
        self.skip = nn.ModuleList(nn.Conv1d(ch, ch, 1) for _ in range(blocks))
        self.out = nn.Sequential(nn.ReLU(), nn.Conv1d(ch, q, 1))

    def forward(self, x):
        h, s = self.emb(x).transpose(1, 2), 0
        for f, g, r, k in zip(self.filt, self.gate, self.res, self.skip, strict=True):
            z = torch.tanh(f(h)) * torch.sigmoid(g(h))
            h, s = h + r(z), s + k(z)
        return self.out(s)


net = WaveNet()
opt = torch.optim.Adam(net.parameters(), lr=3e-3)
t = torch.arange(33).float()
for _step in range(20):
    x = ((torch.sin(t * 0.3 + torch.rand(8, 1) * 6.28) + 1) * 3.99).long()
    loss = F.cross_entropy(net(x[:, :-1]), x[:, 1:])
    opt.zero_grad()
    loss.backward()
    opt.step()
