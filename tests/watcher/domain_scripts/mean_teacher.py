"""Mean Teacher: an EMA copy of the student gives the consistency target under no_grad.
argv: "detached" (the teacher's parameters detached, the default), "in_opt" (the teacher
left requiring grad and handed to the optimizer with the student: it gets no gradient, the
optimizer skips it, the EMA moves it), bug "frozen_ema" (the teacher in the optimizer and
its EMA update forgotten: nothing moves it)."""

import copy
import sys

import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)
MODE = sys.argv[1] if len(sys.argv) > 1 else "detached"
D, C = 8, 3
W = torch.randn(D, C)
student = nn.Sequential(nn.Linear(D, 16), nn.ReLU(), nn.Linear(16, C))
teacher = copy.deepcopy(student)
params = list(student.parameters())
if MODE == "detached":
    for p in teacher.parameters():
        p.detach_()
else:
    params += list(teacher.parameters())
opt = torch.optim.Adam(params, lr=1e-2)
for _step in range(30):
    x = torch.randn(32, D)
    y = (x @ W).argmax(1)
    s = student(x + 0.1 * torch.randn_like(x))
    with torch.no_grad():
        t = teacher(x + 0.1 * torch.randn_like(x))
    loss = F.cross_entropy(s[:8], y[:8]) + F.mse_loss(s.softmax(1), t.softmax(1))
    opt.zero_grad()
    loss.backward()
    opt.step()
    if MODE != "frozen_ema":
        with torch.no_grad():
            for tp, sp in zip(teacher.parameters(), student.parameters(), strict=True):
                tp.mul_(0.9).add_(sp, alpha=0.1)
