# Diffusion distillation in one script (progressive distillation, Salimans & Ho 2022): a teacher
# x-prediction denoiser trained by its own optimizer, then a student (its copy) trained to match two
# DDIM steps of the teacher in one, the teacher's targets taken at every step.
# argv: healthy (the teacher frozen by requires_grad_(False), its targets under no_grad);
# no-grad (the teacher left trainable, its targets under no_grad: its last .grad stays, unchanged);
# teacher-grad (bug: the teacher left trainable and called with gradients: the backward goes
# through it at every student step, after its optimizer's last step).
import copy
import math
import sys

import torch
import torch.nn as nn

torch.manual_seed(0)
MODE = sys.argv[1] if len(sys.argv) > 1 else "healthy"
teacher = nn.Sequential(nn.Linear(3, 32), nn.SiLU(), nn.Linear(32, 2))
modes = torch.tensor([[1.0, 0.0], [0.0, 1.0], [-1.0, 0.0], [0.0, -1.0]])


def data(n):
    return modes[torch.randint(0, 4, (n,))] + 0.05 * torch.randn(n, 2)


def alpha_sigma(t):
    return torch.cos(t * math.pi / 2), torch.sin(t * math.pi / 2)


def ddim(net, z, t, t2):
    a, s = alpha_sigma(t)
    a2, s2 = alpha_sigma(t2)
    xh = net(torch.cat([z, t], 1))
    return a2 * xh + s2 * (z - a * xh) / s


topt = torch.optim.Adam(teacher.parameters(), lr=2e-3)
for _ in range(20):
    x, t = data(64), torch.rand(64, 1)
    a, s = alpha_sigma(t)
    loss = ((teacher(torch.cat([a * x + s * torch.randn_like(x), t], 1)) - x) ** 2).mean()
    topt.zero_grad()
    loss.backward()
    topt.step()
student = copy.deepcopy(teacher)
if MODE == "healthy":
    teacher.requires_grad_(False)
opt = torch.optim.Adam(student.parameters(), lr=5e-4)
for _ in range(20):
    x, t = data(64), torch.randint(1, 5, (64, 1)) / 4
    a, s = alpha_sigma(t)
    z = a * x + s * torch.randn_like(x)
    with torch.set_grad_enabled(MODE == "teacher-grad"):
        z2 = ddim(teacher, ddim(teacher, z, t, t - 1 / 8), t - 1 / 8, t - 2 / 8)
    a2, s2 = alpha_sigma(t - 2 / 8)
    target = (z2 - (s2 / s) * z) / (a2 - (s2 / s) * a)
    w = torch.clamp(a**2 / s**2, max=5.0)
    loss = (w * (student(torch.cat([z, t], 1)) - target) ** 2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
