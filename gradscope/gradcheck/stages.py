"""The two stages of each check: a cheap sampled verdict, then full blocks where it failed.

Stage 1 (`first_stage`) compares projected Jacobians on every (input, output)
pair (see gradscope/gradcheck/jacobian.py for the sampling). Stage 2 (`Explainer`)
measures the failing pairs, and only those, entry by entry so the diagnosis can
name the worst elements; numerical columns are shared by every failing output
of an input, analytical rows by every failing input of an output.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from gradscope.gradcheck.inputs import Problem
from gradscope.gradcheck.jacobian import (
    BLOCK_CAP,
    ROW_CAP,
    Directions,
    Evaluator,
    PairStat,
    StageError,
    Tolerance,
    basis,
    compare,
    input_directions,
    output_cotangents,
)
from gradscope.gradcheck.results import InputInfo

Pair = tuple[int, int]
"""(input index, output index)."""


@dataclass
class Stage1:
    dirs: list[Directions]
    numerical: list[list[torch.Tensor]]
    """[input][output]: numerical J D, shape (M_o, len(D_i))."""
    pairs: dict[Pair, PairStat] = field(default_factory=dict)
    linear: dict[Pair, bool] = field(default_factory=dict)
    """Whether backward(2v) == 2 backward(v) (a backward must be linear in grad_output)."""

    def failing(self) -> list[Pair]:
        return [p for p, s in self.pairs.items() if not s.ok or not self.linear.get(p, True)]


def first_stage(
    ev: Evaluator, gen: torch.Generator, mode: str, prior: Stage1 | None = None
) -> Stage1:
    """Sampled verdicts; a prior stage's numerical columns are reused (same function)."""
    if prior is None:
        dirs = [input_directions(x, gen) for x in ev.inputs]
        numerical = [ev.numerical(i, d) for i, d in enumerate(dirs)]
        prior = Stage1(dirs, numerical)
    stage = Stage1(prior.dirs, prior.numerical)
    if mode == "backward":
        _backward_pairs(ev, gen, stage)
    else:
        for i, d in enumerate(stage.dirs):
            analytical = ev.jvp(i, d)
            for o, a in enumerate(analytical):
                stage.pairs[(i, o)] = compare(a, stage.numerical[i][o], ev.tol)
    return stage


def _backward_pairs(ev: Evaluator, gen: torch.Generator, stage: Stage1) -> None:
    _, outs = ev.graph()
    n = len(ev.inputs)
    for o, out in enumerate(outs):
        cov = output_cotangents(out.numel(), [stage.numerical[i][o] for i in range(n)], gen)
        rows, none = ev.vjp(o, cov.vectors())
        doubled = _doubled(ev, o, cov) if len(cov) and out.requires_grad else None
        for i in range(n):
            stage.pairs[(i, o)] = compare(
                stage.dirs[i].right(rows[i]), cov.left(stage.numerical[i][o]), ev.tol, none[i]
            )
            if doubled is not None:
                stage.linear[(i, o)] = _scales(doubled[i][0], 2 * rows[i][0], ev.tol)


def _scales(doubled: torch.Tensor, twice: torch.Tensor, tol: Tolerance) -> bool:
    """backward(2v) == 2 backward(v), NaN where NaN (a non-finite gradient is diagnosed
    as such, not as a backward that ignores grad_output)."""
    finite = torch.isfinite(doubled) & torch.isfinite(twice)
    same = bool((torch.isfinite(doubled) == torch.isfinite(twice)).all())
    return same and compare(doubled[finite], twice[finite], tol).ok


def _doubled(ev: Evaluator, o: int, cov: Directions) -> list[torch.Tensor]:
    first = next(cov.vectors())
    return ev.vjp(o, [2 * first])[0]


class Sparse:
    """The non-zero entries of a (rows, cols) block, keyed `r * cols + c`, sorted.

    An elementwise function's 3000 x 3000 block has 3000 of them: comparing those, not
    nine million dense entries, is what keeps the explanation cheap.
    """

    def __init__(self, shape: tuple[int, int], keys: torch.Tensor, values: torch.Tensor):
        order = torch.argsort(keys)
        self.shape, self.keys, self.values = shape, keys[order], values[order]

    @classmethod
    def build(cls, shape: tuple[int, int], vectors: list[torch.Tensor], by: str) -> Sparse:
        """From dense rows (`by="rows"`) or columns (`by="cols"`)."""
        keys, values = [], []
        for k, v in enumerate(vectors):
            nz = v.nonzero().squeeze(1)
            keys.append(k * shape[1] + nz if by == "rows" else nz * shape[1] + k)
            values.append(v[nz])
        if not keys:
            return cls(shape, torch.zeros(0, dtype=torch.long), torch.zeros(0, dtype=torch.float64))
        return cls(shape, torch.cat(keys), torch.cat(values))

    def at(self, keys: torch.Tensor) -> torch.Tensor:
        """Values at sorted `keys`, 0 where this block has no entry."""
        if not self.keys.numel():
            return torch.zeros(keys.numel(), dtype=torch.float64)
        pos = torch.searchsorted(self.keys, keys).clamp_max(self.keys.numel() - 1)
        return torch.where(self.keys[pos] == keys, self.values[pos], 0.0)

    def permuted(self, rows: torch.Tensor | None, cols: torch.Tensor | None) -> Sparse:
        """Entries moved by a permutation of rows and/or columns (e.g. a transpose)."""
        r, c = self.keys // self.shape[1], self.keys % self.shape[1]
        r = r if rows is None else rows[r]
        c = c if cols is None else cols[c]
        return Sparse(self.shape, r * self.shape[1] + c, self.values)


@dataclass
class Block:
    """Analytical and numerical entries of one pair, on rows x cols (None: all of them)."""

    analytical: Sparse
    numerical: Sparse
    rows: list[int] | None
    cols: list[int] | None
    none: bool = False

    @property
    def full(self) -> bool:
        return self.rows is None and self.cols is None


class Explainer:
    """Entry-by-entry blocks for the failing pairs, each measurement shared between them."""

    def __init__(self, ev: Evaluator, stage: Stage1, gen: torch.Generator):
        self.ev, self.stage, self.gen = ev, stage, gen
        self.sizes_out = [m.shape[0] for m in stage.numerical[0]] if stage.numerical else []
        self._num: dict[tuple[int, tuple[int, ...] | None], list[Sparse]] = {}

    def columns(self, i: int) -> list[int] | None:
        n = self.ev.inputs[i].numel()
        tallest = min(max(self.sizes_out, default=1), ROW_CAP)
        if n * tallest <= BLOCK_CAP:
            return None
        budget = BLOCK_CAP // tallest
        extra = torch.randperm(n, generator=self.gen)[:budget].tolist()
        return sorted(set(self.stage.dirs[i].basis + extra))[:budget]

    def rows(self, o: int, cols: list[list[int] | None]) -> list[int] | None:
        """All rows, or for a huge output the rows with the sampled columns' flat indices
        (the diagonal of an elementwise function) plus random ones."""
        m = self.sizes_out[o]
        if m <= ROW_CAP:
            return None
        same = sorted({j for c in cols for j in (c or []) if j < m})[: ROW_CAP // 2]
        extra = torch.randperm(m, generator=self.gen)[:ROW_CAP].tolist()
        return sorted(set(same) | set(extra))[:ROW_CAP]

    def numerical(self, i: int, o: int, rows: list[int] | None, cols: list[int] | None) -> Sparse:
        key = (i, None if cols is None else tuple(cols))
        if key not in self._num:
            n = self.ev.inputs[i].numel()
            per_output = list(zip(*self.ev.numerical_columns(i, basis(n, cols)), strict=False))
            width = n if cols is None else len(cols)
            self._num[key] = [
                Sparse.build((m, width), list(c), "cols")
                for m, c in zip(self.sizes_out, per_output, strict=False)
            ]
        return _rows(self._num[key][o], rows)

    def blocks(self, failing: list[Pair], mode: str) -> dict[Pair, Block]:
        cols = {i: self.columns(i) for i, _ in failing}
        rows = {o: self.rows(o, [cols[i] for i, oo in failing if oo == o]) for _, o in failing}
        analytical: dict[Pair, Sparse] = {}
        none: dict[Pair, bool] = {}
        if mode == "backward":
            for o in sorted(rows):
                found = self._analytical_rows(o, rows[o], [i for i, oo in failing if oo == o], cols)
                for i, (block, was_none) in found.items():
                    analytical[(i, o)], none[(i, o)] = block, was_none
        else:
            for i in sorted(cols):
                n = self.ev.inputs[i].numel()
                picks = cols[i]
                width = n if picks is None else len(picks)
                per_output = zip(*self.ev.jvp_columns(i, basis(n, cols[i])), strict=False)
                for o, c in enumerate(per_output):
                    analytical[(i, o)] = _rows(
                        Sparse.build((self.sizes_out[o], width), list(c), "cols"), rows.get(o)
                    )
        return {
            (i, o): Block(
                analytical[(i, o)],
                self.numerical(i, o, rows[o], cols[i]),
                rows[o],
                cols[i],
                none.get((i, o), False),
            )
            for i, o in failing
        }

    def _analytical_rows(
        self, o: int, rows: list[int] | None, inputs: list[int], cols: dict[int, list[int] | None]
    ) -> dict[int, tuple[Sparse, bool]]:
        m = self.sizes_out[o]
        picked: dict[int, list[torch.Tensor]] = {i: [] for i in inputs}
        none = dict.fromkeys(inputs, True)
        for grads in self.ev.vjp_rows(o, basis(m, rows).vectors()):
            for i in inputs:
                g = grads[i]
                none[i] = none[i] and g is None
                g = torch.zeros(self.ev.inputs[i].numel(), dtype=torch.float64) if g is None else g
                picked[i].append(g if cols[i] is None else g[cols[i]])
        height = m if rows is None else len(rows)
        widths = {i: self.ev.inputs[i].numel() if c is None else len(c) for i, c in cols.items()}
        return {
            i: (
                Sparse.build(
                    (height, widths[i]),
                    picked[i],
                    "rows",
                ),
                none[i],
            )
            for i in inputs
        }


def _rows(block: Sparse, rows: list[int] | None) -> Sparse:
    """Keep the given rows of a full-height block, renumbered 0..len(rows)-1."""
    if rows is None:
        return block
    where = torch.full((block.shape[0],), -1, dtype=torch.long)
    where[torch.tensor(rows, dtype=torch.long)] = torch.arange(len(rows))
    r, c = block.keys // block.shape[1], block.keys % block.shape[1]
    keep = where[r] >= 0
    return Sparse(
        (len(rows), block.shape[1]), where[r[keep]] * block.shape[1] + c[keep], block.values[keep]
    )


def _cotangent_info(output_name: str, out: torch.Tensor) -> InputInfo:
    """The grad_output of one output, an input of the second-order function."""
    dtype = str(out.dtype).removeprefix("torch.")
    return InputInfo(f"grad_{output_name}", None, "grad_output", tuple(out.shape), dtype)


def _refuse_once_differentiable(grads: tuple[torch.Tensor | None, ...]) -> None:
    """A backward marked @once_differentiable leaves an error node where its gradient's
    graph would be."""
    if any(g is not None and "Error" in type(g.grad_fn).__name__ for g in grads):
        raise StageError(
            "backward",
            RuntimeError(
                "backward is marked @once_differentiable and cannot be differentiated twice"
            ),
        )


def second_order(p: Problem, gen: torch.Generator) -> Problem | None:
    """The backward as a function of (inputs, grad_outputs): gradgradcheck's function."""
    with torch.enable_grad():
        outs = Evaluator(p.fn, p.inputs, Tolerance(0, 0, 0)).forward(p.leaves())
    diff = [k for k, out in enumerate(outs) if out.requires_grad]
    if not diff:
        return None
    cotangents = [
        torch.randn(outs[k].shape, generator=gen, dtype=torch.float64).to(outs[k].dtype)
        for k in diff
    ]
    n = len(p.inputs)

    def fn2(*tensors: Any) -> list[torch.Tensor]:
        with torch.enable_grad():
            xs = [x if x.requires_grad else x.detach().requires_grad_() for x in tensors[:n]]
            first = p.fn(*xs)
            xs = p.wrt(xs)  # a module's own parameters hold the values just written
            try:
                grads = torch.autograd.grad(
                    [first[k] for k in diff],
                    xs,
                    list(tensors[n:]),
                    create_graph=True,
                    allow_unused=True,
                )
            except Exception as exc:
                raise StageError("backward", exc) from exc
        _refuse_once_differentiable(grads)
        return [torch.zeros_like(x) if g is None else g for g, x in zip(grads, xs, strict=False)]

    infos = p.infos + [_cotangent_info(p.output_names[k], outs[k]) for k in diff]
    return Problem(
        p.label,
        p.kind,
        fn2,
        p.inputs + cotangents,
        infos,
        p.function,
        output_names=[f"grad[{info.name}]" for info in p.infos],
        owned=list(p.owned or [None] * n) + [None] * len(cotangents),
        generated=p.generated,
    )
