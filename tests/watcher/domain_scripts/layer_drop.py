"""LayerDrop (Fan et al. 2019): in training each layer is skipped with probability p by a fresh
draw per batch, so a skipped layer gets no gradient at that step. Modes: `fairseq` (one `if`),
`nested` (transformers' `if self.training:` then `torch.rand([])`), `wav2vec2` (fairseq's
wav2vec 2.0 encoder: the layer called under `if not self.training or draw > p`, in a method
forward calls), `skip-flag` (transformers' wav2vec 2.0: `skip_the_layer = self.training and
draw < p`, then `if not skip_the_layer:`), `stochastic-depth` (each residual block's own
forward returns its input early on a draw, Huang et al. 2016); bugs `odd` (every other
layer skipped by its index, at every step: those layers never train), `odd-call` (the
same, the layer called under `if not self.training or i % 2 == 0`), `odd-blocks` (every
other block returns early by its index)."""

import random
import sys

import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)
random.seed(0)
MODE = sys.argv[1] if len(sys.argv) > 1 else "fairseq"
D, L = 8, 4


class Encoder(nn.Module):
    def __init__(self, p: float = 0.5):
        super().__init__()
        self.layerdrop = p
        self.layers = nn.ModuleList(nn.Linear(D, D) for _ in range(L))


class Fairseq(Encoder):
    def forward(self, x):
        for layer in self.layers:
            if self.training and torch.rand(()) < self.layerdrop:
                continue
            x = x + torch.tanh(layer(x))
        return x


class Nested(Encoder):
    def forward(self, x):
        for layer in self.layers:
            if self.training:
                dropout_probability = torch.rand([])
                if dropout_probability < self.layerdrop:
                    continue
            x = x + torch.tanh(layer(x))
        return x


class Odd(Encoder):
    def forward(self, x):
        noise = torch.rand(()) if self.training else 0.0  # drawn, but not what skips
        for i, layer in enumerate(self.layers):
            if self.training and i % 2:
                continue
            x = x + torch.tanh(layer(x)) + 0 * noise
        return x


class Wav2Vec2(Encoder):
    def forward(self, x):
        return self.extract_features(x)

    def extract_features(self, x):
        for layer in self.layers:
            dropout_probability = random.random() if self.layerdrop > 0 else 1
            if not self.training or (dropout_probability > self.layerdrop):
                x = x + torch.tanh(layer(x))
        return x


class SkipFlag(Encoder):
    def forward(self, x):
        for layer in self.layers:
            dropout_probability = torch.rand([])
            skip_the_layer = self.training and dropout_probability < self.layerdrop
            if not skip_the_layer:
                x = x + torch.tanh(layer(x))
        return x


class OddCall(Encoder):
    def forward(self, x):
        noise = torch.rand(()) if self.training else 0.0  # drawn, but not what skips
        for i, layer in enumerate(self.layers):
            if not self.training or i % 2 == 0:
                x = x + torch.tanh(layer(x)) + 0 * noise
        return x


class Block(nn.Module):
    def __init__(self, index: int, p: float = 0.5):
        super().__init__()
        self.index, self.p = index, p
        self.layer = nn.Linear(D, D)

    def forward(self, x):
        if self.training:
            if torch.rand(1).item() < self.p:
                return x
        return x + torch.tanh(self.layer(x))


class IndexedBlock(Block):
    def forward(self, x):
        noise = torch.rand(()) if self.training else 0.0  # drawn, but not what skips
        if self.training and self.index % 2:
            return x
        return x + torch.tanh(self.layer(x)) + 0 * noise


class Blocks(nn.Module):
    def __init__(self):
        super().__init__()
        kind = IndexedBlock if MODE == "odd-blocks" else Block
        self.layers = nn.ModuleList(kind(i) for i in range(L))

    def forward(self, x):
        for block in self.layers:
            x = block(x)
        return x


ENCODERS = {
    "fairseq": Fairseq,
    "nested": Nested,
    "odd": Odd,
    "wav2vec2": Wav2Vec2,
    "skip-flag": SkipFlag,
    "odd-call": OddCall,
    "stochastic-depth": Blocks,
    "odd-blocks": Blocks,
}
model = nn.Sequential(nn.Linear(4, D), ENCODERS[MODE](), nn.Linear(D, 1))
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
for _step in range(20):
    x = torch.randn(32, 4)
    loss = F.mse_loss(model(x), x.sum(1, keepdim=True))
    opt.zero_grad()
    loss.backward()
    opt.step()
print("final", loss.item())
