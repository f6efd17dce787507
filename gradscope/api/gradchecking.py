"""`gradscope gradcheck` as one function: custom autograd Functions checked against
numerical derivatives, each given as on the command line."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from gradscope import config
from gradscope.api.arguments import settings_or_default
from gradscope.config import CheckEntry
from gradscope.errors import TargetError
from gradscope.gradcheck import options_for, run
from gradscope.gradcheck.findings import judged
from gradscope.gradcheck.inputs import parse_arg, parse_dtype, parse_shape
from gradscope.gradcheck.values import parse_domain, parse_tensor

if TYPE_CHECKING:
    from gradscope.gradcheck.results import GradcheckReport


def gradcheck(
    specs: Sequence[str] = (),
    *,
    shapes: Sequence[str] = (),
    args: Sequence[str] = (),
    tensors: Sequence[str] = (),
    domains: Sequence[str] = (),
    dtype: str | None = None,
    seed: int | None = None,
    second_order: bool | None = None,
    forward_ad: bool | None = None,
    settings: config.Settings | None = None,
) -> GradcheckReport:
    """`gradscope gradcheck SPEC...` without the printing, its findings judged by
    `settings`. Each option is a list of the command's strings: shapes ["x=3,4"], args
    ["dim=1"], tensors ["target=[0,2,1]"], domains ["positive", "alpha=1.1,3"]. No
    `specs`: the settings' [[gradcheck]] entries."""

    settings = settings_or_default(settings)
    flags = {
        "dtype": dtype,
        "seed": seed,
        "second_order": second_order,
        "forward_ad": forward_ad,
    }
    jobs = build_jobs(list(specs), settings, shapes, args, tensors, domains, **flags)
    return judged(run(jobs), settings)


def build_jobs(
    specs: list[str],
    settings: config.Settings,
    shapes: Sequence[str] = (),
    args: Sequence[str] = (),
    tensors: Sequence[str] = (),
    domains: Sequence[str] = (),
    **flags: Any,
) -> list[tuple[str, Any]]:
    """(SPEC, Options) pairs: config entries for a SPEC first, the options over them."""

    entries: list[tuple[str, CheckEntry | None]] = [(e.target, e) for e in settings.gradcheck]
    if specs:
        entries = [(s, next((e for t, e in entries if t == s), None)) for s in specs]
    if not entries:
        raise TargetError(
            "no SPEC given and no [[tool.gradscope.gradcheck]] entry in the "
            "config; try: gradscope gradcheck gradscope.examples.functions:"
            "CustomReLU"
        )
    dtype = flags.pop("dtype", None)
    shape_map = dict(parse_shape(s) for s in shapes)
    arg_map = dict(parse_arg(a) for a in args)
    tensor_map = dict(parse_tensor(t) for t in tensors)
    domain_map = dict(parse_domain(d) for d in domains)
    dtype_name = parse_dtype(dtype) if dtype else None
    return [
        (
            spec,
            options_for(
                entry,
                shapes=shape_map,
                args=arg_map,
                tensors=tensor_map,
                domains=domain_map,
                dtype=dtype_name,
                **flags,
            ),
        )
        for spec, entry in entries
    ]
