"""Eager-mode quantization-aware training as PyTorch's QAT tutorial runs it: QuantStub and
DeQuantStub around the model, Conv1d + BatchNorm1d (+ ReLU) fused for QAT (the last one's
four channels are the class logits, averaged over time), the default QAT qconfig,
prepare_qat; after a few epochs the observers are disabled and the BatchNorms' statistics
frozen (`freeze_bn_stats`: from then on they normalise with running statistics, so each
convolution's bias, whose gradient a batch-statistics BatchNorm cancels, gets its full
gradient from that step on); converted to int8 at the end.

argv: `healthy`; bug `frozen0` (the BatchNorms frozen before the first step: they
normalise with statistics nobody measured, mean 0 and variance 1, for the whole run).
"""

import sys
import warnings

import torch
import torch.ao.quantization as tq
from torch import nn
from torch.ao.nn.intrinsic.qat import freeze_bn_stats

warnings.filterwarnings("ignore")
torch.manual_seed(1)
MODE = sys.argv[1] if len(sys.argv) > 1 else "healthy"


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.quant = tq.QuantStub()
        self.conv1, self.bn1, self.relu1 = (
            nn.Conv1d(2, 16, 3, padding=1),
            nn.BatchNorm1d(16),
            nn.ReLU(),
        )
        self.conv2, self.bn2 = nn.Conv1d(16, 4, 3, padding=1), nn.BatchNorm1d(4)
        self.dequant = tq.DeQuantStub()

    def forward(self, x):
        x = self.relu1(self.bn1(self.conv1(self.quant(x))))
        return self.dequant(self.bn2(self.conv2(x))).mean(-1)


model = Net().train()
tq.fuse_modules_qat(model, [["conv1", "bn1", "relu1"], ["conv2", "bn2"]], inplace=True)
model.qconfig = tq.get_default_qat_qconfig("x86")
tq.prepare_qat(model, inplace=True)
opt = torch.optim.SGD(model.parameters(), lr=0.02, momentum=0.9, weight_decay=1e-4)
if MODE == "frozen0":
    model.apply(freeze_bn_stats)
protos = torch.randn(4, 2, 8)
for epoch in range(5):
    for _ in range(10):
        y = torch.randint(0, 4, (32,))
        loss = nn.functional.cross_entropy(model(protos[y] + torch.randn(32, 2, 8)), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    if epoch >= 3:
        model.apply(tq.disable_observer)
    if epoch >= 2:
        model.apply(freeze_bn_stats)
quantized = tq.convert(model.eval(), inplace=False)
