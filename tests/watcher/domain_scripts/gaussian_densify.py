"""3D Gaussian splatting's loop in 2D (Kerbl et al. 2023): per-point positions, scales,
opacities and colours in one Adam with a param group per attribute, densification and
pruning that swap new tensors into the groups with their Adam state moved over
(`cat_tensors_to_optimizer`, `_prune_optimizer`), an opacity reset. argv[1]: `swap`
(healthy), `grow` (add_param_group for a new attribute, healthy), or the bugs `stale` (new
tensors in the model, the old ones left in the optimizer) and `unused` (new tensors in the
optimizer, the old ones left in the model)."""

import math
import sys

import torch
from torch import nn

torch.manual_seed(0)
MODE = sys.argv[1] if len(sys.argv) > 1 else "swap"
S = 12
ys, xs = torch.meshgrid(torch.linspace(0, 1, S), torch.linspace(0, 1, S), indexing="ij")
grid = torch.stack([xs, ys], -1).reshape(-1, 2)
target = torch.stack(
    [torch.exp(-((grid - c) ** 2).sum(-1) / 0.02) for c in torch.tensor([[0.3, 0.3], [0.7, 0.6]])]
).sum(0)[:, None] * torch.tensor([1.0, 0.4, 0.2])
NAMES = ("xyz", "scaling", "opacity", "color")


def logit(x):
    return torch.log(x / (1 - x))


points = {
    "xyz": nn.Parameter(torch.rand(16, 2)),
    "scaling": nn.Parameter(torch.full((16, 2), math.log(0.08))),
    "opacity": nn.Parameter(logit(torch.full((16, 1), 0.1))),
    "color": nn.Parameter(torch.zeros(16, 3)),
}
lrs = {"xyz": 1.6e-2, "scaling": 5e-3, "opacity": 5e-2, "color": 2.5e-2}
optimizer = torch.optim.Adam(
    [{"params": [points[n]], "lr": lrs[n], "name": n} for n in NAMES], lr=0.0, eps=1e-15
)


def swap_in(new):
    """The new tensors into the groups, each one's Adam state cut or grown to match."""
    for group in (g for g in optimizer.param_groups if g["name"] in new):
        old, tensor = group["params"][0], new[group["name"]]
        state = optimizer.state.pop(old, None)
        group["params"][0] = nn.Parameter(tensor.detach().requires_grad_(True))
        if state is not None:
            for key in ("exp_avg", "exp_avg_sq"):
                state[key] = _fit(state[key], tensor)
            optimizer.state[group["params"][0]] = state
        if MODE != "unused":
            points[group["name"]] = group["params"][0]


def _fit(moment, tensor):
    n = min(len(moment), len(tensor))
    return torch.cat([moment[:n], torch.zeros_like(tensor[n:])])


def densify():
    """Clone the points whose position gradient is above the median; prune the faint."""
    grads = points["xyz"].grad.norm(dim=-1)
    picked = grads >= grads.median()
    new = {
        n: torch.cat([p.detach(), p.detach()[picked] + (0.01 if n == "xyz" else 0.0)])
        for n, p in ((n, points[n]) for n in NAMES)
    }
    keep = torch.sigmoid(new["opacity"][:, 0]) > 0.005
    new = {n: t[keep] for n, t in new.items()}
    if MODE == "stale":  # the model's points replaced, the optimizer left with the old ones
        points.update({n: nn.Parameter(t) for n, t in new.items()})
    else:
        swap_in(new)


def render():
    scale = torch.exp(points["scaling"])
    d = (grid[:, None, :] - points["xyz"][None]) / scale[None]
    w = torch.sigmoid(points["opacity"])[None, :, 0] * torch.exp(-0.5 * (d**2).sum(-1))
    image = w @ torch.sigmoid(points["color"])
    if "gain" in points:
        image = image * points["gain"]
    return image.clamp(0, 1)


first = None
for step in range(1, 61):
    t = step / 60
    optimizer.param_groups[0]["lr"] = math.exp(math.log(1.6e-2) * (1 - t) + math.log(1.6e-4) * t)
    loss = (render() - target).abs().mean()
    loss.backward()
    first = first or loss.item()
    with torch.no_grad():
        if step in (10, 20):
            densify()
        if step == 30 and MODE != "stale":  # opacity reset: a new tensor, its moments zeroed
            old = optimizer.param_groups[2]["params"][0]
            capped = logit(torch.sigmoid(old).clamp(max=0.01))
            swap_in({"opacity": capped})
        if step == 25 and MODE == "grow":  # a new attribute's own group
            points["gain"] = nn.Parameter(torch.ones(1))
            optimizer.add_param_group({"params": [points["gain"]], "lr": 1e-2, "name": "gain"})
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
print(first, loss.item(), len(points["xyz"]))
