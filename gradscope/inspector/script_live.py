"""The explanation passes of a script's step, which cannot be replayed, done live.

The forward of the inspected step alone runs under a TorchFunctionMode that notes, without a
host sync per op, the first op to turn finite inputs into NaN/Inf and the ops that leave the
graph; the backward gradscope runs notes the first node that returned NaN/Inf from finite
gradients.
"""

from __future__ import annotations

import sys
import warnings
from typing import Any

import torch
from torch import nn

from gradscope.errors import is_own_file, is_user_file, short_path
from gradscope.inspector import backward_nan, hooks, infinite_fills, nan_made
from gradscope.inspector.node_watch import NodeWatch, readable
from gradscope.inspector.replay import CUT_KINDS, MAX_SITES, SHAPE_ONLY, op_name
from gradscope.inspector.uninitialised import Unwritten, without_out
from gradscope.rules.grads import INDEX_CUT, STEP_CUT

with warnings.catch_warnings():  # torch warns here when numpy is not installed
    warnings.filterwarnings("ignore", message="Failed to initialize NumPy")
    from torch.overrides import TorchFunctionMode

MAX_CUTS = 256
"""Calls that leave the graph kept by the live watch (each keeps its inputs' graph alive)."""
CHECK_EVERY = 256
"""Ops between two reads of the non-finite flags (one host sync each) in the live watch."""


class LiveWatch(TorchFunctionMode):
    """Every torch call of the inspected step's forward: the first one to make NaN/Inf from
    finite inputs, and the calls that leave the graph (`.detach()`, `.item()`, ...).

    `stack`: id() of the modules inside their forward now, innermost last (kept by the
    script's module hooks)."""

    def __init__(self, stack: list[int]) -> None:
        super().__init__()
        self.stack = stack
        self.active = False
        self.entered = False
        self.pending: list[tuple[tuple[str, int, str | None], torch.Tensor, list[Any], Any]] = []
        """(op, a flag set when an output is bad, its inputs, (a mask's state, a NaN flag))
        not read back yet (the inputs are kept until then: CHECK_EVERY ops at most)."""
        self.fills = infinite_fills.InfiniteFills()
        self.from_mask = False  # the first bad op made NaN of a mask's -inf
        self.failed = False
        """An op the watch could not read: it stopped watching (nothing is said)."""
        self.came_in = False
        """The first non-finite output came from non-finite inputs from outside the step."""
        self.unwritten = Unwritten()
        self.read_unwritten: tuple[Any, Any] | None = None
        """(the op, the uninitialising op) when those inputs were memory no one wrote."""
        self.first_bad: tuple[str, int, str | None] | None = None
        self.of_nothing = False
        """That op's floating inputs were all empty: a mean over no elements (0/0)."""
        self.domain_note = ""
        """nan_made.domain_note of that op: a log fed negatives, a division by 0."""
        self.cuts: list[tuple[str, tuple[str, int, str | None], list[Any]]] = []
        """(kind, op, what its graded inputs came from: nodes or leaf tensors) of each call
        whose inputs require grad and whose outputs do not."""
        self._kinds: dict[Any, str] = {}
        self._steps: dict[tuple[str, int, str | None], int] = {}
        """Each integer op's site → its one cut (by index)."""
        self.taint: dict[int, frozenset[int]] = {}
        """id() of each tensor computed from a cut's output → those cuts (by index)."""
        self.keep: list[torch.Tensor] = []
        """The tensors `taint` names, kept alive so that their ids stay theirs."""
        self.sites: dict[int, tuple[str, int, str | None]] = {}
        """id(grad_fn) of each output → the op that made it."""

    def start(self) -> None:
        """The window opens: the next forward is the step's."""
        if not self.entered:
            self.__enter__()
            self.entered = True
        self.active = True

    def stop(self, final: bool = False) -> None:
        """Stop watching; off the mode stack when it is on top (`final`: wherever it is, for
        a script that left a mode of its own above it)."""
        self.active = False
        if self.entered and self._on_top():
            self.entered = False
            self.__exit__(None, None, None)
        elif self.entered and final:
            above = []
            while torch._C._len_torch_function_stack() and not self._on_top():
                above.append(torch._C._pop_torch_function_stack())
            if self._on_top():
                torch._C._pop_torch_function_stack()
                self.entered = False
            for mode in reversed(above):
                torch._C._push_on_torch_function_stack(mode)

    def _on_top(self) -> bool:
        n = torch._C._len_torch_function_stack()
        return n > 0 and torch._C._get_function_stack_at(n - 1) is self

    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        out = func(*args, **(kwargs or {}))
        if self.active and not torch.compiler.is_compiling():
            graded = torch.is_grad_enabled()
            # no_grad: an op of ours on the script's tensors (isfinite is abs and a compare)
            # would save tensors for a backward, and a non-reentrant checkpoint counts them
            with torch._C.DisableTorchFunction(), torch.no_grad():
                try:
                    self._observe(func, args, kwargs or {}, out, graded)
                except Exception:  # an op the watch cannot read: the script's run comes first
                    self.pending = []
                    self.failed = True
                    self.active = False
        return out

    def _observe(self, func: Any, args: Any, kwargs: Any, out: Any, graded: bool) -> None:
        name = op_name(func)
        inputs = list(hooks.tensors_in((args, without_out(kwargs))))
        results = list(hooks.tensors_in(out))
        outs = [t for t in results if t.is_floating_point() or t.is_complex()]
        masked = self.fills.note(name, (args, kwargs), (inputs, outs))
        marks: frozenset[int] = frozenset()
        for t in inputs:
            marks |= self.taint.get(id(t), frozenset())
        stops = any(t.requires_grad for t in inputs) and not any(t.requires_grad for t in outs)
        if stops and name not in SHAPE_ONLY:  # `empty_like(x)` reads no value of x: no cut
            # an integer op (a comparison, argmax) too: named only for a parameter whose
            # values reach the loss through nothing else (a step with no surrogate)
            if outs or name in CUT_KINDS or results:
                cut = self._cut(name, inputs, graded, step=not outs and name not in CUT_KINDS)
                if cut is not None:
                    marks |= {cut}
        if not stops and len(outs) < len(results) and name not in SHAPE_ONLY:
            results = self._indices_cut(name, inputs, results, outs, graded, marks)
        if marks:
            for t in results:  # what was computed from a cut's output, down to the loss
                self.taint[id(t)] = marks
                self.keep.append(t)
        if not outs and not masked:
            return
        line = self._user_line()
        if line is None:
            return  # a call gradscope made (its GradScaler.scale wrapper), not the script's
        site = self._site(name, line)
        if masked:
            self.fills.filled_at(site, (args, kwargs))
        if not outs:
            return  # an assignment in place (`x[mask] = -inf`)
        for t in outs:
            if t.grad_fn is not None:
                self.sites[id(t.grad_fn)] = site  # the newest: an id may be reused
        if self.first_bad is None and not self.came_in:
            self._flag(name, (inputs, outs), site, masked)

    def _flag(self, name: str, tensors: tuple[list, list], site: Any, masked: int) -> None:
        """A device flag of the op's outputs going bad (infinite_fills.made: a mask's -inf is
        no fault), pending with the inputs it read until the next read-back."""
        inputs, outs = tensors
        read = self.unwritten.screen(name, inputs, outs, site)
        if read is None:
            return  # memory no one wrote: it holds no value yet
        floats = [readable(t) for t in read if t.is_floating_point() or t.is_complex()]
        kept = [t for t in floats if t is not None]
        results = [t for t in map(readable, outs) if t is not None]
        if not results:
            return
        bad, nan = infinite_fills.flags(results, kept, masked)
        self.pending.append((site, bad, kept, (masked, nan)))
        if len(self.pending) >= CHECK_EVERY:
            self._read()

    def _indices_cut(
        self,
        name: str,
        inputs: list[torch.Tensor],
        results: list[torch.Tensor],
        outs: list[torch.Tensor],
        graded: bool,
        marks: frozenset[int],
    ) -> list[torch.Tensor]:
        """`topk`, `max(dim)`, `sort`: values with a gradient, indices without one. A
        parameter whose values go on only through the indices (a router read for its top-k
        choice alone) is cut here: its indices are marked with the cut; the results left
        to mark as any op's are returned."""
        if not any(t.requires_grad for t in inputs):
            return results
        cut = self._cut(name, inputs, graded, step=True, kind=INDEX_CUT)
        if cut is None:
            return results
        valued = {id(t) for t in outs}
        for t in results:
            if id(t) not in valued:
                self.taint[id(t)] = marks | {cut}
                self.keep.append(t)
        return outs

    def _cut(
        self,
        name: str,
        inputs: list[torch.Tensor],
        graded: bool,
        step: bool = False,
        kind: str = STEP_CUT,
    ) -> int | None:
        """`step`: an integer op's (`kind`: its indices'), one cut per site (a mask made at
        every time step of a loop would fill MAX_CUTS before a .detach() after it)."""
        line = self._user_line()
        if len(self.cuts) >= MAX_CUTS or line is None:
            return None
        sources = [t.grad_fn if t.grad_fn is not None else t for t in inputs if t.requires_grad]
        site = self._site(name, line)
        if step and graded:
            known = self._steps.setdefault(site, len(self.cuts))
            if known < len(self.cuts):
                self.cuts[known][2].extend(s for s in sources if len(self.cuts[known][2]) < 64)
                return known
            self.cuts.append((kind, site, sources))
            return known
        if not graded:
            kind = "a torch.no_grad() (or inference_mode) region"
        elif name in CUT_KINDS:
            kind = CUT_KINDS[name]
        else:
            kind = ""
        self.cuts.append((kind, site, sources))
        return len(self.cuts) - 1

    def _user_line(self) -> str | None:
        """errors.user_line, with each code object's kind kept (it runs for every op)."""
        frame: Any = sys._getframe(2)
        started = False
        while frame is not None:
            code = frame.f_code
            kind = self._kinds.get(code)
            if kind is None:
                name = code.co_filename
                kind = (
                    "own"
                    if is_own_file(name)
                    else "lib"
                    if not is_user_file(name)
                    else short_path(name)
                )
                self._kinds[code] = kind
            if kind == "own":
                if started:
                    return None
            elif kind != "lib":
                return f"{kind}:{frame.f_lineno}"
            else:
                started = True
            frame = frame.f_back
        return None

    def _site(self, name: str, line: str | None) -> tuple[str, int, str | None]:
        return (name, self.stack[-1] if self.stack else 0, line)

    def _read(self) -> None:
        """One host sync: the first op with a non-finite output, if any. Its inputs come from
        ops before it, all finite, or from outside the watched forward (the weights, the
        batch): when one of those is non-finite, no op of the step made it."""
        pending, self.pending = self.pending, []
        if not pending or self.first_bad is not None or self.came_in:
            return
        device = pending[0][1].device
        flags = torch.stack([p[1].to(device) for p in pending]).cpu().tolist()
        for (site, _, inputs, (masked, nan)), bad in zip(pending, flags, strict=True):
            if bad:
                bad_in = [t for t in inputs if bool(infinite_fills.came_bad(t, masked))]
                if not bad_in:
                    self.first_bad, self.from_mask = site, nan is not None and bool(nan)
                    self.of_nothing = bool(inputs) and all(t.numel() == 0 for t in inputs)
                    self.domain_note = nan_made.domain_note(site[0], inputs)
                    return
                self.came_in = True
                made = [s for s in map(self.unwritten.site_of, bad_in) if s is not None]
                if made:
                    self.read_unwritten = (site, made[0])
                return

    def watch_backward(self, loss: torch.Tensor) -> NodeWatch:
        return NodeWatch(loss)

    def evidence(
        self, model: nn.Module, nodes: NodeWatch | None, gradless: set[str], loss: torch.Tensor
    ) -> dict[str, list[str]]:
        """Sentences in explain's words, keyed by the findings they explain; `gradless`:
        the parameters that got no gradient."""
        try:
            self._read()
        except Exception:  # flags the watch cannot read back: it says nothing of them
            self.failed = True
        names = {id(m): n for n, m in model.named_modules()}
        out: dict[str, list[str]] = {}
        fill = self.fills.first and _site_text(self.fills.first, names)
        if self.first_bad is not None:
            made = _site_text(self.first_bad, names)
            out["non-finite"] = [
                (
                    infinite_fills.made_nan(self.first_bad[0], made, fill)
                    if self.from_mask
                    else f"first non-finite value made by {made} from finite inputs"
                )
                + (nan_made.OF_NOTHING if self.of_nothing else "")
                + self.domain_note
            ]
            if nodes is not None and not self.failed and _finite(loss):  # dropped after
                out["non-finite"] += self._backward(nodes, names, dropped=True)
        elif fill and not _finite(loss):
            out["non-finite"] = [infinite_fills.REACHED_LOSS.format(fill=fill)]
        elif self.came_in and self.read_unwritten is not None:
            reader, made = (_site_text(s, names) for s in self.read_unwritten)
            out["non-finite"] = [
                f"no op of this step's forward made NaN/Inf from finite inputs: {reader} read "
                f"them from memory that {made} left uninitialised (a part not written before "
                "that read, or written in place with them)"
            ]
        elif self.came_in:
            out["non-finite"] = [nan_made.before_the_forward(model)]
        elif nodes is not None and not self.failed:
            backward = self._backward(nodes, names)
            if backward:
                out["non-finite"] = backward
        feeding = self.taint.get(id(loss), frozenset())
        for name, param in model.named_parameters():
            name = name.replace("_orig_mod.", "")
            if name in gradless:
                causes = self._cuts_of(param, names, feeding)
                if causes:
                    out[f"none-grad:{name}"] = ["graph cut by " + "; ".join(causes)]
        return out

    def _backward(
        self, nodes: NodeWatch, names: dict[int, str], dropped: bool = False
    ) -> list[str]:
        """The backward node that made the first NaN/Inf gradient, in backward_nan's words
        (`dropped`: the forward's NaN/Inf was masked out before the loss)."""
        found = nodes.first_bad()
        if found is None:
            return []
        node, masked, passed = found
        forward = self.sites.get(id(node))
        where = _site_text(forward, names) if forward else None
        said = backward_nan.sentence(node.name(), where, masked, passed)
        if dropped:
            said = "the loss is finite (that value was masked out); " + said.removeprefix(
                "the forward is finite; "
            )
        return [said]

    def _cuts_of(
        self, param: torch.Tensor, names: dict[int, str], feeding: frozenset[int]
    ) -> list[str]:
        """The cuts whose inputs were computed from `param` and whose outputs the loss was
        computed from, in explain's words (a Python number from `.item()` cannot be followed:
        those are named when no tensor cut is found)."""
        found: dict[str, None] = {}
        chosen = [c for i, c in enumerate(self.cuts) if i in feeding] or [
            c for c in self.cuts if c[1][0] in ("item", "tolist", "numpy", "__float__", "__int__")
        ]
        for kind, site, sources in chosen:
            if len(found) >= MAX_SITES:
                break
            for source in sources:
                if source is param or (
                    not isinstance(source, torch.Tensor)
                    and any(
                        getattr(n, "variable", None) is param for n in hooks.reachable([source])
                    )
                ):
                    text = _site_text(site, names)
                    found.setdefault(
                        f"{kind}: {text}"
                        if kind
                        else f"{text}: its input requires grad, its output does not",
                        None,
                    )
                    break
        return list(found)


def _finite(t: torch.Tensor) -> bool:
    plain = readable(t.detach())
    return plain is not None and bool(torch.isfinite(plain).all())


def _site_text(site: tuple[str, int, str | None], names: dict[int, str]) -> str:
    name, module, line = site
    where = names.get(module, "")
    return f"`{name}`" + (f" at {line}" if line else "") + (f" in `{where}`" if where else "")
