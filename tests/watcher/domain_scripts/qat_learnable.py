"""Quantization-aware training from a float model with torch.ao's learnable fake quantizer
(`_LearnableFakeQuantize`, LSQ+: each quantizer's scale and zero point are parameters):
the float MLP trains first, then is fused, given a QConfig of learnable quantizers
(weights symmetric int8, activations affine uint8), prepared for QAT and trained under an
optimizer built after prepare_qat; the observers are disabled partway, from which step the
scales learn alone. A symmetric quantizer resets its zero point to 0 at each forward, and
its gradient comes only from weights clipped at the range's edge: none once the scale
learns.

argv: `healthy`; bug `opt-before` (the float model's optimizer kept for QAT: the
quantizers' scales and zero points are in no optimizer).
"""

import sys
import warnings

import torch
import torch.ao.quantization as tq
from torch import nn
from torch.ao.quantization._learnable_fake_quantize import _LearnableFakeQuantize

warnings.filterwarnings("ignore")
torch.manual_seed(1)
MODE = sys.argv[1] if len(sys.argv) > 1 else "healthy"


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.quant = tq.QuantStub()
        self.fc1, self.relu1 = nn.Linear(16, 32), nn.ReLU()
        self.fc2, self.relu2 = nn.Linear(32, 32), nn.ReLU()
        self.fc3 = nn.Linear(32, 4)
        self.dequant = tq.DeQuantStub()

    def forward(self, x):
        x = self.relu2(self.fc2(self.relu1(self.fc1(self.quant(x)))))
        return self.dequant(self.fc3(x))


def learnable(lo, hi, dtype, scheme):
    return _LearnableFakeQuantize.with_args(
        observer=tq.MovingAverageMinMaxObserver,
        quant_min=lo,
        quant_max=hi,
        dtype=dtype,
        qscheme=scheme,
        use_grad_scaling=True,
    )


w = torch.randn(16, 4)


def train(model, opt, steps, disable_at=None):
    for step in range(steps):
        if step == disable_at:
            model.apply(tq.disable_observer)
        x = torch.randn(64, 16)
        loss = nn.functional.cross_entropy(model(x), (x @ w).argmax(1))
        opt.zero_grad()
        loss.backward()
        opt.step()


model = Net()
opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
train(model, opt, 30)
tq.fuse_modules_qat(model, [["fc1", "relu1"], ["fc2", "relu2"]], inplace=True)
model.qconfig = tq.QConfig(
    activation=learnable(0, 255, torch.quint8, torch.per_tensor_affine),
    weight=learnable(-128, 127, torch.qint8, torch.per_tensor_symmetric),
)
tq.prepare_qat(model, inplace=True)
if MODE != "opt-before":
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
train(model, opt, 70, disable_at=20)
