"""Where a non-finite gradient is made in the backward, when the forward stayed finite.

The forward and the loss are replayed once more (only after a finding said a gradient is
NaN/Inf), each op's node noted with the user's line; every node of the loss's graph gets a
hook that compares what came in with what it made. The first node whose incoming gradients
were finite and whose outgoing ones are not made it (a sqrt at 0, acos at ±1, the log or
pow of a value a mask then dropped: an infinite local derivative times a 0 gradient is
NaN); the nodes after it only passed it on. Cheaper than anomaly mode, and it tells the
two apart.
"""

from __future__ import annotations

from typing import Any

import torch

from gradscope.inspector import hooks, preserve
from gradscope.inspector.replay import replay, site
from gradscope.spectral_gaps import gap_division


def _finite(tensors: list[torch.Tensor]) -> bool:
    return all(bool(torch.isfinite(t).all()) for t in tensors if t.is_floating_point())


def masked_flag(made: list[torch.Tensor], incoming: list[torch.Tensor]) -> torch.Tensor:
    """On the device: the incoming gradient is 0 where the node made NaN/Inf, 0 × ∞, a
    value masked out."""
    with torch.no_grad():
        hits = [
            ((~torch.isfinite(g)) & (o == 0)).any()
            for g in made
            for o in incoming
            if g.shape == o.shape and g.device == o.device
        ]
    if not hits:
        return torch.tensor(False, device=made[0].device if made else "cpu")
    return torch.stack(hits).any()


def _masked(made: list[torch.Tensor], incoming: list[torch.Tensor]) -> bool:
    return bool(masked_flag(made, incoming))


def backward_origin(model, batch, loss_fn=None, grad_outputs=None) -> list[str]:
    """The backward node that made the first non-finite gradient from finite ones, its
    forward op's line, and how many nodes only passed it on; [] when none did."""
    sites: list[tuple[Any, str]] = []  # nodes kept, so that their identity holds

    def observe(name: str, inputs: Any, out: Any, module: str) -> None:
        outs = out if isinstance(out, tuple) else (out,)  # eigh, svd, topk: several outputs
        nodes = {id(t.grad_fn): t.grad_fn for t in outs if isinstance(t, torch.Tensor)}
        sites.extend((node, site(name, module)) for node in nodes.values() if node is not None)

    with preserve.preserved_state(model):
        target = replay(model, batch, loss_fn, grad_outputs, observe)
        if not target.requires_grad or not _finite([target.detach()]):
            return []
        made: list[tuple[Any, bool]] = []
        passed = [0]

        def check(node: Any) -> Any:
            def hook(grad_in: Any, grad_out: Any) -> None:
                out = [g for g in grad_in if isinstance(g, torch.Tensor)]
                incoming = [g for g in grad_out if isinstance(g, torch.Tensor)]
                if _finite(out):
                    return
                if _finite(incoming):
                    made.append((node, _masked(out, incoming)))
                else:
                    passed[0] += 1

            return hook

        handles = [n.register_hook(check(n)) for n in hooks.graph_nodes(target)]
        try:
            params = [p for p in model.parameters() if p.requires_grad]
            torch.autograd.grad(target, params, grad_outputs, allow_unused=True)
        finally:
            for h in handles:
                h.remove()
    if not made:
        return []
    node, masked = made[0]
    where = next((s for n, s in sites if n is node), None)
    return [sentence(type(node).__name__, where, masked, len(made) - 1 + passed[0])]


def sentence(name: str, where: str | None, masked: bool, passed: int) -> str:
    op = f"{where} ({name})" if where else name
    gap = gap_division(name)
    if gap:
        why = f"{gap[0]}; {gap[1]}"
    elif masked:
        why = (
            "its incoming gradient was 0 where it made NaN: 0 × an infinite local derivative, "
            "a value the forward masked out (a multiplication by 0 or torch.where) still goes "
            "through the op's backward; compute the op on a safe value instead "
            "(torch.where(mask, x, 1) before it)"
        )
    else:
        why = (
            "its local derivative is infinite there (sqrt or pow at 0, acos or asin at ±1, "
            "log at 0): clamp the input away from that point or add an epsilon"
        )
    return (
        f"the forward is finite; the backward of {op} made the first non-finite gradient "
        f"from finite ones ({passed} later node(s) only passed it on): {why}"
    )
