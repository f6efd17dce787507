"""What `gradscope diff` is told: DiffOptions, the same for two models and for two runs'
logs (each reads the fields it takes), typed; the command line parses its strings into
it. No torch here: `gradscope --help` imports this."""

from __future__ import annotations

from dataclasses import dataclass

from gradscope.diff import align
from gradscope.errors import GradscopeError

AUTOCAST = {"bf16": "bfloat16", "bfloat16": "bfloat16", "fp16": "float16", "float16": "float16"}


@dataclass(frozen=True)
class DiffOptions:
    rtol: float | None = None
    """None: per dtype (compare.DEFAULTS)."""
    atol: float | None = None
    exact: bool = False
    """Bitwise: every compared value equal."""
    seed: int = 0
    names: align.NameMap = align.EMPTY_MAP
    """Parameter names paired by hand (a --name-map file: align.load_name_map)."""
    allow_transposed: bool = False
    """Copy a 2-D weight whose shape is reversed transposed (Conv1D vs Linear)."""
    noise_check: bool = True
    """When something differs, run each model again with another seed to find randomness."""
    autocast: str | None = None
    """Run the new model under torch.autocast with this dtype ("bfloat16", "float16"; bf16
    and fp16 say the same)."""
    compile: bool = False
    """Run the new model through torch.compile (it shares its parameters)."""
    deterministic: bool = False
    """Run the new model's passes (forward and backward) under
    torch.use_deterministic_algorithms(True), cuDNN deterministic, benchmark off."""
    dtype: str | None = None
    """Two runs: the dtype they trained in, when their logs do not say (their tolerance)."""
    plot: str | None = None
    """Also draw the comparison to this .png, .svg or .pdf."""
    top: int = 24
    """Module rows in the terminal report of two models..."""
    all_rows: bool = False
    """...or every row."""

    def __post_init__(self) -> None:
        if self.autocast is not None:
            cast = AUTOCAST.get(self.autocast.lower())
            if cast is None:
                raise GradscopeError(f"--b-autocast {self.autocast}: use bf16 or fp16")
            object.__setattr__(self, "autocast", cast)
