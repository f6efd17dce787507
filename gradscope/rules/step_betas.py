"""GS462: Adam's betas the wrong way round, read from the optimizer's own settings. No
torch."""

from __future__ import annotations

import math

from gradscope.config import Thresholds
from gradscope.findings import RULES, Finding, Severity
from gradscope.fmt import num
from gradscope.rules.registry import Stage, rule
from gradscope.rules.step_common import about
from gradscope.steps.meaning import GroupSettings
from gradscope.steps.records import WatchRun


@rule(
    "GS462",
    "adam-betas-swapped",
    Severity.WARNING,
    "adam-betas",
    Stage.WATCH,
    "watch: an Adam-family optimizer's betas break Adam's own convergence condition "
    "β1² < √β2: its momentum averages over far more steps than its second moment (betas "
    "swapped)",
    example="`torch.optim.Adam(model.parameters(), lr=1e-3, betas=(0.999, 0.9))` on a small "
    "classifier: the loss is 1.08 after 64 steps where (0.9, 0.999) reaches 0.68",
    fix="betas=(0.9, 0.999): the first is the momentum's decay, the second the squared gradient's",
    objectives="any: Adam's betas against its own convergence condition, a mechanism "
    "independent of what the loss means",
    explains=("GS415",),
)
def adam_betas_swapped(run: WatchRun, t: Thresholds) -> list[Finding]:
    """Adam divides a moving mean of the gradient (decay β1) by the root of a moving mean
    of its square (decay β2), and Kingma and Ba's convergence proof needs β1² < √β2. Every
    common setting keeps it: (0.9, 0.999), a GAN's (0.5, 0.999) or (0, 0.9), a language
    model's (0.9, 0.95), (0.9, 0.9). Betas swapped, (0.999, 0.9), break it: the momentum
    averages about 1000 steps while the denominator forgets in about 10, so each step is
    a stale gradient's mean over a fresh gradient's size. Read from the settings of an
    optimizer whose step gradscope knows to be Adam's family (torch's Adam, AdamW, NAdam,
    RAdam, Adamax); a class it does not know, whose betas may mean something else (Lion's
    interpolation and momentum), is not judged."""
    out = []
    for index, history in enumerate(run.settings):
        for settings in history:
            if settings.update != "adam":
                continue
            broken = [(k, g) for k, g in enumerate(settings.groups) if _breaks(g)]
            if broken:
                out.append(about(_finding(run, index, broken), [settings.since]))
                break
    return out


def _breaks(group: GroupSettings) -> bool:
    if group.betas is None:
        return False
    beta1, beta2 = group.betas
    if not (math.isfinite(beta1) and math.isfinite(beta2)) or not 0 <= beta2 < 1:
        return False
    return beta1 * beta1 >= math.sqrt(beta2)  # only where β1 > β2: else β1² ≤ β2² < √β2


def _steps(beta: float) -> str:
    """How many steps a moving mean with this decay averages: 1 / (1 - β)."""
    return f"~{1 / (1 - beta):.0f}" if beta < 1 else "all"


def _finding(run: WatchRun, index: int, broken: list[tuple[int, GroupSettings]]) -> Finding:
    k, group = broken[0]
    assert group.betas is not None
    beta1, beta2 = group.betas
    label = run.optimizer_label(index)
    groups = "param group " + ", ".join(str(j) for j, _ in broken)
    message = (
        f"betas = ({num(beta1)}, {num(beta2)}) in {groups}: the momentum averages "
        f"the gradient over {_steps(beta1)} steps while the second moment keeps its square "
        f"for {_steps(beta2)}; Adam converges only where β1² < √β2 ({num(beta1 * beta1)} ≥ "
        f"{num(math.sqrt(beta2))}): the betas look swapped"
    )
    kind = run.optimizers[index] if index < len(run.optimizers) else "the optimizer"
    return RULES["GS462"].finding(
        label,
        message,
        f"betas=({num(beta2)}, {num(beta1)}): the first is the momentum's decay, the second "
        "the squared gradient's",
        value=beta1 * beta1,
        threshold=math.sqrt(beta2),
        evidence=(f"{kind}'s betas in param group {k}: β1 = {num(beta1)}, β2 = {num(beta2)}",),
    )
