"""What `gradscope diff` measured: plain data, no torch.

run (traces of both models) → compare → DiffResult → renderers (terminal, JSON, plot).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from gradscope.findings import Finding
from gradscope.inspector.targets import file_of
from gradscope.outcome import Outcome

DEFAULT_SOURCE = "per dtype"
"""`Tolerance.source` of the defaults (the summary shows float32's numbers)."""


@dataclass(frozen=True)
class Tolerance:
    """When two tensors count as the same: max|a-b| <= atol + rtol * max|ref| (or bitwise)."""

    rtol: float
    atol: float
    exact: bool = False
    source: str = "default"
    """Where the numbers came from: "float32 default", "--rtol/--atol", "--exact"."""

    def allows(self, max_abs: float, scale: float) -> bool:
        if math.isnan(max_abs):
            return False
        if self.exact:
            return max_abs == 0.0
        return max_abs <= self.atol + self.rtol * scale


@dataclass(frozen=True)
class Delta:
    """Two tensors (or lists of tensors) compared."""

    max_abs: float
    """max |ref - new| (inf where NaN/Inf appear on one side only)."""
    scale: float
    """max |ref|, what the relative difference is taken against."""
    differs: bool
    """Beyond the tolerance (or the shapes differ)."""
    tolerance: Tolerance
    dtype: str = ""
    """The reference's dtype; "float32→bfloat16" where the two differ."""
    shape: str = ""
    """Set when the shapes differ ("4×8 vs 8×4"): then nothing else was compared."""

    @property
    def rel(self) -> float:
        if self.max_abs == 0:
            return 0.0
        return self.max_abs / self.scale if self.scale > 0 else math.inf

    def to_dict(self) -> dict[str, Any]:
        return {
            "max_abs": self.max_abs,
            "rel": self.rel,
            "differs": self.differs,
            "dtype": self.dtype,
            "shape_mismatch": self.shape or None,
            "rtol": self.tolerance.rtol,
            "atol": self.tolerance.atol,
            "exact": self.tolerance.exact,
        }


@dataclass(frozen=True)
class ModuleRow:
    """One module call of the reference, in the order its forward finished, and its partner."""

    ref: str
    """Module name in the reference ("" is the model itself)."""
    new: str | None
    """The paired module of the new model; None when it has no counterpart."""
    call: int
    """Which call of that module (0 for the first; shared modules run more than once)."""
    kind: str
    """Class names, "GPT2Attention" or "GPT2Attention ↔ Attention"."""
    output: Delta | None = None
    """None: not compared (no partner, or the partner did not run that often)."""
    inputs: Delta | None = None
    """Tensor inputs compared pairwise, in order; None when there were none to compare."""
    ref_random: bool = False
    """The reference's own output at this call changed with the seed (dropout, sampling)."""
    new_random: bool = False
    ref_where: str = ""
    """file:line of the reference module's forward."""
    new_where: str = ""
    ref_made: str = ""
    """For the start of the difference: `file:line: self.x = ...` where it is created."""
    new_made: str = ""
    settings: str = ""
    """For the start of the difference: the two modules' settings (`extra_repr`, as printed
    by `print(model)`) where they differ: "eps=1e-05 … vs eps=1e-06 …"."""

    @property
    def label(self) -> str:
        name = self.ref or "(model)"
        return name if self.call == 0 else f"{name} #{self.call + 1}"

    @property
    def differs(self) -> bool:
        return self.output is not None and self.output.differs

    @property
    def inputs_agree(self) -> bool:
        return self.inputs is None or not self.inputs.differs

    def to_dict(self) -> dict[str, Any]:
        return {
            "ref": self.ref,
            "new": self.new,
            "call": self.call,
            "kind": self.kind,
            "output": self.output.to_dict() if self.output else None,
            "inputs": self.inputs.to_dict() if self.inputs else None,
            "ref_random": self.ref_random,
            "new_random": self.new_random,
            "ref_where": self.ref_where,
            "new_where": self.new_where,
            "ref_made": self.ref_made or None,
            "new_made": self.new_made or None,
            "settings": self.settings or None,
        }


@dataclass(frozen=True)
class ParamRow:
    """One matched parameter and its two gradients."""

    ref: str
    new: str
    shape: tuple[int, ...]
    how: str
    """How it was matched: "name", "stripped", "prefix", "map" or "transposed"."""
    copied: bool
    """The reference's values were copied into the new model for the passes."""
    grad: Delta | None = None
    """None: neither has a gradient. A gradient on one side only is a difference of inf."""
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "ref": self.ref,
            "new": self.new,
            "shape": list(self.shape),
            "how": self.how,
            "copied": self.copied,
            "grad": self.grad.to_dict() if self.grad else None,
            "note": self.note or None,
        }


@dataclass(frozen=True)
class Alignment:
    """How the two models' parameters and modules were paired."""

    pairs: tuple[tuple[str, str, str], ...]
    """(ref name, new name, how) for every matched parameter."""
    transposed: tuple[tuple[str, str], ...] = ()
    """Matched by name with the shape reversed (Conv1D vs Linear): copied only when allowed."""
    mismatched: tuple[tuple[str, str, str], ...] = ()
    """Same name, incompatible shapes: (ref, new, "4×8 vs 3×8"); not copied."""
    ref_only: tuple[str, ...] = ()
    new_only: tuple[str, ...] = ()
    prefixes: tuple[str, str] = ("", "")
    """The leading prefixes removed to pair names (reference's, new model's)."""
    modules_ref_only: tuple[str, ...] = ()
    modules_new_only: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "matched": [{"ref": r, "new": n, "how": h} for r, n, h in self.pairs],
            "transposed": [{"ref": r, "new": n} for r, n in self.transposed],
            "shape_mismatch": [{"ref": r, "new": n, "shapes": s} for r, n, s in self.mismatched],
            "ref_only": list(self.ref_only),
            "new_only": list(self.new_only),
            "prefixes": {"ref": self.prefixes[0], "new": self.prefixes[1]},
            "modules_ref_only": list(self.modules_ref_only),
            "modules_new_only": list(self.modules_new_only),
        }


@dataclass
class DiffResult:
    """The result of `gradscope diff`; `to_dict()` is the JSON document (kind "diff")."""

    ref_label: str
    new_label: str
    modules: list[ModuleRow]
    params: list[ParamRow]
    alignment: Alignment
    loss: Delta | None
    loss_ref: float
    loss_new: float
    origin: int | None
    """Index in `modules` where the difference starts: the first module (in the order forwards
    finish) whose output differs while its inputs agree."""
    first_output: int | None
    """Index of the first module whose output differs at all (its inputs may already differ)."""
    first_input: int | None
    """Inside the origin: index of the first submodule whose input differs, if any."""
    first_grad: int | None
    """Index in `params` of the first differing gradient, in backward order."""
    tolerance: Tolerance
    setting: str = ""
    """For one model against itself: what the second run changed ("autocast bfloat16")."""
    new_ran: tuple[str, ...] = ()
    """Modules of the new model whose forward ran (to list the unpaired ones that did)."""
    passes: int = 2
    """Forwards run: 2 (one per model, each with its backward), 4 when something differed
    and each model's forward ran again with another seed (the randomness check)."""
    duration_s: float = 0.0
    notes: list[str] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    torch_version: str = ""

    @property
    def differs(self) -> bool:
        """A module output or a gradient beyond tolerance. The loss is shown, not judged: the
        same loss_fn applied to outputs that agree can still amplify rounding (a sum whose
        terms cancel), and a real difference shows in the model's own output first."""
        return any(r.differs for r in self.modules) or any(
            p.grad is not None and p.grad.differs for p in self.params
        )

    @property
    def bitwise(self) -> bool:
        """Every compared value equal, not just within tolerance."""
        deltas = [r.output for r in self.modules] + [p.grad for p in self.params] + [self.loss]
        return all(d is None or (d.max_abs == 0 and not d.shape) for d in deltas)

    def outcome(self) -> Outcome:
        """Every difference beyond tolerance is an error finding (GS601/GS602), so the
        verdict "differ" is exit 1 under the default --fail-on."""
        return Outcome(
            "diff",
            f"{self.ref_label} vs {self.new_label}",
            list(self.findings),
            duration_s=self.duration_s,
            file=file_of(self.new_label),
            detail=self,
        )

    def verdict(self) -> str:
        if self.differs:
            return "differ"
        return "identical (bitwise)" if self.bitwise else "identical within tolerance"

    def to_dict(self) -> dict[str, Any]:
        """The JSON document (`gradscope diff --format json`)."""
        return self.outcome().to_dict()

    def body(self) -> dict[str, Any]:
        def at(i: int | None) -> str | None:
            return self.modules[i].ref if i is not None else None

        return {
            "ref": self.ref_label,
            "new": self.new_label,
            "setting": self.setting or None,
            "torch": self.torch_version,
            "summary": {
                "verdict": self.verdict(),
                "differs": self.differs,
                "origin": at(self.origin),
                "origin_call": self.modules[self.origin].call if self.origin is not None else None,
                "first_differing_output": at(self.first_output),
                "first_differing_input_inside_origin": at(self.first_input),
                "first_differing_grad": (
                    self.params[self.first_grad].ref if self.first_grad is not None else None
                ),
                "modules_compared": sum(r.output is not None for r in self.modules),
                "modules_differing": sum(r.differs for r in self.modules),
                "grads_compared": sum(p.grad is not None for p in self.params),
                "grads_differing": sum(bool(p.grad and p.grad.differs) for p in self.params),
                "loss_ref": self.loss_ref,
                "loss_new": self.loss_new,
                "loss": self.loss.to_dict() if self.loss else None,
                "passes": self.passes,
                "duration_s": round(self.duration_s, 6),
            },
            "tolerance": {
                "rtol": self.tolerance.rtol,
                "atol": self.tolerance.atol,
                "exact": self.tolerance.exact,
                "source": self.tolerance.source,
            },
            "notes": list(self.notes),
            "alignment": self.alignment.to_dict(),
            "new_modules_ran": list(self.new_ran),
            "modules": [r.to_dict() for r in self.modules],
            "parameters": [p.to_dict() for p in self.params],
        }
