"""GS413 told apart: the output of a stack's last block that has no next block to feed.
WaveNet's residual layers each return a residual (the next layer's input) and a skip (the
sum the head reads); the last layer's residual conv is computed and thrown away, so its
weights never get a gradient while the same conv in every other layer does. Information:
nothing is cut that the model needs. No torch."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, replace

from gradscope.findings import Finding, Severity
from gradscope.steps.records import WatchRun

_IN_STACK = re.compile(r"^(?:(?P<stack>.*?)\.)?(?P<index>\d+)\.(?P<rest>.+)$")
"""`blocks.2.conv.weight`, or `2.conv.weight` where the stack is the model itself (an
nn.ModuleList or nn.Sequential of blocks handed to the optimizer whole)."""


@dataclass(frozen=True)
class Tail:
    stack: str
    """The stack's name (`blocks`; empty where the stack is the model itself)."""
    last: int
    """The last block's index."""
    learned: int
    """How many other blocks' same parameter got gradients."""

    @property
    def block(self) -> str:
        """The last block, as its parameters are named."""
        return f"{self.stack}.{self.last}" if self.stack else f"block {self.last}"

    @property
    def named(self) -> str:
        """The stack, in words."""
        return self.stack or "the stack the model is"


def last_block_output(
    run: WatchRun, i: int, got_grad: Callable[[WatchRun, int], bool]
) -> Tail | None:
    """The parameter sits in the last block of a stack of at least 3 numbered blocks, the
    same parameter of every other block got gradients, and some other parameter of its own
    block did (the block ran, and the loss reached it): only this output of the last block
    feeds nothing. A stack whose last block got no gradient at all (a loop that skips it)
    is not this."""
    return last_of([p.name for p in run.params], i, lambda j: got_grad(run, j))


def last_of(names: list[str], i: int, got_grad: Callable[[int], bool]) -> Tail | None:
    """last_block_output on parameter names and a test of their gradients (inspect's one
    step reads `has_grad`; watch's whole run, got_grad)."""
    where = _IN_STACK.match(names[i])
    if where is None:
        return None
    stack, rest = where["stack"] or "", where["rest"]
    blocks: dict[int, list[int]] = {}
    for j, name in enumerate(names):
        m = _IN_STACK.match(name)
        if m is not None and (m["stack"] or "") == stack:
            blocks.setdefault(int(m["index"]), []).append(j)
    last = max(blocks)
    if int(where["index"]) != last or len(blocks) < 3:
        return None
    siblings = [j for k, js in blocks.items() if k != last for j in js if _rest(names[j]) == rest]
    own = [j for j in blocks[last] if j != i and _rest(names[j]) != rest]
    if len(siblings) < len(blocks) - 1 or not all(got_grad(j) for j in siblings):
        return None
    if not any(got_grad(j) for j in own):
        return None
    return Tail(stack, last, len(siblings))


def _rest(name: str) -> str:
    m = _IN_STACK.match(name)
    return "" if m is None else m["rest"]


def as_information(finding: Finding, tail: Tail) -> Finding:
    """GS413 as information on the last block's output that nothing reads."""
    return replace(
        finding,
        severity=Severity.INFO,
        message=f"{finding.message}; it is in {tail.block}, the last block of "
        f"{tail.named}, whose other blocks' same parameter learned: what it computes feeds "
        "the next block, and the last has none (WaveNet's last residual conv, N-BEATS' last "
        "backcast)",
        advice=f"fine: nothing the model needs is cut; leave it out of {tail.block} "
        "(or call requires_grad_(False) on it) to save its compute; if the "
        "stack's output should come through it, check what the forward returns",
    )
