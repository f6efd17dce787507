"""A parameter whose gradient every backward filled and the script set to None before the
optimizer's step, all run (DINO's last layer frozen by cancel_gradients_last_layer with a
freeze_last_layer beyond the run): its graph is not cut, the drop stops it. GS413 says
that instead of pointing at the graph (watcher/dropped_grads.py)."""

from __future__ import annotations

from dataclasses import replace

from gradscope.findings import Finding


def as_told(finding: Finding, name: str, steps: int) -> Finding:
    return replace(
        finding,
        message=f"{name} got no gradient (None) at any of the {steps} steps: the backward "
        "filled its .grad and the script set it to None before the optimizer's step, at "
        "every step read (a layer frozen by dropping its gradient, as DINO's "
        "cancel_gradients_last_layer does in its first epoch): it never learns",
        advice="if it should learn after a while (DINO's freeze_last_layer), check the "
        "condition that drops its gradient: it held all run; if it should never learn, "
        "requires_grad_(False) says so and spares the backward its gradient",
    )
