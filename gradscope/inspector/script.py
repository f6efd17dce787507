"""Inspect a training script as it is: run it until a backward, then measure that.

The script runs as `python train.py ARGS` would (`__main__`, its folder on
sys.path, sys.argv set). Global module hooks note which modules run and in
what order; the backward to inspect (the first `loss.backward()` or
`torch.autograd.backward`, or with `step=N` the first one after optimizer
step N-1, counted as `gradscope watch` counts steps) does not run: it stops
the script (script_stop makes that stop impossible to swallow, and refuses
every optimizer step), and gradscope differentiates that loss itself with
respect to the parameters of the outermost modules that ran and that the loss
reaches, exactly as `gradscope inspect` does for a factory target. What the
step hides is said in the report (script_facts).

A script's forward cannot be replayed on its own, so the explanation passes
of a factory target are done live instead (`explain=True`): the forward of
the inspected step alone runs under a TorchFunctionMode that notes, without a
host sync per op, the first op to turn finite inputs into NaN/Inf and the ops
that leave the graph; the backward gradscope runs notes the first node that
returned NaN/Inf from finite gradients.
"""

from __future__ import annotations

import os
import runpy
import sys
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Any

import torch
from torch import nn

from gradscope.errors import TargetError, UserCodeError, is_own_file, is_user_file, short_path
from gradscope.inspector import hooks, probe, script_facts, script_stop
from gradscope.stats import RunStats

with warnings.catch_warnings():  # torch warns here when numpy is not installed
    warnings.filterwarnings("ignore", message="Failed to initialize NumPy")
    from torch.overrides import TorchFunctionMode

FIRST_NONFINITE = script_stop.FIRST_NONFINITE


class _Modules:
    """Every module call until the first backward: first-call order, and the outermost
    modules with trainable parameters."""

    def __init__(self) -> None:
        self.order: dict[int, int] = {}
        self.roots: dict[int, nn.Module] = {}
        self.depth = 0
        self.frozen = False
        self.scales: hooks.LossScales | None = None
        self.versions: dict[int, tuple[str, torch.Tensor, int]] = {}
        self.stack: list[int] = []
        """id() of the modules inside their forward now, innermost last (for the live watch;
        not kept while torch.compile traces: what it compiles is not watched op by op)."""

    def enter(self, module: nn.Module) -> None:
        if not self.frozen:
            self.order.setdefault(id(module), len(self.order))
            if self.depth == 0 and _outside_backward() and _trainable(module):
                self.roots.setdefault(id(module), module)
        self.depth += 1
        if not torch.compiler.is_compiling():
            self.stack.append(id(module))

    def leave(self, _module: nn.Module) -> None:
        self.depth = max(self.depth - 1, 0)
        if self.stack and not torch.compiler.is_compiling():
            self.stack.pop()

    def freeze(self) -> None:
        """At the first backward: what ran until then is the step (a script that goes on
        after the stop must not add to it)."""
        self.frozen = True
        for root in self.roots.values():
            for name, p in root.named_parameters():
                self.versions[id(p)] = (name, p, p._version)

    def unscaled(self, loss: torch.Tensor) -> torch.Tensor:
        """`loss` as it was before a GradScaler scaled it."""
        scale = self.scales.get(loss) if self.scales is not None else None
        return scale.loss if scale is not None else loss

    def written(self) -> list[str]:
        """Parameters written in place since the first backward."""
        return [name for name, p, v in self.versions.values() if p._version != v]


def _outside_backward() -> bool:
    """Not inside a backward: a checkpoint recomputing its region there calls a submodule
    with no module around it, and that submodule is not a model the script trains."""
    return torch._C._current_graph_task_id() == -1


def _trainable(module: nn.Module) -> bool:
    return any(p.requires_grad for p in module.parameters())


def _model(roots: list[nn.Module]) -> nn.Module:
    """The one root, or a ModuleDict of several (a GAN's G and D) keyed by class name."""
    roots = [script_facts.unwrap_compiled(m) for m in roots]
    if len(roots) == 1:
        return roots[0]
    names: dict[str, nn.Module] = {}
    for m in roots:
        name = type(m).__name__
        names[name if name not in names else f"{name}_{len(names)}"] = m
    return nn.ModuleDict(names)


@contextmanager
def _watched(seen: _Modules) -> Iterator[None]:
    with (
        hooks.global_module_hooks(seen.enter, seen.leave),
        hooks.loss_scales() as scales,
        warnings.catch_warnings(),
    ):
        # gradscope's own global hooks are what torch.compile warns about here
        warnings.filterwarnings("ignore", message=r"Using `torch.compile\(module\)` when there")
        seen.scales = scales
        yield


@dataclass
class Inspected:
    """A script's inspected step: the model it trained, its stats, and what the live watch
    found, as evidence for the findings it explains: 'non-finite' (GS102, GS103) and
    'none-grad:NAME' (GS101 of the parameter NAME)."""

    model: nn.Module
    stats: RunStats
    evidence: dict[str, list[str]] = field(default_factory=dict)


def run(path: str, argv: Sequence[str] = ()) -> tuple[nn.Module, RunStats]:
    """Run `path` until its first backward; the model it trained and that step's stats."""
    inspected = run_step(path, argv)
    return inspected.model, inspected.stats


def run_step(
    path: str,
    argv: Sequence[str] = (),
    step: int | str | None = None,
    explain: bool = False,
    found: Callable[[int, str], None] | None = None,
) -> Inspected:
    """Run `path` until the backward of optimizer step `step` and measure it.

    `step`: None, the first backward; N >= 1, the first backward after step N-1
    (the one whose gradients step N applies; steps numbered as `gradscope watch`
    numbers them); FIRST_NONFINITE, the first step whose loss or gradients are
    non-finite (the script runs once to find it and once more to stop there).
    `explain`: watch the step's forward live to say which op made NaN/Inf or cut
    the graph (costs one watched forward). `found(step, what)`: told between the two runs
    of FIRST_NONFINITE which step the first found ("loss" or "gradients").
    """
    if not os.path.isfile(path):
        raise TargetError(f"{path}: no such file")
    if step == FIRST_NONFINITE:
        if int(os.environ.get("WORLD_SIZE", "1") or 1) > 1:
            raise TargetError(
                f"--step {FIRST_NONFINITE} under torchrun: each rank would judge its own loss "
                "and stop at a different step; find the step with `gradscope watch`, then "
                "use --step N"
            )
        scan = _run_once(path, argv, FIRST_NONFINITE, explain=False)
        at = scan.stopper.found
        if at is None:
            raise TargetError(
                f"{path}: the loss and the gradients stayed finite over all "
                f"{_steps(scan.stopper.steps)} the script made: no non-finite step to inspect"
            )
        what = scan.stopper.found_by
        if found is not None:
            found(at, what)
        verb = "is" if what == "loss" else "are"
        why = f"the first step whose {what} {verb} non-finite (found by a first run; run again"
        return _run_once(path, argv, at, explain, why=why + " to stop there)").result()
    if step is not None and (isinstance(step, bool) or not isinstance(step, int) or step < 1):
        raise TargetError(
            f"step must be an optimizer step number >= 1 or {FIRST_NONFINITE!r}, not {step!r}"
        )
    return _run_once(path, argv, step, explain).result()


def _steps(n: int) -> str:
    return f"{n} optimizer step" + ("" if n == 1 else "s")


class _Run:
    def __init__(
        self,
        path: str,
        seen: _Modules,
        stopper: script_stop.Stopper,
        watch: _LiveWatch | None,
        ended: str | None,
        why: str,
    ) -> None:
        self.path, self.seen, self.stopper, self.watch = path, seen, stopper, watch
        self.ended, self.why = ended, why

    def result(self) -> Inspected:
        return _measure(self.path, self.seen, self.stopper, self.ended, self.watch, self.why)


def _run_once(
    path: str, argv: Sequence[str], step: int | str | None, explain: bool, why: str = ""
) -> _Run:
    seen = _Modules()
    watch = _LiveWatch(seen) if explain else None
    stopper = script_stop.Stopper(
        base=sys._getframe(),
        on_capture=lambda: _captured(seen, watch),
        step=step,
        on_window=watch.start if watch is not None else lambda: None,
        unscaled=seen.unscaled,
    )
    old_argv, old_path = sys.argv, list(sys.path)
    sys.argv = [path, *argv]
    sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
    ended: str | None = None
    before = _before(step)
    try:
        with _watched(seen), script_stop.installed(stopper):
            runpy.run_path(path, run_name="__main__")
        ended = "it ran to its end"
    except script_stop.Stop:
        pass
    except SystemExit as exc:
        if not stopper.stopped:
            raise TargetError(
                f"{path} exited (code {exc.code}) {before}{_made(stopper, step)}"
            ) from None
        ended = f"it then called sys.exit({exc.code!r})"
    except Exception as exc:
        if not stopper.stopped:
            raise UserCodeError(f"running {path}", exc) from exc
        ended = f"it then raised {type(exc).__name__}"
    finally:
        sys.argv, sys.path[:] = old_argv, old_path
        if watch is not None:
            watch.stop(final=True)
    if stopper.error is not None:
        raise TargetError(stopper.error)
    if step == FIRST_NONFINITE:
        return _Run(path, seen, stopper, watch, ended, why)
    if stopper.capture is None:
        if isinstance(step, int) and stopper.steps < step:
            raise TargetError(
                f"{path}: the script made only {_steps(stopper.steps)}; there is no step "
                f"{step} to inspect"
            )
        if isinstance(step, int) and step > 1:
            raise TargetError(
                f"{path}: no backward() came between optimizer steps {step - 1} and {step}"
            )
        raise TargetError(f"{path} finished without calling backward(): nothing to inspect")
    return _Run(path, seen, stopper, watch, ended, why)


def _before(step: int | str | None) -> str:
    if isinstance(step, int):
        return f"before the backward of step {step}"
    return "before calling backward()"


def _made(stopper: script_stop.Stopper, step: int | str | None) -> str:
    return f" (after {_steps(stopper.steps)})" if isinstance(step, int) and step > 1 else ""


def _captured(seen: _Modules, watch: _LiveWatch | None) -> None:
    if watch is not None:
        watch.stop()
    seen.freeze()


def _measure(
    path: str,
    seen: _Modules,
    stopper: script_stop.Stopper,
    ended: str | None,
    watch: _LiveWatch | None,
    why: str = "",
) -> Inspected:
    capture = stopper.capture
    assert capture is not None
    if not seen.roots:
        raise TargetError(
            f"{path} called backward() before any nn.Module with trainable parameters ran"
        )
    written = seen.written()
    if written:
        raise TargetError(
            f"{path} wrote to {', '.join(written[:3])} in place after the backward() gradscope "
            "stopped it at (not through a torch.optim optimizer: those are refused); that step "
            "cannot be measured any more"
        )
    scale = seen.scales.get(capture.loss) if seen.scales is not None else None
    roots, left_out = script_facts.reached(list(seen.roots.values()), capture.loss)
    model = _model(roots)
    order = {name: seen.order[id(m)] for name, m in model.named_modules() if id(m) in seen.order}
    name = os.path.basename(path)
    if stopper.step is None:
        source = f"the first backward() of {name}"
    else:
        source = f"the first backward() of optimizer step {stopper.step} of {name}"
    if capture.where:
        source += f" ({capture.where})"
    if why:
        source += f", {why}"
    notes = [
        script_facts.loss_scaling(scale.loss if scale is not None else capture.loss),
        _left_out(left_out),
        stopper.carried_on(ended),
    ]
    source = "; ".join([source, *(n for n in notes if n)])
    nodes = watch.watch_backward(capture.loss) if watch is not None else None
    try:
        stats = probe.measure(
            model, capture.loss, capture.gradient, source, order, time.perf_counter(), scale
        )
    finally:
        if nodes is not None:
            nodes.remove()
    stats = script_facts.strip_compiled_names(stats, model)
    stats = replace(stats, timed="backward+stats (the forward ran in the script)")
    gradless = {p.name for p in stats.params if p.requires_grad and not p.has_grad}
    evidence = watch.evidence(model, nodes, gradless, capture.loss) if watch is not None else {}
    return Inspected(model, stats, evidence)


def _left_out(models: list[nn.Module]) -> str | None:
    if not models:
        return None
    names = ", ".join(type(script_facts.unwrap_compiled(m)).__name__ for m in models)
    whose = "its" if len(models) == 1 else "their"
    return f"{names} ran before it but this loss reaches none of {whose} parameters: left out"


# --- the live watch: the explanation passes of a step that cannot be replayed ----------------

MAX_CUTS = 256
"""Calls that leave the graph kept by the live watch (each keeps its inputs' graph alive)."""
MAX_SITES = 3
CHECK_EVERY = 256
"""Ops between two reads of the non-finite flags (one host sync each) in the live watch."""


class _LiveWatch(TorchFunctionMode):
    """Every torch call of the inspected step's forward: the first one to make NaN/Inf from
    finite inputs, and the calls that leave the graph (`.detach()`, `.item()`, ...)."""

    def __init__(self, seen: _Modules) -> None:
        super().__init__()
        self.seen = seen
        self.active = False
        self.entered = False
        self.pending: list[tuple[tuple[str, int, str | None], torch.Tensor, list[Any]]] = []
        """(op, a device flag set when an output is non-finite, its inputs) not read back
        yet (the inputs are kept until then: CHECK_EVERY ops at most)."""
        self.failed = False
        """An op the watch could not read: it stopped watching (nothing is said)."""
        self.came_in = False
        """The first non-finite output came from non-finite inputs from outside the step."""
        self.first_bad: tuple[str, int, str | None] | None = None
        self.cuts: list[tuple[str, tuple[str, int, str | None], list[Any]]] = []
        """(kind, op, what its graded inputs came from: nodes or leaf tensors) of each call
        whose inputs require grad and whose outputs do not."""
        self._kinds: dict[Any, str] = {}
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
        from gradscope.inspector import explain

        name = explain.op_name(func)
        inputs = list(hooks.tensors_in((args, kwargs)))
        results = list(hooks.tensors_in(out))
        outs = [t for t in results if t.is_floating_point() or t.is_complex()]
        marks: frozenset[int] = frozenset()
        for t in inputs:
            marks |= self.taint.get(id(t), frozenset())
        if any(t.requires_grad for t in inputs) and not any(t.requires_grad for t in outs):
            if outs or name in explain.CUT_KINDS:  # not an integer op (argmax, a mask)
                cut = self._cut(name, inputs, graded)
                if cut is not None:
                    marks |= {cut}
        if marks:
            for t in results:  # what was computed from a cut's output, down to the loss
                self.taint[id(t)] = marks
                self.keep.append(t)
        if not outs:
            return
        line = self._user_line()
        if line is None:
            return  # a call gradscope made (its GradScaler.scale wrapper), not the script's
        site = self._site(name, line)
        for t in outs:
            if t.grad_fn is not None:
                self.sites[id(t.grad_fn)] = site  # the newest: an id may be reused
        if self.first_bad is not None or self.came_in:
            return
        flags = [~torch.isfinite(t).all() for t in map(_readable, outs) if t is not None]
        if not flags:
            return
        bad = (
            flags[0]
            if len(flags) == 1
            else torch.stack([f.to(flags[0].device) for f in flags]).any()
        )
        floats = [t for t in inputs if t.is_floating_point() or t.is_complex()]
        self.pending.append((site, bad, [r for r in map(_readable, floats) if r is not None]))
        if len(self.pending) >= CHECK_EVERY:
            self._read()

    def _cut(self, name: str, inputs: list[torch.Tensor], graded: bool) -> int | None:
        from gradscope.inspector import explain

        if len(self.cuts) >= MAX_CUTS:
            return None
        line = self._user_line()
        if line is None:
            return None
        if not graded:
            kind = "a torch.no_grad() (or inference_mode) region"
        elif name in explain.CUT_KINDS:
            kind = explain.CUT_KINDS[name]
        else:
            kind = ""
        sources = [t.grad_fn if t.grad_fn is not None else t for t in inputs if t.requires_grad]
        self.cuts.append((kind, self._site(name, line), sources))
        return len(self.cuts) - 1

    def _user_line(self) -> str | None:
        """explain.user_line, with each code object's kind kept (it runs for every op)."""
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
        return (name, self.seen.stack[-1] if self.seen.stack else 0, line)

    def _read(self) -> None:
        """One host sync: the first op with a non-finite output, if any. Its inputs come from
        ops before it, all finite, or from outside the watched forward (the weights, the
        batch): when one of those is non-finite, no op of the step made it."""
        pending, self.pending = self.pending, []
        if not pending or self.first_bad is not None or self.came_in:
            return
        device = pending[0][1].device
        flags = torch.stack([p[1].to(device) for p in pending]).cpu().tolist()
        for (site, _, inputs), bad in zip(pending, flags, strict=True):
            if bad:
                if all(bool(torch.isfinite(t).all()) for t in inputs):
                    self.first_bad = site
                else:
                    self.came_in = True
                return

    def watch_backward(self, loss: torch.Tensor) -> _NodeWatch:
        return _NodeWatch(loss)

    def evidence(
        self, model: nn.Module, nodes: _NodeWatch | None, gradless: set[str], loss: torch.Tensor
    ) -> dict[str, list[str]]:
        """Sentences in explain's words, keyed by the findings they explain; `gradless`:
        the parameters that got no gradient."""
        try:
            self._read()
        except Exception:  # flags the watch cannot read back: it says nothing of them
            self.failed = True
        names = {id(m): n for n, m in model.named_modules()}
        out: dict[str, list[str]] = {}
        if self.first_bad is not None:
            out["non-finite"] = [
                f"first non-finite value made by {_site_text(self.first_bad, names)} "
                "from finite inputs"
            ]
        elif self.came_in:
            out["non-finite"] = [_before_the_forward(model)]
        elif nodes is not None and not self.failed:
            node = nodes.first_bad()
            if node is not None:
                forward = self.sites.get(id(node))
                out["non-finite"] = [
                    f"the forward is finite; backward node {node.name()} returned NaN/Inf "
                    "from finite gradients"
                    + (f" (its forward op is {_site_text(forward, names)})" if forward else "")
                ]
        feeding = self.taint.get(id(loss), frozenset())
        for name, param in model.named_parameters():
            name = name.replace("_orig_mod.", "")
            if name in gradless:
                causes = self._cuts_of(param, names, feeding)
                if causes:
                    out[f"none-grad:{name}"] = ["graph cut by " + "; ".join(causes)]
        return out

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


def _readable(t: torch.Tensor) -> torch.Tensor | None:
    """`t` as a plain tensor whose values can be read: a DTensor's local shard (no
    collective), None for a meta, sparse or other subclass tensor."""
    to_local = getattr(t, "to_local", None)
    if to_local is not None and type(t) is not torch.Tensor:
        t = to_local()
    if type(t) not in (torch.Tensor, nn.Parameter) or t.is_meta or t.layout != torch.strided:
        return None
    return t


def _before_the_forward(model: nn.Module) -> str:
    """NaN/Inf in the forward that no op of it made: it was in the weights or the batch."""
    named = [(n.replace("_orig_mod.", ""), p) for n, p in model.named_parameters()]
    with torch.no_grad():
        readable = [(n, _readable(p.detach())) for n, p in named]
        bad = [n for n, p in readable if p is not None and not bool(torch.isfinite(p).all())]
    if bad:
        shown = ", ".join(bad[:4]) + (f" (+{len(bad) - 4} more)" if len(bad) > 4 else "")
        return (
            "no op of this step's forward made NaN/Inf from finite inputs: the weights already "
            f"held them ({shown}), written by an earlier step: inspect that one "
            "(--step first-nonfinite)"
        )
    return (
        "no op of this step's forward made NaN/Inf from finite inputs: they came in with its "
        "inputs (the batch, or a tensor kept from an earlier step)"
    )


def _site_text(site: tuple[str, int, str | None], names: dict[int, str]) -> str:
    name, module, line = site
    where = names.get(module, "")
    return f"`{name}`" + (f" at {line}" if line else "") + (f" in `{where}`" if where else "")


class _NodeWatch:
    """Hooks on every node of the loss's graph for gradscope's own backward: the first node,
    in the order the backward ran them, that returned NaN/Inf from finite gradients."""

    def __init__(self, loss: torch.Tensor) -> None:
        self.order: list[tuple[Any, torch.Tensor]] = []
        self.handles = []
        for node in hooks.graph_nodes(loss):
            self.handles.append(node.register_hook(self._hook(node)))

    def _hook(self, node: Any) -> Any:
        def hook(grad_inputs: Any, grad_outputs: Any) -> None:
            # the gradients a node is given come from nodes that ran before it (or the
            # loss's own, finite): the first node to return NaN/Inf made them
            made = [g for g in grad_inputs if isinstance(g, torch.Tensor)]
            if not made:
                return
            try:
                with torch.no_grad():
                    flags = [
                        ~torch.isfinite(g).all() for g in map(_readable, made) if g is not None
                    ]
                    if not flags:
                        return
                    bad = flags[0] if len(flags) == 1 else torch.stack(flags).any()
            except Exception:  # a gradient the watch cannot read: the backward comes first
                return
            self.order.append((node, bad))

        return hook

    def remove(self) -> None:
        for handle in self.handles:
            handle.remove()
        self.handles = []

    def first_bad(self) -> Any:
        if not self.order:
            return None
        flags = torch.stack([b.to(self.order[0][1].device) for _, b in self.order]).cpu().tolist()
        return next((node for (node, _), bad in zip(self.order, flags, strict=True) if bad), None)
