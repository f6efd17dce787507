"""Parameters an optimizer steps that the script also moves by hand between its steps,
while gradients reach them: an EMA teacher left in the optimizer with its forward attached
(BYOL, DINO, Mean Teacher without no_grad), a weight clipped or renormalised in place.

torch bumps a tensor's version counter at every in-place write (`mul_`, `add_`,
`copy_`, `lerp_` under no_grad); a backward that fills `.grad` and a zero_grad do not. At
the steps same_batch reads (1-3, then pairs every 25, every 500 after step 101) the
versions of an optimizer's parameters are kept after its step and compared at its next
step's start: host counters, no device read. A write through `.data` (the reference EMA
of DINO, MoCo and BYOL: `param_k.data.mul_(m).add_(...)`) bumps no counter, so each
parameter's fingerprint (`fingerprints`: one integer per tensor, on its device) is kept
beside its version and a changed fingerprint under an unchanged version counts as a write;
those comparisons are read back once, as the run ends. An EMA at m = 0.996 during a warm-up
moves each value by an ulp or two, which a float32 norm rounds away and the bit patterns'
sum does not.

The same fingerprints, kept at an optimizer's first step's start too, tell a write that puts
back the values that first step started from after a step moved them away (`restored`): an
episodic reset to a snapshot between steps (MEMO's and TTT's load_state_dict of the source
weights before each test point, TENT's episodic mode).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from gradscope.watcher.same_batch import wanted


def fingerprints(params: list[Any]) -> list[tuple[list[int], Any]]:
    """(indices in `params`, their fingerprints as one device tensor) per device, for the
    dense floating tensors among them: each the sum of the bit patterns, read as integers,
    of up to SAMPLED of its values spread over it, which a write to them changes (by an ulp
    too: an EMA's, a copy's, a clamp's reach all or many). No host read; a tensor of 10M
    values costs what one of 4,096 does."""
    by_device: dict[Any, list[int]] = {}
    for i, p in enumerate(params):
        if (
            type(p.data) is torch.Tensor
            and p.layout == torch.strided
            and p.dtype.is_floating_point
            and p.element_size() in _BITS
            and not p.is_meta
        ):
            by_device.setdefault(p.device, []).append(i)
    with torch.no_grad():
        return [
            (at, torch.stack([_bit_sum(params[i].detach()) for i in at]))
            for at in by_device.values()
        ]


_BITS = {1: torch.int8, 2: torch.int16, 4: torch.int32, 8: torch.int64}
SAMPLED = 4096


def _bit_sum(t: torch.Tensor) -> torch.Tensor:
    flat = t.reshape(-1)
    if flat.numel() > SAMPLED:
        flat = flat[:: flat.numel() // SAMPLED]
    return flat.view(_BITS[t.element_size()]).sum(dtype=torch.int64)


@dataclass
class HandMoved:
    kept: dict[int, tuple[list[Any], list[int], list[tuple[list[int], Any]]]] = field(
        default_factory=dict
    )
    """id(optimizer) → (its parameters, their versions and fingerprints after its last sampled
    step)."""
    pending: list[tuple[int, list[int | None], Any]] = field(default_factory=list)
    """(id(optimizer), tracked positions, device bools: each fingerprint changed) per device and
    interval; a position only for a parameter holding a gradient whose version did not
    change (else None): read back by `resolve`."""
    moved: dict[int, int] = field(default_factory=dict)
    """Tracked position → intervals between its optimizer's steps in which the script wrote
    it in place while it held a gradient."""
    owner: dict[int, int] = field(default_factory=dict)
    """Tracked position → id of the optimizer whose intervals it was compared over."""
    compared: dict[int, int] = field(default_factory=dict)
    """id(optimizer) → intervals between its steps compared (a GAN's two optimizers each
    count their own)."""
    first: dict[int, list[tuple[list[int], Any]]] = field(default_factory=dict)
    """id(optimizer) → its parameters' fingerprints at the start of its first step."""
    restore_pending: list[tuple[list[int | None], Any]] = field(default_factory=list)
    """(tracked positions, device bools: the values of the first step's start, put back after
    a step moved them away) per device and interval: read back by `resolve`."""
    restored: set[int] = field(default_factory=set)
    """Tracked positions written back to the values of their optimizer's first step's start
    after a step moved them away, in one interval compared at least."""

    def after_step(self, optimizer: Any, step: int) -> None:
        """Optimizer step `step` ended: keep its parameters' versions when the next one is
        read."""
        if not wanted(step + 1):
            return
        params = [p for g in optimizer.param_groups for p in g["params"]]
        self.kept[id(optimizer)] = (params, [p._version for p in params], fingerprints(params))

    def before_step(self, optimizer: Any, index: dict[int, int]) -> None:
        """The optimizer's next step starts: its parameters written since, with a gradient."""
        key = id(optimizer)
        kept = self.kept.pop(key, None)
        if key not in self.first:
            self.first[key] = fingerprints([p for g in optimizer.param_groups for p in g["params"]])
        if kept is None:
            return
        self.compared[key] = self.compared.get(key, 0) + 1
        params, versions, prints = kept
        unchanged: set[int] = set()
        for i, (p, version) in enumerate(zip(params, versions, strict=True)):
            at = index.get(id(p))
            if at is None or p.grad is None:
                continue
            if p._version != version:
                self._count(at, key)
            else:
                unchanged.add(i)
        self._compare(key, params, prints, unchanged, index)
        self._restores(key, params, prints, index)

    def _restores(
        self, key: int, params: list[Any], after: list[tuple[list[int], Any]], index: dict[int, int]
    ) -> None:
        """Keep, on the device, which parameters hold again the values of their optimizer's
        first step's start, after the step before moved them away (`after`: its end)."""
        now = fingerprints(params)
        before = self.first[key]
        groups = [at for at, _ in now]
        if groups != [at for at, _ in before] or groups != [at for at, _ in after]:
            return  # param groups or devices changed since the first step: not compared
        for (at, start), (_, moved), (_, back) in zip(before, after, now, strict=True):
            positions = [index.get(id(params[i])) for i in at]
            self.restore_pending.append((positions, (back == start) & (moved != start)))

    def _compare(
        self,
        key: int,
        params: list[Any],
        prints: list[tuple[list[int], Any]],
        unchanged: set[int],
        index: dict[int, int],
    ) -> None:
        """Keep, on the device, whether the fingerprints of `unchanged` moved since they were
        kept: a write through `.data`. The whole device group is measured again (no index
        copied to the device, which would wait for it)."""
        for at, before in prints:
            if not unchanged.intersection(at):
                continue
            now = fingerprints([params[i] for i in at])
            if len(now) != 1 or now[0][0] != list(range(len(at))):
                continue  # moved to another device or dtype between steps: not compared
            positions = [index[id(params[i])] if i in unchanged else None for i in at]
            self.pending.append((key, positions, before != now[0][1]))

    def _count(self, at: int, key: int) -> None:
        self.moved[at] = self.moved.get(at, 0) + 1
        self.owner[at] = key

    def resolve(self) -> None:
        """Read back the comparisons kept (one host read per device and interval, as
        the run ends)."""
        pending, self.pending = self.pending, []
        for key, positions, changed in pending:
            for at, moved in zip(positions, changed.tolist(), strict=True):
                if moved and at is not None:
                    self._count(at, key)
        restores, self.restore_pending = self.restore_pending, []
        for positions, back in restores:
            self.restored.update(
                at for at, b in zip(positions, back.tolist(), strict=True) if b and at is not None
            )

    def put_back(self) -> tuple[int, ...]:
        """Tracked positions the script wrote back to the values their optimizer's first step
        started from, after a step moved them away (an episodic reset), in one interval
        compared at least."""
        self.resolve()
        return tuple(sorted(self.restored))

    def written(self) -> tuple[int, ...]:
        """Tracked positions the script wrote in place while they held a gradient, in one
        interval compared at least (a target network synced from the model every N steps)."""
        self.resolve()
        return tuple(sorted(self.moved))

    def facts(self) -> tuple[tuple[int, ...], int]:
        """(tracked positions moved by hand at every interval their optimizer compared, the
        fewest intervals among those optimizers; with none, the most any compared)."""
        self.resolve()
        if not self.compared:
            return (), 0
        every = tuple(sorted(i for i, n in self.moved.items() if n == self.compared[self.owner[i]]))
        if not every:
            return (), max(self.compared.values())
        return every, min(self.compared[self.owner[i]] for i in every)
