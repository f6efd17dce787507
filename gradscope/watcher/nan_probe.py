"""Where a non-finite gradient is made in the backward, found by watch at no cost until
one is read back.

The graph of the backward that made it is gone by the time the recorder reads its norms
back, so the probe waits for the next top-level backward and hooks it. It reads the
tracked weights' and that backward's loss's finiteness with the hooks' flags, in one
read-back: where a weight is already NaN/Inf (the usual case without GradScaler: the
update applied the gradient), every later forward is poisoned and a node hook would blame
the wrong op, so the probe only states that the weights went non-finite after a finite
loss (`WeightsNan`) and the rules point to `inspect --script --step N`. Where both are
finite (GradScaler skipped the steps, the NaN comes with some batches), the hook on each
node of that backward's graph notes whether what came in was finite and what went out was
not: the first such node made it; the nodes after it passed it on.

GradScaler reads found_inf on the host at every step it takes (`_maybe_opt_step`), so a
skipped step arms the probe there, for the next backward, whose flags are read back inside
the next GradScaler.step, once found_inf was read: no wait the run did not have. A scaled
backward may also overflow: each hooked node's backward is run again on its incoming
gradient unscaled, and a node finite there only overflowed (the scale search of a healthy
model), never an op that made NaN/Inf.

Without a GradScaler the first such step is known before the read-back (`early`): each
step's gradient norms are on the device already, and whether they are non-finite under a
finite loss is one flag, read at once on a CPU (no device to wait for) and, on an
accelerator, copied without blocking and read at a later step once its copy is done. A
set flag has the recorder read back at once, so the next backward is the one watched
(plain SGD's NaN weights named at step 2, not at the tenth step's read-back).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import torch

from gradscope.autograd_walk import NodeWalk, Order
from gradscope.steps.nan_facts import BackwardNan, WeightsNan

TRIES = 3
"""Backward calls with finite weights and loss watched before the probe gives up (the
NaN came with a batch that did not come back)."""
SKIP_RUN = 8
"""Consecutive steps GradScaler skipped with a finite loss before they are probed: AMP
finds its scale in a few skips (each halves it); a NaN made at every step skips them all."""
MAX_NODES = 4096
"""Nodes hooked, nearest the loss first (a hooked graph is freed by recursion: see
discover.MAX_GRAPH_NODES). A producer beyond them is not found, never misnamed."""
MAX_NAMES = 6
OVERFLOWS = 16
"""Scaled backwards watched that only overflowed before the probe gives up (a scale that
keeps overflowing: GradScaler's skips, GS408, say so)."""
PART = "the NaN probe"


@dataclass
class NanProbe:
    """The probe's progress over one watched run."""

    read: int = 0
    """Step records looked at so far."""
    skips: int = 0
    first_skip: int = 0
    """The first of the consecutive steps GradScaler skipped with a finite loss."""
    seen: int | None = None
    """The step whose gradients were read back non-finite with a finite loss."""
    by_scaler: bool = False
    """Armed by a step GradScaler skipped: disarmed again where the watched backward only
    overflowed or made nothing non-finite, until the next skip."""
    done: bool = False
    tries: int = 0
    overflows: int = 0
    unscale: torch.Tensor | None = None
    """1 / the loss scale of the watched backward, where GradScaler scaled it."""
    seen_loss: torch.Tensor | None = None
    """Whether the skipped step's loss was non-finite, on the device until read."""
    step: int = 0
    """The step whose backward is watched."""
    guard: list[torch.Tensor | None] = field(default_factory=list)
    """Whether the watched backward's weights and loss held NaN/Inf, on the device until
    read with the hooks' flags."""
    pending: bool = False
    """A watched backward's flags not read yet."""
    flags: list[tuple[Any, torch.Tensor]] = field(default_factory=list)
    handles: list[Any] = field(default_factory=list)
    origin: BackwardNan | None = None
    weights: WeightsNan | None = None
    early: tuple[torch.Tensor, Any] | None = None
    """A step's flag (non-finite gradients, finite loss) being copied to the host, and the
    event that says when it is there (None on a CPU)."""
    hurried: bool = False
    """A flag was set: the recorder was asked to read back at once (once per run)."""


def early(probe: NanProbe, recorder: Any, step: Any, finite: bool = False) -> None:
    """Before `step` (a PendingStep) is recorded: its gradients non-finite under a finite
    loss, known without waiting for the device, ask the recorder to read back with it.
    `finite`: its CPU norms were read finite as they were taken (Measure.finite)."""
    if probe.done or probe.seen is not None or probe.hurried:
        return
    if probe.early is not None:  # an earlier step's flag, on its way to the host
        host, event = probe.early
        if not event.query():
            return  # not there yet: no wait; a later step looks again
        probe.early = None
        if bool(host):
            probe.hurried = recorder.hurry = True
            return
    if step.param_norm.device.type == "cpu":  # read at once: one sum (norms >= 0, or -1)
        healthy = finite or math.isfinite(step.param_norm.sum(dtype=torch.float64).item())
        flag = None if healthy else _step_flag(step)  # the loss read only then
        probe.hurried = recorder.hurry = flag is not None and bool(flag)
        return
    flag = _step_flag(step)
    if flag is None:
        return
    if flag.device.type != "cuda":  # no event to ask there: the read-back will tell
        return
    host = torch.empty((), dtype=torch.bool, pin_memory=True)
    host.copy_(flag, non_blocking=True)
    event = torch.cuda.Event()
    event.record()
    probe.early = (host, event)


def _step_flag(step: Any) -> torch.Tensor | None:
    """On the step's device: its gradient norms non-finite, its loss finite, the step not
    skipped by a fused GradScaler (None where the loss is unknown or the step skipped)."""
    if step.skipped is True or step.loss is None:
        return None
    loss = step.loss
    norms = step.param_norm
    bad = ~torch.isfinite(norms).all()
    if isinstance(loss, torch.Tensor):
        bad = bad & torch.isfinite(loss.detach().to(bad.device)).all()
    elif not math.isfinite(loss):
        return None
    if isinstance(step.skipped, torch.Tensor):  # a fused step's found_inf
        bad = bad & (step.skipped.to(bad.device) == 0)
    return bad


def look(probe: NanProbe, records: Any) -> None:
    """Read the steps the recorder added since the last look (a flush adds them), off the
    store's columns: arm the probe at the first non-finite gradient of a finite loss, or
    at a run of steps GradScaler skipped with a finite loss."""
    count = len(records)
    if probe.done or probe.seen is not None or count == probe.read:
        probe.read = count
        return
    for step, skipped, loss, first_bad in records.outline(probe.read):
        finite_loss = math.isfinite(loss)
        if skipped:
            probe.skips = probe.skips + 1 if finite_loss else 0
            if probe.skips == 1:
                probe.first_skip = step
            if probe.skips >= SKIP_RUN:
                probe.seen = probe.first_skip
                break
            continue
        probe.skips = 0
        if first_bad:  # its loss or gradients are non-finite
            if finite_loss:
                probe.seen = step
            else:  # the forward made it (or no loss was read): GS401 and inspect name it
                probe.done = True
            break
    probe.read = count


def skipped(probe: NanProbe, step: int, loss: torch.Tensor | None) -> None:
    """GradScaler skipped this step (it read found_inf on the host): arm the probe for the
    next backward. Whether this step's loss was finite is read with the watched backward's
    flags (a NaN the forward made is GS401's, not a finite loss's)."""
    if not probe.done and probe.seen is None:
        probe.seen, probe.by_scaler = step, True
        probe.seen_loss = None if loss is None else ~torch.isfinite(loss.detach()).all()


def begin(probe: NanProbe, state: Any, roots: list[torch.Tensor], scaler: Any = None) -> None:
    """A top-level backward starts: hook it, its weights' and loss's finiteness noted on the
    device (read with the hooks' flags: one read-back)."""
    judge(probe, state)
    look(probe, state.recorder.records)
    if probe.done or probe.seen is None or len(roots) != 1 or roots[0].grad_fn is None:
        return
    loss = roots[0]
    probe.step = state.steps + 1
    probe.guard = _flags([p.detach() for p in state.tracked.params] + [loss.detach()])
    scale = getattr(scaler, "_scale", None)
    probe.unscale = scale.detach().reciprocal() if isinstance(scale, torch.Tensor) else None
    for node in _nodes(loss.grad_fn):
        probe.handles.append(node.register_hook(_hook(probe, node)))


def end(probe: NanProbe, state: Any) -> None:
    """The watched backward returned: its hooks off. Armed by GradScaler's skip, the flags
    wait for the GradScaler.step that reads found_inf anyway; else they are read now."""
    if not probe.handles:
        return
    for handle in probe.handles:
        handle.remove()
    probe.handles = []
    probe.pending = True
    if not probe.by_scaler:
        judge(probe, state)


def judge(probe: NanProbe, state: Any) -> None:
    """One read-back of the watched backward: the weights gone non-finite (GS434), its loss
    non-finite (tried again), or the first node that made NaN/Inf from finite ones."""
    if not probe.pending:
        return
    probe.pending = False
    flags, probe.flags = probe.flags, []
    guard, probe.guard = probe.guard, []
    seen_loss, probe.seen_loss = probe.seen_loss, None
    extra: list[torch.Tensor | None] = [seen_loss] if seen_loss is not None else []
    bad = _read([*guard, *(f for _, f in flags), *extra])
    weights, loss_bad = bad[: len(guard) - 1], bad[len(guard) - 1]
    read = bad[len(guard) : len(guard) + len(flags)]
    if any(weights):
        probe.weights = _weights(probe.seen or 0, probe.step - 1, state.tracked.names, weights)
        probe.done = True
        return
    made = [i for i, (out, came, _, over) in enumerate(read) if out and not came and not over]
    if loss_bad or not made:
        overflowed = not loss_bad and any(r[0] and not r[1] for r in read)
        return _overflowed(probe) if overflowed else _missed(probe)
    first = made[0]
    node = flags[first][0]
    passed = sum(1 for out_bad, in_bad, _, _ in read[first + 1 :] if out_bad and in_bad)
    seen = probe.step if extra and bad[-1] else probe.seen  # that step's loss was NaN
    assert seen is not None
    probe.origin = BackwardNan(
        seen,
        probe.step,
        type(node).__name__,
        _params_of(node, state.tracked),
        read[first][2],
        passed,
    )
    probe.done = True


def finish(probe: NanProbe, state: Any) -> None:
    """The watch ends: a probe armed but never run reads the weights once."""
    judge(probe, state)
    look(probe, state.recorder.records)
    if probe.done or probe.seen is None:
        return
    params = state.tracked.params
    bad = _non_finite([p.detach() for p in params])
    if any(bad):
        probe.weights = _weights(probe.seen, state.steps, state.tracked.names, bad)
    probe.done = True


def _missed(probe: NanProbe) -> None:
    probe.tries += 1
    probe.done = probe.tries >= TRIES
    if probe.by_scaler:  # the next skip arms it again
        probe.seen, probe.by_scaler = None, False


def _overflowed(probe: NanProbe) -> None:
    """Only a scaled gradient's overflow: GradScaler's business, not an op's."""
    probe.overflows += 1
    probe.done = probe.overflows >= OVERFLOWS
    probe.seen, probe.by_scaler = None, False


def _weights(seen: int, steps: int, names: list[str], bad: list[bool]) -> WeightsNan:
    found = tuple(n for n, b in zip(names, bad, strict=False) if b)
    return WeightsNan(seen, steps, found[:MAX_NAMES], len(found))


def _flags(tensors: list[torch.Tensor]) -> list[torch.Tensor | None]:
    """Whether each tensor holds a NaN/Inf, on its device (None where none can be read)."""
    return [
        ~torch.isfinite(t).all()
        if type(t) in (torch.Tensor, torch.nn.Parameter) and not t.is_meta
        else None
        for t in tensors
    ]


def _read(flags: list[torch.Tensor | None]) -> list[Any]:
    """One read-back per device of flags of any shape: each as a bool or a list of them
    (False where there was none)."""
    by_device: dict[Any, list[int]] = {}
    for i, f in enumerate(flags):
        if f is not None:
            by_device.setdefault(f.device, []).append(i)
    out: list[Any] = [False] * len(flags)
    for at in by_device.values():
        parts = [flags[i].reshape(-1) for i in at]  # type: ignore[union-attr]
        values = iter(torch.cat(parts).tolist())
        for i, part in zip(at, parts, strict=True):
            got = [bool(next(values)) for _ in range(part.numel())]
            out[i] = got if flags[i].dim() else got[0]  # type: ignore[union-attr]
    return out


def _non_finite(tensors: list[torch.Tensor]) -> list[bool]:
    """One read-back: whether each tensor holds a NaN/Inf (False where none can be read)."""
    return _read(_flags(tensors))


def _nodes(root: Any) -> list[Any]:
    """The graph's nodes, breadth first from the loss, at most MAX_NODES."""
    return list(NodeWalk([root], order=Order.NEAREST, limit=MAX_NODES))


def _hook(probe: NanProbe, node: Any) -> Any:
    def hook(grad_inputs: Any, grad_outputs: Any) -> None:
        made = [g for g in grad_inputs if isinstance(g, torch.Tensor) and g.is_floating_point()]
        came = [g for g in grad_outputs if isinstance(g, torch.Tensor) and g.is_floating_point()]
        if not made:
            return
        with torch.no_grad():
            out_bad = torch.stack([~torch.isfinite(g).all() for g in made]).any()
            in_bad = torch.stack([~torch.isfinite(g).all() for g in came]).any() if came else None
            masked = _masked(made, came)
            over = _overflow(node, grad_outputs, probe.unscale, out_bad.device)
        device = out_bad.device
        in_bad = in_bad.to(device) if in_bad is not None else _false(device)
        probe.flags.append((node, torch.stack([out_bad, in_bad, masked.to(device), over])))

    return hook


def _false(device: Any) -> torch.Tensor:
    """False on the device, filled there (a tensor from a Python value is copied from the
    host: on CUDA that waits for the stream)."""
    return torch.zeros((), dtype=torch.bool, device=device)


def _overflow(node: Any, came: Any, unscale: torch.Tensor | None, device: Any) -> torch.Tensor:
    """The node's backward run again on its incoming gradient unscaled is finite: what it
    made was the loss scale's overflow (a backward is linear in what comes in; an infinite
    local derivative stays infinite, 0 × ∞ stays NaN). Never for a Python Function's
    backward (the user's code, run once) or where nothing can be run again."""
    no = _false(device)
    floats = [g for g in came if isinstance(g, torch.Tensor) and g.is_floating_point()]
    if unscale is None or not floats or isinstance(node, torch.autograd.function.BackwardCFunction):
        return no
    try:
        again = node(
            *[
                g * unscale.to(g.device) if g is not None and g.is_floating_point() else g
                for g in came
            ]
        )
    except Exception:  # released, or not callable twice: judged as before
        return no
    again = again if isinstance(again, tuple) else (again,)
    outs = [g for g in again if isinstance(g, torch.Tensor) and g.is_floating_point()]
    if not outs:
        return no
    return torch.stack([torch.isfinite(g).all().to(device) for g in outs]).all()


def _masked(made: list[torch.Tensor], came: list[torch.Tensor]) -> torch.Tensor:
    """The incoming gradient is 0 where the node made NaN/Inf: 0 × an infinite local
    derivative, a value the forward masked out."""
    hits = [
        ((~torch.isfinite(g)) & (o == 0)).any()
        for g in made
        for o in came
        if g.shape == o.shape and g.device == o.device
    ]
    if not hits:
        return _false(made[0].device)
    return torch.stack(hits).any()


def _params_of(node: Any, tracked: Any) -> tuple[str, ...]:
    """The tracked parameters the node's gradient flows to, nearest first."""
    names: list[str] = []
    for n in NodeWalk([node], order=Order.NEAREST, limit=MAX_NODES):
        variable = getattr(n, "variable", None)
        at = tracked.index.get(id(variable)) if isinstance(variable, torch.Tensor) else None
        if at is not None:
            names.append(tracked.names[at])
            if len(names) >= MAX_NAMES:
                break
    return tuple(names)
