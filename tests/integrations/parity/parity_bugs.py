"""The seeded bugs every host's parity script trains with (torch imported here: the
scripts run it anyway). One tiny regression, 32 steps (the run-level rules judge 10 or
more after their 20 of warm-up), seeded, one thread, CPU."""

from __future__ import annotations

import torch
from torch import nn

STEPS = 32
BUGS = (
    "healthy",
    "no-zero-grad",
    "no-optimizer",
    "amp-skips",
    "clip-binds",
    "lr-high",
    "frozen-in-optimizer",
)
RAISES = {
    "no-zero-grad": {"GS412"},
    "no-optimizer": {"GS411"},
    "amp-skips": {"GS407"},
    "clip-binds": {"GS406"},
    "lr-high": {"GS419"},
    "frozen-in-optimizer": {"GS421"},
}
"""The rule each bug raises (among others), so that a parity means something."""
MAX_NORM = 1e-3
"""clip-binds: far below every step's gradient norm."""


def lr(bug: str) -> float:
    return 5.0 if bug == "lr-high" else 0.05


def seeded() -> None:
    torch.manual_seed(0)
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)


class Net(nn.Module):
    """An MLP; under "no-optimizer" an `extra` layer joins the output (and is left out
    of the optimizer), under "frozen-in-optimizer" a frozen layer feeds it (and is kept
    in the optimizer)."""

    def __init__(self, bug: str) -> None:
        super().__init__()
        self.bug = bug
        self.body = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 1))
        if bug == "no-optimizer":
            self.extra = nn.Linear(8, 1)
        if bug == "frozen-in-optimizer":
            self.frozen = nn.Linear(8, 8).requires_grad_(False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.body(self.frozen(x) if self.bug == "frozen-in-optimizer" else x)
        return out + self.extra(x) if self.bug == "no-optimizer" else out

    def trained(self) -> list[nn.Parameter]:
        """What the optimizer gets: all but `extra` (the frozen layer too)."""
        return [p for n, p in self.named_parameters() if not n.startswith("extra.")]


def optimizer(model: Net) -> torch.optim.Optimizer:
    return torch.optim.SGD(model.trained(), lr=lr(model.bug))


def batches(n: int = STEPS * 8, size: int = 8) -> list[tuple[torch.Tensor, torch.Tensor]]:
    g = torch.Generator().manual_seed(1)
    x = torch.randn(n, 8, generator=g)
    y = x.sum(1, keepdim=True) / 3
    return [(x[i : i + size], y[i : i + size]) for i in range(0, n, size)]


def scaler() -> torch.amp.GradScaler:
    """amp-skips: a scale that doubles after every good step, so the float16 backward
    overflows again and again: about every other step is skipped."""
    return torch.amp.GradScaler("cpu", init_scale=2.0**14, growth_interval=1)


def loader() -> torch.utils.data.DataLoader:
    """`batches()` as a host takes them: the same ones in the same order."""
    x = torch.cat([b[0] for b in batches()])
    y = torch.cat([b[1] for b in batches()])
    return torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=8)
