"""`gradscope watch --tensorboard DIR`: the watched run as TensorBoard events.

Per step, as scalars: the loss, the total gradient norm (and after clipping), the first
param group's learning rate, the loss scale, the update norm where sampled, and every
parameter's gradient norm under `grad_norm/layers/`, and the smoothed critical batch
size `noise_scale/b_simple` at each measured step (steps/noise.py); with several optimizers each has
its own `optimizer N/` prefix (a GAN's two losses are different quantities). The
per-layer series are the report's: every step of a run that fits its bound, an evenly
spaced subset beyond (docs/json-schema.md; --log keeps every step). Each
finding is a text entry at the first step it is about. Written through torch's
SummaryWriter, which needs the optional `tensorboard` package (imported only here).
"""

from __future__ import annotations

import importlib.util
from typing import TYPE_CHECKING

from gradscope.errors import GradscopeError
from gradscope.steps import noise

if TYPE_CHECKING:
    from gradscope.watcher.report import WatchReport

# torch is imported in functions: `gradscope --help` must not load it

MISSING = (
    "--tensorboard needs the tensorboard package: pip install tensorboard "
    "(or the extra: pip install 'torch-gradscope[tensorboard]')"
)


def require() -> None:
    """Refuse --tensorboard before the run when it could not be written after it."""
    if importlib.util.find_spec("tensorboard") is None:
        raise GradscopeError(MISSING)


def write(report: WatchReport, directory: str) -> None:
    from torch.utils.tensorboard import SummaryWriter

    run = report.run
    names = run.names()
    several = len(run.optimizers) > 1
    with SummaryWriter(log_dir=directory) as events:
        for r in run.steps:
            prefix = f"optimizer {r.optimizer}/" if several else ""
            scalars = {
                "loss": r.loss,
                "grad_norm/total": r.grad_norm,
                "grad_norm/clipped": r.clipped_norm,
                "lr": r.lrs[0] if r.lrs else None,
                "loss_scale": r.scale,
                "update_norm": r.update_norm,
            }
            for tag, value in scalars.items():
                if value is not None:
                    events.add_scalar(prefix + tag, value, r.step)
            for name, norm in zip(names, r.param_norms if r.detail else (), strict=False):
                if norm is not None:
                    events.add_scalar(f"grad_norm/layers/{name}", norm, r.step)
        for s in report.noise:
            prefix = f"optimizer {s.optimizer}/" if several else ""
            for point in noise.series(run.steps, s.optimizer) if s.steps else ():
                if point.b_simple is not None:
                    events.add_scalar(prefix + "noise_scale/b_simple", point.b_simple, point.step)
        last = run.steps[-1].step if run.steps else 0
        for f in report.findings:
            text = f"**{f.severity} {f.rule} {f.slug}** {f.subject}: {f.message}\n\n{f.advice}"
            if f.lead is not None:
                text += f"\n\nlead: {f.lead} steps after the warning {f.explained_by}"
            events.add_text(f"findings/{f.rule}", text, f.steps[0] if f.steps else last)
