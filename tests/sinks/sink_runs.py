"""Shared by the sink tests: a tiny run watched in-process with its sinks, and the
series the report itself holds, to compare what each sink received with."""

from __future__ import annotations

import math
import os
import textwrap

import gradscope


def train(steps: int = 30, forget_zero_grad: bool = False, seed: int = 0) -> None:
    """A two-layer regression, its gradients clipped; one that forgets zero_grad piles
    them up (GS412)."""
    import torch
    from torch import nn

    torch.manual_seed(seed)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.001)
    for _ in range(steps):
        x = torch.randn(16, 8)
        loss = nn.functional.mse_loss(model(x), x[:, :1])
        if not forget_zero_grad:
            opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=5.0)
        opt.step()


def watched(steps: int = 30, forget_zero_grad: bool = False, **sinks: object):
    with gradscope.watch(**sinks) as w:
        train(steps, forget_zero_grad)
    return w.report


def report_series(report, tag: str) -> dict[int, float]:
    """The report's own numbers for a series every sink writes."""
    field = {"loss": "loss", "grad_norm/total": "grad_norm", "lr": None}[tag]
    return {r.step: (r.lrs[0] if field is None else getattr(r, field)) for r in report.run.steps}


def close(a: float, b: float) -> bool:
    return (math.isnan(a) and math.isnan(b)) or math.isclose(a, b, rel_tol=1e-6, abs_tol=1e-12)


def in_the_sinks_process(monkeypatch, folder, code: str) -> None:
    """`code` run as the sinks' process starts (a sitecustomize on its path): how a test
    breaks or counts a library's calls there, where the writing happens."""
    folder.mkdir(exist_ok=True)
    (folder / "sitecustomize.py").write_text(textwrap.dedent(code))
    paths = [str(folder), os.environ.get("PYTHONPATH", "")]
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(p for p in paths if p))
