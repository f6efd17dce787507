"""Self-distillation with an EMA teacher: BYOL (negative cosine to the teacher's projection)
and DINO (cross-entropy to the teacher's centred, sharpened softmax), the teacher moved by
hand toward the student after each step; a WGAN critic with its weights clipped in place
(written by hand between steps too, no copy of anything). The `*-attached` modes plant the
missing stop-gradient: the teacher's forward without no_grad, its parameters left in the
optimizer; `byol-outside` leaves them out of it (GS411's case). A `-data` suffix writes the
EMA and the clipping through `.data`, as the reference code of DINO, MoCo and BYOL does
(no version counter moves); a `-fixed` suffix never moves the teacher (a frozen copy)."""

import copy
import sys

import torch
import torch.nn.functional as F
from torch import nn

mode = sys.argv[1] if len(sys.argv) > 1 else "byol"
kind, *flags = mode.split("-")
attached = "attached" in flags or "outside" in flags
through_data = "data" in flags
torch.manual_seed(0)
D, N, K, STEPS = 16, 32, 24, 30
protos = torch.randn(10, D)


def views():
    x = protos[torch.randint(0, 10, (N,))]
    return x + 0.3 * torch.randn_like(x), x + 0.3 * torch.randn_like(x)


def mlp(n_in, n_out):
    return nn.Sequential(nn.Linear(n_in, 32), nn.ReLU(), nn.Linear(32, n_out))


if kind == "wgan":
    gen, critic = mlp(8, 2), mlp(2, 1)
    opt_c = torch.optim.RMSprop(critic.parameters(), lr=5e-4)
    for _ in range(STEPS):
        real = torch.randn(N, 2) * 0.5 + 1.0
        loss = critic(gen(torch.randn(N, 8)).detach()).mean() - critic(real).mean()
        opt_c.zero_grad()
        loss.backward()
        opt_c.step()
        with torch.no_grad():
            for p in critic.parameters():
                (p.data if through_data else p).clamp_(-0.05, 0.05)
    sys.exit(0)

student, head = mlp(D, K), mlp(K, K)
teacher = copy.deepcopy(student)
params = [*student.parameters(), *(head.parameters() if kind == "byol" else ())]
if attached and "outside" not in flags:
    params += list(teacher.parameters())  # handed to the optimizer with the student
elif not attached:
    teacher.requires_grad_(False)
opt = torch.optim.SGD(params, lr=0.05, momentum=0.9)
center = torch.zeros(K)
for _ in range(STEPS):
    v1, v2 = views()
    with torch.set_grad_enabled(attached):
        target = teacher(v2)
    if kind == "byol":
        loss = -F.cosine_similarity(head(student(v1)), target, dim=-1).mean()
    else:  # dino: the teacher's centred, sharpened softmax as the student's soft target
        probs = F.softmax((target - center) / 0.04, dim=-1)
        loss = -(probs * F.log_softmax(student(v1) / 0.1, dim=-1)).sum(-1).mean()
        center = 0.9 * center + 0.1 * target.detach().mean(0)
    opt.zero_grad()
    loss.backward()
    opt.step()
    with torch.no_grad():
        for t, s in (
            [] if "fixed" in flags else zip(teacher.parameters(), student.parameters(), strict=True)
        ):
            (t.data if through_data else t).mul_(0.99).add_(s, alpha=0.01)
print("loss", loss.item())
