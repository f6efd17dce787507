"""Hand-made `watch --log` files for the fast tests of the diff of two runs: the real
format (a params header, then one object per step), with chosen numbers."""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from pathlib import Path

NAMES = ["embed.weight", "h.0.attn.weight", "h.0.mlp.weight", "head.weight"]


def step_line(
    step: int,
    norms: Sequence[float | None],
    loss: float,
    *,
    optimizer: int = 0,
    lr: float = 0.01,
    update: float | None = None,
) -> dict:
    total = math.sqrt(sum(n * n for n in norms if isinstance(n, float)))
    return {
        "step": step,
        "optimizer": optimizer,
        "loss": loss,
        "grad_norm": total,
        "clipped_norm": None,
        "max_norm": None,
        "clipped": False,
        "lrs": [lr],
        "backward_calls": 1,
        "scale": None,
        "skipped": False,
        "carried_norm": None,
        "update_norm": update,
        "time_s": 0.01 * step,
        "scaled_clip": False,
        "clip_total": None,
        "norm_type": None,
        "clip_scale": None,
        "param_norms": list(norms),
        "update_ratios": None,
    }


def healthy(step: int) -> tuple[list[float], float]:
    """Norms and a loss that falls from 2.3 to about 0.5 over 100 steps."""
    norms = [0.1 + 0.01 * k + 0.001 * math.sin(step + k) for k in range(len(NAMES))]
    return norms, 0.5 + 1.8 * math.exp(-step / 25)


def write(
    path: Path,
    steps: Sequence[int],
    *,
    names: Sequence[str] = NAMES,
    change: Callable[[int, list[float], float], tuple[list[float], float]] | None = None,
    lr: float = 0.01,
    every_update: int = 25,
    header: dict | None = None,
) -> Path:
    lines = [json.dumps(header or {"params": list(names)})]
    for s in steps:
        norms, loss = healthy(s)
        if change is not None:
            norms, loss = change(s, norms, loss)
        update = (0.0 if lr == 0 else 0.02) if (s - 1) % every_update == 0 else None
        lines.append(json.dumps(step_line(s, norms, loss, lr=lr, update=update)))
    path.write_text("\n".join(lines) + "\n")
    return path
