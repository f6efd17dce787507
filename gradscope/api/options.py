"""What each command is told, typed and frozen: one object per command, the same whether
it comes from the command line (cli/ parses the strings), from Python or from a
`[[inspect]]`/`[[watch]]`/`[[gradcheck]]` entry of the config (`from_entry`). The
results' settings (thresholds, severities, ignores, fail-on) are `config.Settings`.

No torch here: `gradscope --help` imports this.
"""

from __future__ import annotations

import typing
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any, TypeVar

from gradscope.config import CheckEntry, config_error
from gradscope.diff.options import DiffOptions as DiffOptions
from gradscope.errors import GradscopeError
from gradscope.gradcheck.input_options import parse_dtype
from gradscope.gradcheck.options import entry_values
from gradscope.suggest import did_you_mean

FIRST_NONFINITE = "first-nonfinite"
"""inspect's step: the first whose loss or gradients are NaN/Inf (script_stop's name)."""

Opts = TypeVar("Opts")


def over(cls: type[Opts], options: Opts | None, given: Mapping[str, object]) -> Opts:
    """`options` (None: the defaults) with the `given` fields replaced; a name that is no
    field is one line with the close match."""
    names = [f.name for f in fields(cls)]  # type: ignore[arg-type]
    for name in given:
        if name not in names:
            raise GradscopeError(f"unknown option {name}" + did_you_mean(name, names))
    base = options if options is not None else cls()
    if not isinstance(base, cls):
        raise GradscopeError(
            f"options must be a gradscope.api.{cls.__name__}, not {type(base).__name__}"
        )
    hints = typing.get_type_hints(cls)
    values = {}
    for name, value in given.items():
        try:
            values[name] = typed(value, hints[name])
        except TypeError as exc:
            raise GradscopeError(f"option {name}: {exc}") from None
    return replace(base, **values) if values else base  # type: ignore[type-var]


class Given:
    """The keywords an API function takes over its options object: each a field's name,
    a misspelt one is one line with the close match (never Python's TypeError)."""

    @classmethod
    def over(cls: type[Opts], options: Opts | None, given: Mapping[str, object]) -> Opts:
        return over(cls, options, given)

    @classmethod
    def from_entry(cls: type[Opts], entry: CheckEntry) -> Opts:
        """The options a config entry sets (kebab-case keys; the others are settings:
        target, ignore, thresholds), each value checked against the field's type; a wrong
        one names the file, the line and the key."""
        hints = typing.get_type_hints(cls)
        section = ENTRY_SECTIONS[cls.__name__]
        values: dict[str, Any] = {}
        for key, value in entry.options.items():
            name = RENAMED.get(key, key.replace("-", "_"))
            if name not in hints or key in SETTINGS_KEYS:
                continue
            try:
                values[name] = typed(value, hints[name])
            except TypeError as exc:
                raise config_error(entry.source, f"{section}.{key}", str(exc)) from None
        try:
            return cls(**values)
        except GradscopeError as exc:
            raise config_error(entry.source, section, str(exc)) from None


ENTRY_SECTIONS = {"InspectOptions": "inspect", "WatchOptions": "watch"}
SETTINGS_KEYS = {"ignore", "thresholds"}
"""An entry's keys that are no option but settings (its target is the entry's own)."""
RENAMED = {"args": "argv"}
"""Entry keys whose option has another name (a script's arguments)."""


def typed(value: Any, hint: Any) -> Any:
    """A TOML value as the field's type: tuple[str, ...] from a list of strings, a float
    from an integer; anything else of the wrong type raises TypeError (its message is the
    problem, for the config's one line)."""
    kinds = typing.get_args(hint) if typing.get_origin(hint) in (typing.Union, _UnionType) else ()
    for kind in kinds or (hint,):
        origin = typing.get_origin(kind)
        if kind is Any or (kind is type(None) and value is None):
            return value
        if origin is tuple and isinstance(value, (list, tuple)):
            if all(isinstance(v, str) for v in value):
                return tuple(value)
        elif origin in (Mapping, dict) and isinstance(value, Mapping):
            return dict(value)
        elif kind is float and isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        elif kind in (int, str, bool) and type(value) is kind:
            return value
        elif origin is None and kind not in (int, str, bool, float) and isinstance(value, kind):
            return value
    wanted = " or ".join(_name(k) for k in (kinds or (hint,)) if k is not type(None))
    raise TypeError(f"expected {wanted}, got {value!r}")


_UnionType = type(int | None)


def _name(kind: Any) -> str:
    origin = typing.get_origin(kind)
    return {tuple: "a list of strings", Mapping: "a mapping"}.get(origin) or kind.__name__


def _positive(value: int | float | None, what: str, least: float = 1) -> None:
    if value is not None and (isinstance(value, bool) or value < least):
        raise GradscopeError(f"{what} must be at least {least:g}, not {value!r}")


@dataclass(frozen=True)
class InspectOptions(Given):
    """`gradscope inspect TARGET`: one instrumented forward and backward of a target, or
    of one step of a training script."""

    script: bool = False
    """TARGET is a training script (also when it defines no gradscope_target)."""
    argv: tuple[str, ...] = ()
    """The script's arguments (after -- on the command line; `args` in an entry)."""
    step: int | str | None = None
    """The script's optimizer step N >= 1 to stop at, or "first-nonfinite"; None: the first
    backward."""
    explain: bool = True
    """Locate what the cheap pass found (op, module, line)."""
    plot: str | None = None
    """Also draw the gradient flow to this .png, .svg or .pdf."""
    top: int = 30
    """Parameter rows in the terminal report..."""
    all_rows: bool = False
    """...or every row."""

    def __post_init__(self) -> None:
        step = self.step
        if step is not None and step != FIRST_NONFINITE:
            if isinstance(step, bool) or not isinstance(step, int) or step < 1:
                raise GradscopeError(
                    f"step {step!r}: give an optimizer step number >= 1 (1 is the first "
                    f"optimizer.step(), as `gradscope watch` numbers them) or {FIRST_NONFINITE}"
                )
        _positive(self.top, "top")


@dataclass(frozen=True)
class WatchOptions(Given):
    """`gradscope watch SCRIPT`, `gradscope.watch()` and a `[[watch]]` entry: a training
    run judged step by step, and what it is also written as."""

    argv: tuple[str, ...] = ()
    """The script's arguments (after -- on the command line; `args` in an entry)."""
    steps: int | None = None
    """Stop cleanly after this many optimizer steps."""
    log: str | None = None
    """Stream one JSON line per step to this file."""
    plot: str | None = None
    """Draw the run to this .png, .svg or .pdf."""
    tensorboard: str | None = None
    """Write the run as TensorBoard events to this folder, as it goes."""
    wandb: str | None = None
    """Log the run to this wandb project as it goes (the active run when there is one)."""
    mlflow: str | None = None
    """Log the run to this MLflow tracking URI as it goes (the active run when there is one)."""
    update_every: int = 25
    """Update/weight ratios at each of the first 100 steps, then every N."""
    flush_every: int = 10
    """Read statistics back from the device every N steps."""
    batch_size: int | None = None
    """Samples in one micro-batch (per rank); None: the model input's leading dimension."""
    against: str | None = None
    """A reference run's --log to compare every step with (GS607-GS609)."""
    hang_timeout: float | None = None
    """Under torchrun: name where each rank waits after this many seconds without progress."""
    nproc_per_node: int | None = None
    """Launch the script on N local ranks under torchrun (the command line relaunches
    itself; from Python, start your script with torchrun)."""
    label: str | None = None
    """What the report calls the run (default "script PATH", "watch" for a block)."""
    quiet_stdout: bool = False
    """The script's prints go to stderr (a report on stdout stays parseable)."""

    def __post_init__(self) -> None:
        for name in ("steps", "update_every", "flush_every", "batch_size", "nproc_per_node"):
            _positive(getattr(self, name), name)
        _positive(self.hang_timeout, "hang_timeout", 0)

    def watcher_keywords(self) -> dict[str, Any]:
        """What the Watcher itself takes."""
        return {
            "steps": self.steps,
            "log": self.log,
            "update_every": self.update_every,
            "flush_every": self.flush_every,
            "batch_size": self.batch_size,
        }


@dataclass(frozen=True)
class GraphOptions(Given):
    """`gradscope graph TARGET`: the autograd graph of a target's loss, drawn."""

    output: str | None = None
    """The file to write; None: the picture is the result's `picture`."""
    format: str | None = None
    """png, svg, pdf, dot or json; None: the output's extension, else dot."""
    collapse: str = "auto"
    depth: int | None = None
    show_saved: bool = False
    show_attrs: bool = False
    probe: bool = True
    """One forward+backward first, to colour the parameters by status."""


@dataclass(frozen=True)
class CheckOptions(Given):
    """`gradscope check`: every configured target, judged against a baseline or not."""

    baseline: str | None = None
    """Fail only on findings not in this baseline file (missing: every finding judged)."""
    write_baseline: str | None = None
    """Save this run as a baseline to this file (its findings adopted)."""


@dataclass(frozen=True)
class GradcheckOptions(Given):
    """`gradscope gradcheck SPEC...`: typed values over each [[gradcheck]] entry's own
    (gradcheck.options_for merges them)."""

    shape: Mapping[str, tuple[int, ...]] = field(default_factory=dict)
    """{"x": (3, 4)}: an input's shape."""
    args: Mapping[str, Any] = field(default_factory=dict)
    """{"dim": 1}: a non-tensor argument."""
    tensor: Mapping[str, Any] = field(default_factory=dict)
    """{"target": [0, 2, 1]}: an input given by its values."""
    domain: Mapping[str, Any] = field(default_factory=dict)
    """{"*": Domain(...)} or by input name: where inputs are drawn (gradcheck.values)."""
    dtype: str | None = None
    """A torch dtype name: "float64"."""
    seed: int | None = None
    second_order: bool | None = None
    forward_ad: bool | None = None

    def __post_init__(self) -> None:
        if self.dtype is not None:  # "torch.float64", "double": one name
            object.__setattr__(self, "dtype", parse_dtype(self.dtype))

    @classmethod
    def from_entry(cls, entry: CheckEntry) -> GradcheckOptions:
        """What a [[gradcheck]] entry sets, read with the command's own parsers (a wrong
        value names the file, the line and the key)."""
        return cls(**entry_values(entry))
