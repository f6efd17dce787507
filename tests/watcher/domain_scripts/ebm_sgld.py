"""Energy-based models trained on samples of short-run SGLD (JEM, IGEBM): a replay buffer of
samples (95% reused, 5% fresh noise), the samples' gradient by torch.autograd.grad under
torch.enable_grad, the samples `requires_grad_` each chain. argv[1]:

jem         JEM: a classifier's logsumexp is the negative energy; CE + E(x+) - E(x-),
            the sampler under f.eval() (JEM's sample_q)
cd          contrastive divergence on an energy MLP with alpha * (E+^2 + E-^2) (IGEBM),
            the energy's input gradient taken under torch.enable_grad
bugs:
attached    cd, the chain advanced out of place and written back to the buffer attached:
            the next chain starts from it, and step 3's backward dies on step 2's graph
sign        cd, SGLD climbs the energy (x + step * dE/dx): no gradient tells it (silent)"""

import sys

import torch
from torch import nn

MODE = sys.argv[1] if len(sys.argv) > 1 else "jem"
torch.manual_seed(0)
DIM, N_CLS, BS, STEPS = 2, 4, 32, 20


def data(n):
    y = torch.randint(0, N_CLS, (n,))
    angle = y.float() * (2 * torch.pi / N_CLS)
    centre = torch.stack([angle.cos(), angle.sin()], -1) * 2
    return centre + 0.3 * torch.randn(n, DIM), y


if MODE == "jem":
    f = nn.Sequential(
        nn.Linear(DIM, 64), nn.SiLU(), nn.Linear(64, 64), nn.SiLU(), nn.Linear(64, N_CLS)
    )

    def energy(x):
        return -f(x).logsumexp(-1)
else:
    f = nn.Sequential(nn.Linear(DIM, 64), nn.SiLU(), nn.Linear(64, 64), nn.SiLU(), nn.Linear(64, 1))

    def energy(x):
        return f(x).squeeze(-1)


opt = torch.optim.Adam(f.parameters(), lr=1e-3, betas=(0.0, 0.999))
buffer = torch.rand(1000, DIM) * 6 - 3


def init_samples():
    idx = torch.randint(0, len(buffer), (BS,))
    x = buffer[idx]
    fresh = (torch.rand(BS) < 0.05)[:, None]
    return torch.where(fresh, torch.rand(BS, DIM) * 6 - 3, x), idx


def sgld_jem(n_steps=10, lr=1.0, std=0.01):
    f.eval()
    x0, idx = init_samples()
    x_k = x0.clone().requires_grad_(True)
    for _ in range(n_steps):
        grad = torch.autograd.grad(-energy(x_k).sum(), [x_k], retain_graph=True)[0]
        x_k.data += lr * grad + std * torch.randn_like(x_k)
    f.train()
    final = x_k.detach()
    buffer[idx] = final
    return final


def sgld_cd(n_steps=10, step=0.1, noise=0.005):
    global buffer
    x_k, idx = init_samples()
    if MODE != "attached":
        x_k = x_k.detach()
    x_k.requires_grad_(True)
    sign = 1.0 if MODE == "sign" else -1.0
    for _ in range(n_steps):
        with torch.enable_grad():
            grad = torch.autograd.grad(energy(x_k).sum(), x_k)[0]
        if MODE == "attached":
            x_k = x_k + sign * step * grad.clamp(-0.1, 0.1) + noise * torch.randn_like(x_k)
        else:
            x_k.data.add_(sign * step * grad.clamp(-0.1, 0.1) + noise * torch.randn_like(x_k))
    if MODE == "attached":
        buffer = buffer.index_put((idx,), x_k)
        return x_k
    buffer[idx] = x_k.detach()
    return x_k.detach()


for _ in range(STEPS):
    x_pos, y = data(BS)
    if MODE == "jem":
        x_neg = sgld_jem()
        logits = f(x_pos)
        loss = nn.functional.cross_entropy(logits, y) + energy(x_pos).mean() - energy(x_neg).mean()
    else:
        x_neg = sgld_cd()
        e_pos, e_neg = energy(x_pos), energy(x_neg)
        loss = e_pos.mean() - e_neg.mean() + 0.1 * (e_pos**2 + e_neg**2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
