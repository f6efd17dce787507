"""Jacobians of a Problem, measured cheaply first and in full only where a check failed.

Numerical derivatives come in columns (two forward calls per input direction),
analytical ones in rows (one backward per output cotangent) or, for forward-mode
AD, in columns (one jvp per direction). The first stage compares the two on

- input directions D: every element of an input with at most EXACT elements;
  for a larger input, SAMPLED exact columns (evenly spaced quantiles of the
  input's values, its smallest and largest value and the one nearest 0, then
  uniform picks) plus DIRECTIONS random unit directions;
- output cotangents V: every element of an output with at most EXACT elements;
  for a larger one, the numerical columns just measured (normalised, so each
  sampled column is read where its mass is) plus PROJECTIONS random unit vectors.

Every entry of V^T J D is a directional derivative along unit vectors, compared
with the same |a - n| <= atol + rtol |n| as slow mode: the tolerance does not
grow with the input, unlike fast mode's single projection whose atol scales
with sum(u) sum(v), which is what lets a 1.01 factor through.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import torch
import torch.autograd.forward_ad as fwAD

EXACT = 32
SAMPLED = 32
DIRECTIONS = 4
PROJECTIONS = 4
ROW_CAP = 4096
"""The explanation reads at most this many rows of an output..."""
BLOCK_CAP = 1 << 24
"""...and at most this many Jacobian entries per (input, output) pair."""


@dataclass(frozen=True)
class Tolerance:
    eps: float
    atol: float
    rtol: float


TOLERANCES = {  # float64 is torch.autograd.gradcheck's default; the rest are looser by need
    torch.float64: Tolerance(1e-6, 1e-5, 1e-3),
    torch.float32: Tolerance(1e-3, 1e-3, 1e-2),
    torch.float16: Tolerance(1e-2, 5e-2, 5e-2),
    torch.bfloat16: Tolerance(1e-1, 1e-1, 1e-1),
}


def tolerance(dtypes: Iterable[torch.dtype]) -> Tolerance:
    """The loosest tolerance any input's dtype needs."""
    chosen = [TOLERANCES.get(d, TOLERANCES[torch.float64]) for d in dtypes]
    return max(chosen, key=lambda t: t.rtol, default=TOLERANCES[torch.float64])


class StageError(Exception):
    """The user's forward, backward or jvp raised."""

    def __init__(self, stage: str, exc: BaseException):
        super().__init__(f"{stage}: {exc}")
        self.stage = stage
        self.original = exc


class Directions:
    """Unit vectors in a space of `n` elements: basis vectors by index, then dense ones."""

    def __init__(self, n: int, basis: list[int], dense: torch.Tensor | None = None):
        self.n, self.basis = n, basis
        self.dense = dense if dense is not None else torch.zeros(n, 0, dtype=torch.float64)

    def __len__(self) -> int:
        return len(self.basis) + self.dense.shape[1]

    def vectors(self) -> Iterator[torch.Tensor]:
        for j in self.basis:
            e = torch.zeros(self.n, dtype=torch.float64)
            e[j] = 1.0
            yield e
        yield from self.dense.T

    def left(self, m: torch.Tensor) -> torch.Tensor:
        """V^T m for m of shape (n, k)."""
        return torch.cat([m[self.basis], self.dense.T @ m])

    def right(self, m: torch.Tensor) -> torch.Tensor:
        """m D for m of shape (k, n)."""
        return torch.cat([m[:, self.basis], m @ self.dense], 1)

    @property
    def exact(self) -> bool:
        return len(self.basis) == self.n


def _unit(n: int, k: int, gen: torch.Generator) -> torch.Tensor:
    u = torch.randn(n, k, generator=gen, dtype=torch.float64)
    return u / u.norm(dim=0, keepdim=True).clamp_min(1e-300)


def input_directions(x: torch.Tensor, gen: torch.Generator) -> Directions:
    n = x.numel()
    if n <= EXACT:
        return Directions(n, list(range(n)))
    flat = x.detach().reshape(-1).double()
    order = torch.argsort(flat)
    picks = order[torch.linspace(0, n - 1, SAMPLED // 2).round().long()].tolist()
    picks.append(int(flat.abs().argmin()))
    for j in torch.randint(n, (4 * SAMPLED,), generator=gen).tolist():
        if len(set(picks)) >= SAMPLED:
            break
        picks.append(j)
    return Directions(n, sorted(set(picks)), _unit(n, DIRECTIONS, gen))


def output_cotangents(m: int, numerical: list[torch.Tensor], gen: torch.Generator) -> Directions:
    if m <= EXACT:
        return Directions(m, list(range(m)))
    cols = torch.cat(numerical, 1) if numerical else torch.zeros(m, 0, dtype=torch.float64)
    norms = cols.norm(dim=0)
    aligned = cols[:, norms > 0] / norms[norms > 0]
    return Directions(m, [], torch.cat([aligned, _unit(m, PROJECTIONS, gen)], 1))


class Evaluator:
    """Calls into the user's code, counted, with its exceptions tagged by stage."""

    def __init__(
        self,
        fn: Any,
        inputs: list[torch.Tensor],
        tol: Tolerance,
        leaves: Callable[[], list[torch.Tensor]] | None = None,
    ):
        self.fn, self.inputs, self.tol = fn, inputs, tol
        self.leaves = leaves or (lambda: [x.detach().clone().requires_grad_() for x in inputs])
        """Fresh inputs for a graph (a module's own parameters are themselves, not copies)."""
        self.calls = 0
        self.grad_output_modified = False
        self._graph: tuple[list[torch.Tensor], list[torch.Tensor]] | None = None
        self._versions: list[int] = []
        self._use_backward = False

    def forward(self, tensors: list[Any]) -> list[torch.Tensor]:
        self.calls += 1
        try:
            return self.fn(*tensors)
        except StageError:
            raise
        except Exception as exc:
            raise StageError("forward", exc) from exc

    def graph(self) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
        """Fresh leaves and the outputs computed from them, kept for every backward call.

        Rebuilt when a leaf changed since (a module parameter perturbed in place by a
        numerical call): the kept graph saw the old version and backward would refuse it.
        """
        if self._graph is None or [x._version for x in self._graph[0]] != self._versions:
            leaves = self.leaves()
            with torch.enable_grad():
                self._graph = leaves, self.forward(leaves)
            self._versions = [x._version for x in leaves]
        return self._graph

    def numerical_columns(self, i: int, dirs: Directions) -> Iterator[list[torch.Tensor]]:
        """Central differences along each direction of input i: per output, a flat column."""
        x, eps = self.inputs[i], self.tol.eps
        with torch.no_grad():
            for plus_x, minus_x in self._steps(x, dirs, eps):
                plus = self.forward([plus_x if k == i else t for k, t in enumerate(self.inputs)])
                minus = self.forward([minus_x if k == i else t for k, t in enumerate(self.inputs)])
                yield [
                    (p.double() - m.double()).reshape(-1) / (2 * eps)
                    for p, m in zip(plus, minus, strict=False)
                ]

    @staticmethod
    def _steps(
        x: torch.Tensor, dirs: Directions, eps: float
    ) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        shape = tuple(x.shape)
        for j in dirs.basis:  # one element moved: cheaper than adding a one-hot vector
            plus, minus, at = x.clone(), x.clone(), unravel(j, shape)
            plus[at] += eps
            minus[at] -= eps
            yield plus, minus
        for d in dirs.dense.T:
            step = (eps * d).reshape(x.shape).to(x.dtype)
            yield x + step, x - step

    def numerical(self, i: int, dirs: Directions) -> list[torch.Tensor]:
        """Per output, the (M_o, len(dirs)) matrix of numerical directional derivatives."""
        return self._stack(list(self.numerical_columns(i, dirs)))

    def vjp_rows(self, o: int, covs: Iterable[torch.Tensor]) -> Iterator[list[torch.Tensor | None]]:
        """Analytical v^T J for output o, per cotangent: per input a flat row (None: no grad)."""
        leaves, outs = self.graph()
        out = outs[o]
        for v in covs:
            grads = (
                self._grads(out, leaves, v.reshape(out.shape).to(out.dtype))
                if out.requires_grad
                else [None] * len(leaves)
            )
            yield [None if g is None else g.detach().reshape(-1).double() for g in grads]

    def vjp(self, o: int, covs: Iterable[torch.Tensor]) -> tuple[list[torch.Tensor], list[bool]]:
        """Per input the (r, N_i) matrix of analytical rows, and whether all were None."""
        sizes = [x.numel() for x in self.inputs]
        rows: list[list[torch.Tensor]] = [[] for _ in sizes]
        none = [True] * len(sizes)
        for grads in self.vjp_rows(o, covs):
            for i, g in enumerate(grads):
                none[i] = none[i] and g is None
                rows[i].append(torch.zeros(sizes[i], dtype=torch.float64) if g is None else g)
        return [
            torch.stack(r) if r else torch.zeros(0, n, dtype=torch.float64)
            for r, n in zip(rows, sizes, strict=False)
        ], none

    def _grads(
        self, out: torch.Tensor, leaves: list[torch.Tensor], v: torch.Tensor
    ) -> list[torch.Tensor | None]:
        self.calls += 1
        sent = v.clone()
        try:
            if not self._use_backward:
                try:
                    return list(
                        torch.autograd.grad(out, leaves, v, retain_graph=True, allow_unused=True)
                    )
                except RuntimeError as exc:  # reentrant checkpointing refuses .grad()
                    if "incompatible with .grad()" not in str(exc):
                        raise
                    self._use_backward = True
            for leaf in leaves:
                leaf.grad = None
            torch.autograd.backward(out, v, retain_graph=True)
            return [leaf.grad for leaf in leaves]
        except Exception as exc:
            raise StageError("backward", exc) from exc
        finally:
            self.grad_output_modified |= not torch.equal(v, sent)

    def jvp_columns(self, i: int, dirs: Directions) -> Iterator[list[torch.Tensor]]:
        """Forward-mode J d for input i, per direction: per output a flat column."""

        x = self.inputs[i]
        for d in dirs.vectors():
            self.calls += 1
            try:
                with torch.no_grad(), fwAD.dual_level():
                    dual = fwAD.make_dual(x, d.reshape(x.shape).to(x.dtype))
                    outs = self.fn(*[dual if k == i else t for k, t in enumerate(self.inputs)])
                    tangents = [fwAD.unpack_dual(out).tangent for out in outs]
            except Exception as exc:
                raise StageError("jvp", exc) from exc
            yield [
                torch.zeros(out.numel(), dtype=torch.float64)
                if t is None
                else t.reshape(-1).double()
                for out, t in zip(outs, tangents, strict=False)
            ]

    def jvp(self, i: int, dirs: Directions) -> list[torch.Tensor]:
        return self._stack(list(self.jvp_columns(i, dirs)))

    def _stack(self, cols: list[list[torch.Tensor]]) -> list[torch.Tensor]:
        if not cols:  # no directions: one call for the output sizes
            with torch.no_grad():
                return [
                    torch.zeros(out.numel(), 0, dtype=torch.float64)
                    for out in self.forward(list(self.inputs))
                ]
        return [torch.stack(per_output, 1) for per_output in zip(*cols, strict=False)]


@dataclass(frozen=True)
class PairStat:
    """First-stage verdict for one (input, output) pair."""

    ok: bool
    max_abs: float
    none: bool = False
    """backward returned None for this input on every call."""


def compare(a: torch.Tensor, n: torch.Tensor, tol: Tolerance, none: bool = False) -> PairStat:
    err = (a - n).abs()
    if err.numel() == 0:
        return PairStat(True, 0.0, none)
    bad = bool((err > tol.atol + tol.rtol * n.abs()).any() | ~torch.isfinite(err).all())
    return PairStat(not bad, float(err.max()), none)


def unravel(flat: int, shape: tuple[int, ...]) -> tuple[int, ...]:
    """Flat (row-major) index → multi-index, whatever the tensor's strides."""
    index: list[int] = []
    for size in reversed(shape):
        flat, rest = divmod(flat, size)
        index.append(rest)
    return tuple(reversed(index))


def basis(n: int, idx: list[int] | None) -> Directions:
    return Directions(n, list(range(n)) if idx is None else list(idx))
