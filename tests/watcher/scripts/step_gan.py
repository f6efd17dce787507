# Several optimizers. healthy: the stock pytorch/examples DCGAN loop (errG's backward also
# writes D's gradients); no_zero_d: the same without netD.zero_grad(); disjoint: two
# optimizers over two parts of one model; accumulate: 4 micro-batches per step, grads
# zeroed by hand (zero_) or with zero_grad(). Writes per step what it used to --out.
import argparse

import step_oracle as oracle
import torch
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--case", required=True)
parser.add_argument("--out", required=True)
args = parser.parse_args()
torch.manual_seed(0)
seen = []


class Generator(nn.Sequential):
    pass


class Discriminator(nn.Sequential):
    pass


def carried(named, state):
    """Before a backward: the smallest norm of these gradients since their optimizer's
    step, or None once one of them was None."""
    if state.get("reset"):
        return
    values = [p.grad for _, p in named]
    if any(g is None for g in values):
        state["reset"] = True
        state.pop("min", None)
        return
    n = oracle.total(oracle.norm(g) for g in values)
    state["min"] = min(state.get("min", n), n)


def backward(loss, watched):
    for named, state in watched:
        carried(named, state)
    loss.backward()


def step(opt, index, named, state, loss, calls, watched):
    before = oracle.weights(named)
    norms = oracle.grads(named)
    opt.step()
    seen.append(
        {
            "optimizer": index,
            "params": norms,
            "grad_norm": oracle.total(norms.values()),
            "loss": loss,
            "calls": calls,
            "carried": state.get("min"),
            "update": oracle.update(before, named),
        }
    )
    state.clear()
    state["stepped"] = True
    if (named, state) not in watched:
        watched.append((named, state))


def named_of(prefix, module):
    return [(prefix + n, p) for n, p in module.named_parameters()]


bce = nn.BCEWithLogitsLoss()
case = args.case
watched: list = []
if case in ("healthy", "no_zero_d"):
    netG = Generator(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 8))
    netD = Discriminator(nn.Linear(8, 16), nn.LeakyReLU(0.2), nn.Linear(16, 1))
    optD = torch.optim.Adam(netD.parameters(), lr=2e-4, betas=(0.5, 0.999))
    optG = torch.optim.Adam(netG.parameters(), lr=2e-4, betas=(0.5, 0.999))
    gD, gG = named_of("Discriminator.", netD), named_of("Generator.", netG)
    sD, sG = {}, {}
    for _i in range(6):
        real = torch.randn(8, 8)
        if case == "healthy":
            netD.zero_grad()
        errD_real = bce(netD(real), torch.ones(8, 1))
        backward(errD_real, watched)
        fake = netG(torch.randn(8, 4))
        errD_fake = bce(netD(fake.detach()), torch.zeros(8, 1))
        backward(errD_fake, watched)
        step(optD, 0, gD, sD, errD_real.item() + errD_fake.item(), 2, watched)
        netG.zero_grad()
        errG = bce(netD(fake), torch.ones(8, 1))
        backward(errG, watched)
        step(optG, 1, gG, sG, errG.item(), 1, watched)
elif case == "disjoint":
    model = nn.Sequential(nn.Linear(6, 12), nn.Tanh(), nn.Linear(12, 2))
    body = [(f"0.{n}", p) for n, p in model[0].named_parameters()]
    head = [(f"2.{n}", p) for n, p in model[2].named_parameters()]
    opt_a = torch.optim.SGD([p for _, p in body], lr=0.05, momentum=0.9)
    opt_b = torch.optim.Adam([p for _, p in head], lr=1e-3)
    sa, sb = {}, {}
    for _i in range(6):
        opt_a.zero_grad()
        opt_b.zero_grad()
        loss = model(torch.randn(5, 6)).pow(2).mean()
        backward(loss, watched)
        step(opt_a, 0, body, sa, loss.item(), 1, watched)
        step(opt_b, 1, head, sb, loss.item(), 1, watched)  # the same backward call
else:  # accumulate_zero_ / accumulate_none
    model = nn.Sequential(nn.Linear(6, 12), nn.Tanh(), nn.Linear(12, 1))
    named = list(model.named_parameters())
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    state = {}
    for _i in range(5):
        total = 0.0
        for _m in range(4):
            loss = model(torch.randn(5, 6)).pow(2).mean() / 4
            backward(loss, watched)
            total += loss.item()
        step(opt, 0, named, state, total, 4, watched)
        if case == "accumulate_zero_":
            for p in model.parameters():
                p.grad.zero_()
        else:
            opt.zero_grad()
oracle.dump(args.out, seen)
