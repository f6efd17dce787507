"""Is a step past the edge of stability along its own direction? An analysis tool for the
corpus (not a test, not gradscope): runs a corpus script with its AdamW instrumented and
writes, per step, what a precursor on the update's curvature would read.

With the update d_t = θ_{t+1} - θ_t and the gradients g_t, g_{t+1} (of different batches),
the secant curvature along the update c_t = (g_{t+1} - g_t)·d_t against the first-order
decrease -g_t·d_t: a quadratic model overshoots the line minimum where their ratio passes
1 and raises the loss where it passes 2. Per step: both per tensor and in total (and the
same secant on the step's own batch, c_same: its gradient after the step), the loss,
the lr, the loss on the SAME batch after the step (one more forward and backward), the largest
|q·kᵀ|·scale of each scaled_dot_product_attention call. docs/watch.md has the numbers.

    python tests/watcher/precursor/edge_study.py OUT.json logit_gpt.py attn-deep 600 1
    python tests/watcher/precursor/edge_study.py --table OUT.json ...  (a line a run)
"""

from __future__ import annotations

import json
import math
import runpy
import statistics
import sys
from pathlib import Path

import torch
import torch.nn.functional as F

torch.set_num_threads(1)
_sdpa, _cross_entropy = F.scaled_dot_product_attention, F.cross_entropy


class Study:
    """The facts of the step in progress, and the rows of the steps done."""

    def __init__(self) -> None:
        self.rows: list[dict] = []
        self.model, self.inputs, self.target, self.loss = None, (), None, math.nan
        self.attention: list[float] = []
        self.quiet = False  # the extra forward records nothing
        self.last: tuple[list, list, dict] | None = None  # g_t, d_t and the row of step t

    def forward_pre_hook(self, module, args) -> None:
        if self.model is None and not self.quiet:  # the first call of a step: the model's
            self.model, self.inputs = module, args

    def sdpa(self, q, k, v, *args, **kwargs):
        if not self.quiet:
            with torch.no_grad():
                s = (q @ k.transpose(-1, -2)).abs() * kwargs.get("scale", q.shape[-1] ** -0.5)
                if kwargs.get("is_causal"):
                    n = s.shape[-1]
                    s = s.masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1), 0)
                self.attention.append(float(s.amax()))
        return _sdpa(q, k, v, *args, **kwargs)

    def cross_entropy(self, logits, target, *args, **kwargs):
        loss = _cross_entropy(logits, target, *args, **kwargs)
        if not self.quiet:
            self.target, self.loss = target, float(loss.detach())
        return loss

    def same_batch(self, params: list) -> tuple[float, list]:
        """The loss of the step's own batch after the step, and its gradient there."""
        self.quiet = True
        logits = self.model(*self.inputs)
        loss = _cross_entropy(logits.reshape(-1, logits.shape[-1]), self.target)
        grads = torch.autograd.grad(loss, params, allow_unused=True)
        self.quiet = False
        zero = torch.zeros(())
        return float(loss.detach()), [zero if g is None else g for g in grads]


STUDY = Study()


class StudiedAdamW(torch.optim.AdamW):
    def step(self, closure=None):
        params = [p for group in self.param_groups for p in group["params"]]
        g = [p.grad.detach().clone() for p in params]
        if STUDY.last is not None:  # step t-1's curvature, now that g_t is known
            g_last, d_last, row = STUDY.last
            pairs = zip(g, g_last, d_last, strict=True)
            row["c"] = [float(((a - b) * d).sum()) for a, b, d in pairs]
        before = [p.detach().clone() for p in params]
        out = super().step(closure)
        d = [p.detach() - b for p, b in zip(params, before, strict=True)]
        names = {id(p): n for n, p in STUDY.model.named_parameters()}
        after, g_after = STUDY.same_batch(params)
        pairs = zip(g_after, g, d, strict=True)
        row = {
            "step": len(STUDY.rows) + 1,
            "lr": self.param_groups[0]["lr"],
            "loss": STUDY.loss,
            "after": after,
            "c_same": [float(((a - b) * c).sum()) for a, b, c in pairs],
            "attention": STUDY.attention,
            "names": [names.get(id(p), "?") for p in params] if not STUDY.rows else None,
            "dec": [float(-(a * b).sum()) for a, b in zip(g, d, strict=True)],
        }
        STUDY.rows.append(row)
        STUDY.last = (g, d, row)
        STUDY.model, STUDY.attention = None, []
        return out


def main(out: str, script: str, *args: str) -> None:
    path = Path(script) if Path(script).exists() else Path(__file__).with_name(script)
    sys.path.insert(0, str(path.parent))
    sys.argv = [str(path), *args]
    torch.nn.modules.module.register_module_forward_pre_hook(STUDY.forward_pre_hook)
    torch.optim.AdamW = StudiedAdamW
    F.scaled_dot_product_attention, F.cross_entropy = STUDY.sdpa, STUDY.cross_entropy
    runpy.run_path(str(path), run_name="__main__")
    Path(out).write_text(json.dumps(STUDY.rows, allow_nan=True))


WINDOWS = ((11, 30), (31, 50), (51, 70), (71, 90), (91, 98), (99, 130), (131, 300), (301, 600))
"""The warm-up (100 steps in logit_gpt.py) by 20 steps, its last steps before the blow-ups
at 99-103, and after."""


def table(paths: list[str]) -> None:
    """Per run and window: the median of c_t / (-g_t·d_t) in total, of c_same / (-g_t·d_t),
    and of the same batch's loss change over -g_t·d_t (-1: the step did what the gradient
    promised; above 0: it raised its own batch's loss), and the first steps after 10 where
    the first passed 2 and the last 0."""
    for path in paths:
        rows = [r for r in json.loads(Path(path).read_text()) if "c" in r]
        ratio = {r["step"]: sum(r["c"]) / sum(r["dec"]) for r in rows}
        same = {r["step"]: (r["after"] - r["loss"]) / sum(r["dec"]) for r in rows}
        own = {r["step"]: sum(r["c_same"]) / sum(r["dec"]) for r in rows}
        cells = []
        for series in (ratio, own, same):
            for a, b in WINDOWS:
                window = [v for s, v in series.items() if a <= s <= b]
                cells.append(f"{statistics.median(window):5.2f}" if window else "    -")
        past = [s for s, v in ratio.items() if s > 10 and v > 2][:3]
        rose = [s for s, v in same.items() if s > 10 and v > 0][:3]
        line = f"{Path(path).stem:16s} {' '.join(cells)}"
        print(f"{line}  ratio>2 at {past}, own batch's loss up at {rose}")


if __name__ == "__main__":
    if sys.argv[1] == "--table":
        table(sys.argv[2:])
    else:
        main(*sys.argv[1:])
