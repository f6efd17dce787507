"""What a TARGET names, read once for every way in (the command line, the Python API, the
`check` gate): a built-in example, a `gradscope_target()` or a named factory, a model file
or class built with a batch, or a training script to run up to a step; and the note that
says what was decided where it was not spelled out."""

from __future__ import annotations

from dataclasses import dataclass

from gradscope.api.options import InspectOptions
from gradscope.errors import GradscopeError
from gradscope.inspector import model_file, targets
from gradscope.inspector.targets import DEFAULT_NAME, Target, is_script

# model_file and targets import the user's code, never torch at their top


@dataclass(frozen=True)
class Resolved:
    """TARGET as it will run: a model with its batch (`target`), or a script (`target`
    None) run with the options' argv up to their step."""

    spec: str
    target: Target | None
    note: str = ""
    """What was decided, for one line on stderr ("" when TARGET said it itself)."""

    @property
    def script(self) -> bool:
        return self.target is None


def resolve(spec: str, options: InspectOptions) -> Resolved:
    """A model file or class without a batch is built with one (the note says what was
    built); a .py file without gradscope_target() is a training script (said, unless
    options.script said so); else the target as `targets.load` reads it."""
    script = options.script
    if not script and not options.argv and options.step is None:
        built = model_file.prepare(spec)  # a model class but no batch (model.py:Net)
        if built is not None:
            return Resolved(spec, built.target, built.note)
    note = ""
    if not script and is_script(spec):
        script = True
        note = (
            f"{spec} defines no {DEFAULT_NAME}(): inspecting it as a training script "
            "(runs until its first backward; --script says so explicitly)"
        )
    if options.argv and not script:
        raise GradscopeError(
            f"unexpected arguments {' '.join(options.argv)!r} (arguments "
            "after -- are for a --script TARGET)"
        )
    if options.step is not None and not script:
        raise GradscopeError(f"--step {options.step}: --step is for a training script (--script)")
    if script:
        return Resolved(spec, None, note)
    return Resolved(spec, targets.load(spec))
