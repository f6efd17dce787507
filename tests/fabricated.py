"""Fabricated stats for the torch-free rule tests: `from fabricated import param, stats`.

A module of its own, not conftest.py: several folders have a conftest.py, and which one
`import conftest` finds depends on the order pytest collected them in."""

from __future__ import annotations

from gradscope.stats import ModuleStats, ParamStats, RunStats


def param(
    name: str,
    norm: float | None = 0.1,
    *,
    shape=(10,),
    depth: int | None = 0,
    requires_grad: bool = True,
    finite: bool = True,
    zero_fraction: float = 0.0,
    weight_norm: float = 1.0,
    grad_max: float | None = None,
) -> ParamStats:
    """A ParamStats; norm=None means the grad is None."""
    has_grad = requires_grad and norm is not None
    return ParamStats(
        name=name,
        module=name.rpartition(".")[0],
        shape=tuple(shape),
        dtype="float32",
        requires_grad=requires_grad,
        has_grad=has_grad,
        grad_norm=norm if has_grad else None,
        grad_max=(grad_max if grad_max is not None else norm) if has_grad else None,
        weight_norm=weight_norm,
        zero_fraction=zero_fraction if has_grad else None,
        finite=finite,
        depth=depth,
    )


def stats(
    *params: ParamStats,
    ran: tuple[str, ...] | None = None,
    loss: float = 1.0,
    loss_finite: bool = True,
    loss_requires_grad: bool = True,
) -> RunStats:
    modules = sorted({p.module for p in params})
    ran_set = set(modules if ran is None else ran)
    return RunStats(
        params=params,
        modules=tuple(ModuleStats(m, "Linear", m in ran_set) for m in modules),
        loss_value=loss,
        loss_finite=loss_finite,
        loss_requires_grad=loss_requires_grad,
        loss_source="scalar output",
        duration_s=0.01,
    )
