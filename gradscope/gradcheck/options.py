"""What a gradcheck run is told: Options, from a [[gradcheck]] config entry (validated,
errors naming the file and key) and the values given over it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gradscope.config import config_error
from gradscope.errors import ConfigError
from gradscope.gradcheck.input_options import InputOptions, parse_dtype, parse_shape
from gradscope.gradcheck.values import Domain, parse_domain, parse_tensor


@dataclass(frozen=True)
class Options:
    inputs: InputOptions = field(default_factory=InputOptions)
    second_order: bool = False
    forward_ad: bool | None = None
    """None: when the Function defines jvp."""
    explain: bool = True
    """False: stop at the sampled verdict (failing pairs get no worst elements or diagnosis)."""


SEED_MAX = 2**63 - 1
"""The largest seed, as --seed takes it: a torch generator's seed is a 64-bit integer."""


SEED_RANGE = f"expected an integer from 0 to 2**63 - 1 ({SEED_MAX})"


def options_for(
    entry: Any = None,
    *,
    shapes: dict[str, tuple[int, ...]] | None = None,
    args: dict[str, Any] | None = None,
    dtype: str | None = None,
    seed: int | None = None,
    second_order: bool | None = None,
    forward_ad: bool | None = None,
    tensors: dict[str, Any] | None = None,
    domains: dict[str, Domain] | None = None,
) -> Options:
    """Options from a [[gradcheck]] config entry (or none), the given values over it."""
    base = _entry(entry)
    inputs = InputOptions(
        {**base["shape"], **(shapes or {})},
        {**base["args"], **(args or {})},
        dtype or base["dtype"],
        seed if seed is not None else base["seed"],
        {**base["tensor"], **(tensors or {})},
        {**base["domain"], **(domains or {})},
    )
    return Options(
        inputs, _pick(second_order, base["second-order"]), _pick(forward_ad, base["forward-ad"])
    )


def entry_values(entry: Any) -> dict[str, Any]:
    """What a [[gradcheck]] entry sets, validated, by the command's option names."""
    return {k.replace("-", "_"): v for k, v in _entry(entry).items()}


def _pick(given: Any, configured: Any) -> Any:
    return given if given is not None else configured


def _entry(entry: Any) -> dict[str, Any]:
    """A [[tool.gradscope.gradcheck]] table, validated (ConfigError names file and key)."""
    out: dict[str, Any] = {
        "shape": {},
        "args": {},
        "dtype": None,
        "seed": 0,
        "second-order": False,
        "forward-ad": None,
        "tensor": {},
        "domain": {},
    }
    if entry is None:
        return out
    opts, src = entry.options, entry.source
    for key, kind in (
        ("shape", dict),
        ("args", dict),
        ("dtype", str),
        ("seed", int),
        ("second-order", bool),
        ("forward-ad", bool),
        ("tensor", dict),
        ("domain", (str, dict)),
    ):
        if key in opts and (
            not isinstance(opts[key], kind) or (kind is int and isinstance(opts[key], bool))
        ):
            names = (
                " or ".join(k.__name__ for k in kind) if isinstance(kind, tuple) else kind.__name__
            )
            raise config_error(src, f"gradcheck.{key}", f"expected {names}, got {opts[key]!r}")
    if "seed" in opts and not 0 <= opts["seed"] <= SEED_MAX:
        raise config_error(src, "gradcheck.seed", f"{SEED_RANGE}, got {opts['seed']}")
    try:
        for name, dims in opts.get("shape", {}).items():
            text = ",".join(map(str, dims)) if isinstance(dims, list) else str(dims)
            out["shape"][name] = parse_shape(f"{name}={text}")[1]
        out["dtype"] = parse_dtype(opts["dtype"]) if "dtype" in opts else None
    except ConfigError as exc:
        raise config_error(
            src,
            "gradcheck.shape" if "shape" in str(exc) else "gradcheck.dtype",
            str(exc).replace("--", ""),
        ) from None
    out["tensor"], out["domain"] = _entry_values(opts, src)
    out["args"] = dict(opts.get("args", {}))
    out.update({k: opts[k] for k in ("seed", "second-order", "forward-ad") if k in opts})
    return out


def _entry_values(opts: dict[str, Any], src: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """`tensor = { target = [0, 2, 1] }` and `domain = "positive"` or `{ alpha = "1.1,3" }`,
    read with the same parsers as --tensor and --domain."""
    domain = opts.get("domain", {})
    texts = [domain] if isinstance(domain, str) else [f"{k}={v}" for k, v in domain.items()]
    try:
        tensors = dict(parse_tensor(f"{k}={v!r}") for k, v in opts.get("tensor", {}).items())
    except ConfigError as exc:
        raise config_error(src, "gradcheck.tensor", str(exc).replace("--tensor ", "")) from None
    try:
        domains = dict(parse_domain(text) for text in texts)
    except ConfigError as exc:
        raise config_error(src, "gradcheck.domain", str(exc).replace("--domain ", "")) from None
    return tensors, domains
