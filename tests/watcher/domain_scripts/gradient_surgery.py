"""Multi-task learning on one shared trunk and two heads (a classification and a
regression task), the tasks' gradients combined by hand. argv[1]:

pcgrad     PCGrad as its reference wrapper runs it: for each task `zero_grad()`, then
           `loss.backward(retain_graph=True)` and the gradients copied; the conflicting
           parts projected away and the sum written into `.grad`, then `step()`
cagrad     CAGrad as Nash-MTL's code runs it: each task's gradient read as in `pcgrad`, the
           task weights found by 20 steps of a fresh SGD on a small convex objective (run
           to its minimum), the combined gradient written into `.grad`
gradnorm   GradNorm: the weighted task loss's backward, then the task weights' own
           optimizer reset and stepped on the gradient-norm loss (create_graph)
gradnorm-assigned  the same, the weights' gradient assigned from `torch.autograd.grad`
           (their optimizer never resets them: the assignment replaces what the weighted
           loss's backward added)
gan-order  a GAN whose discriminator's gradients are reset after the generator's backward,
           both stepped at the end
wiped      (bug) PCGrad's loop without the projection: `zero_grad()` before each task's
           backward, then `step()`: only the last task trains
gradnorm-no-reset  (bug) `gradnorm-assigned` with the model's `opt.zero_grad()` missing
gan-accumulated  (bug) `gan-order` with the discriminator's loss over two micro-batches
           and its `zero_grad()` inside their loop
averaged   (bug) accumulation with `zero_grad()` inside the loop, the gradient then divided
           by hand (`p.grad = p.grad / 2`)"""

import sys

import torch
import torch.nn.functional as F
from torch import nn

MODE = sys.argv[1] if len(sys.argv) > 1 else "pcgrad"
torch.manual_seed(0)
D = 12
W1, W2 = torch.randn(D), torch.randn(D)
trunk = nn.Sequential(nn.Linear(D, 32), nn.ReLU())
heads = nn.ModuleList([nn.Linear(32, 2), nn.Linear(32, 1)])
model = nn.Sequential(trunk, heads)
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
params = list(model.parameters())


def task_losses(x):
    z = trunk(x)
    y_cls, y_reg = (x @ W1 > 0).long(), 0.5 * (x @ W2).unsqueeze(1)
    return [F.cross_entropy(heads[0](z), y_cls), F.mse_loss(heads[1](z), y_reg)]


def flat_grads():
    return torch.cat(
        [(p.grad if p.grad is not None else torch.zeros_like(p)).flatten() for p in params]
    )


def pcgrad(x):
    grads = []
    for loss in task_losses(x):
        opt.zero_grad(set_to_none=True)
        loss.backward(retain_graph=True)
        grads.append(flat_grads())
    projected = [g.clone() for g in grads]
    for g_i in projected:
        for g_j in grads:
            dot = g_i @ g_j
            if dot < 0:
                g_i -= dot * g_j / g_j.norm() ** 2
    merged, start = sum(projected), 0
    for p in params:
        p.grad = merged[start : start + p.numel()].view_as(p).clone()
        start += p.numel()
    opt.step()


def cagrad(x, c=0.4):
    shared, grads, head_grads = list(trunk.parameters()), [], []
    for loss in task_losses(x):
        opt.zero_grad(set_to_none=True)
        loss.backward(retain_graph=True)
        grads.append(torch.cat([p.grad.flatten() for p in shared]))
        head_grads.append([p.grad for p in heads.parameters()])
    g = torch.stack(grads, 1)
    gg = g.t() @ g
    scale = c * (gg.mean() + 1e-8).sqrt()
    w = torch.zeros(2, requires_grad=True)
    w_opt = torch.optim.SGD([w], lr=25, momentum=0.5)
    for _ in range(20):
        w_opt.zero_grad()
        ww = torch.softmax(w, 0)
        (ww @ gg @ torch.full((2,), 0.5) + scale * (ww @ gg @ ww + 1e-8).sqrt()).backward()
        w_opt.step()
    gw = g @ torch.softmax(w, 0).detach()
    merged, start = (g.mean(1) + scale / (gw.norm() + 1e-8) * gw) / (1 + c**2), 0
    for p in shared:
        p.grad = merged[start : start + p.numel()].view_as(p).clone()
        start += p.numel()
    for p, *per_task in zip(heads.parameters(), *head_grads, strict=True):
        p.grad = sum(t for t in per_task if t is not None)
    opt.step()


weights = nn.Parameter(torch.ones(2))
opt_w = torch.optim.Adam([weights], lr=1e-2)
first = None


def gradnorm(x):
    global first
    losses = torch.stack(task_losses(x))
    first = losses.detach() if first is None else first
    if MODE != "gradnorm-no-reset":
        opt.zero_grad()
    (weights @ losses).backward(retain_graph=True)
    norms = torch.stack(
        [
            torch.autograd.grad(
                weights[i] * losses[i], trunk[0].weight, retain_graph=True, create_graph=True
            )[0].norm()
            for i in range(2)
        ]
    )
    rate = losses.detach() / first
    target = (norms.mean() * (rate / rate.mean()) ** 1.5).detach()
    gn_loss = (norms - target).abs().sum()
    if MODE == "gradnorm":
        opt_w.zero_grad()  # the weighted loss's gradient of the weights is not theirs
        gn_loss.backward()
    else:  # their gradient assigned: opt_w never resets (nor, in the bug, opt)
        (weights.grad,) = torch.autograd.grad(gn_loss, [weights])
    opt.step()
    opt_w.step()
    with torch.no_grad():
        weights.mul_(2 / weights.sum())


G = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 2))
Dis = nn.Sequential(nn.Linear(2, 16), nn.LeakyReLU(0.2), nn.Linear(16, 1))
opt_g = torch.optim.Adam(G.parameters(), 2e-4, betas=(0.5, 0.999))
opt_d = torch.optim.Adam(Dis.parameters(), 2e-4, betas=(0.5, 0.999))


def gan_order(x):
    fake = G(torch.randn(32, 4))
    ones, zeros = torch.ones(32, 1), torch.zeros(32, 1)
    opt_g.zero_grad()
    F.binary_cross_entropy_with_logits(Dis(fake), ones).backward()
    opt_d.zero_grad()  # the generator's backward filled them: not the discriminator's loss
    real = x[:, :2] * 0.5 + 1
    (
        F.binary_cross_entropy_with_logits(Dis(real), ones)
        + F.binary_cross_entropy_with_logits(Dis(fake.detach()), zeros)
    ).backward()
    opt_g.step()
    opt_d.step()


def gan_accumulated(x):
    fake = G(torch.randn(32, 4))
    opt_g.zero_grad()
    F.binary_cross_entropy_with_logits(Dis(fake), torch.ones(32, 1)).backward()
    for real, fake_half in zip(x[:, :2].chunk(2), fake.detach().chunk(2), strict=True):
        opt_d.zero_grad()  # the bug: inside the discriminator's accumulation loop
        ones, zeros = torch.ones(16, 1), torch.zeros(16, 1)
        d_loss = F.binary_cross_entropy_with_logits(Dis(real * 0.5 + 1), ones)
        (d_loss + F.binary_cross_entropy_with_logits(Dis(fake_half), zeros)).backward()
    opt_g.step()
    opt_d.step()


def wiped(x):
    for loss in task_losses(x):
        opt.zero_grad()
        loss.backward(retain_graph=True)
    opt.step()


def averaged(x):
    for xm in x.chunk(2):
        opt.zero_grad()
        sum(task_losses(xm)).backward()
    for p in params:
        p.grad = p.grad / 2
    opt.step()


train = {
    "pcgrad": pcgrad,
    "cagrad": cagrad,
    "gradnorm": gradnorm,
    "gradnorm-assigned": gradnorm,
    "gradnorm-no-reset": gradnorm,
    "gan-order": gan_order,
    "gan-accumulated": gan_accumulated,
    "wiped": wiped,
    "averaged": averaged,
}[MODE]
for _step in range(6 if MODE == "cagrad" else 30):  # CAGrad: 21 steps each
    train(torch.randn(32, D))
