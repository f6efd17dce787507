"""An optimizer that updates something else (GS437): it holds tensors the model no longer
has. No torch.

`layer.weight = nn.Parameter(...)`, `model.head = nn.Linear(...)` or
`model.load_state_dict(state, assign=True)` after the optimizer was built leave the model
with new tensors and the optimizer with the old ones: the gradients flow into the new
tensors, which no optimizer steps, and the optimizer steps tensors that never get a
gradient, so nothing moves. Each half alone is GS411 (in no optimizer) or GS413 (never a
gradient); together, tensor for tensor of the same shape, they are one replacement.
"""

from __future__ import annotations

from gradscope.config import Thresholds
from gradscope.findings import RULES, Finding, Severity
from gradscope.rules.registry import Stage, rule
from gradscope.rules.step_common import Series, about, by_optimizer, values_changed
from gradscope.steps.records import WatchRun, common_module


@rule(
    "GS437",
    "optimizer-holds-stale",
    Severity.ERROR,
    "stale-params",
    Stage.WATCH,
    "watch: the optimizer holds tensors the model no longer has: a parameter or module "
    "replaced after the optimizer was built",
    example="`model.head = nn.Linear(64, 10)` after `opt = AdamW(model.parameters())`: "
    "head's gradients flow, but the optimizer steps the old head, which gets none",
    fix="build the optimizer after the model is final (after replacing layers, "
    "resize_token_embeddings or loading with assign=True), or add the new parameters with "
    "optimizer.add_param_group",
    objectives=(
        "any: which tensors the optimizer holds, a mechanism independent of what the loss means"
    ),
    explains=("GS405", "GS410", "GS411", "GS413", "GS415", "GS417"),
)
def optimizer_holds_stale(run: WatchRun, t: Thresholds) -> list[Finding]:
    """An optimizer's tensors that no model holds got no gradient at any step, while the
    model's tensors of the same shapes (or resized: rows added for new tokens, a head for
    another class count) got gradients and are in no optimizer: they were put
    in the model after the optimizer was built (a parameter or module replaced, a
    load_state_dict with assign=True), and every step updates the old tensors (their update
    ratio 0 to the model). A replaced layer that a reference cycle kept alive when the models
    were found (a weight_norm'd or orthogonal module: its parametrized class holds it) reads
    as a second model none of whose tensors ever got a gradient: it counts as no model's."""
    out = []
    for s in by_optimizer(run):
        pairs = _replaced(run, s)
        if pairs and s.steps:
            out.append(about(_finding(run, s, pairs), [replaced_at(run, s, pairs)]))
    return out


def _replaced(run: WatchRun, s: Series) -> list[tuple[int, int]]:
    """(new, old) positions: the model's tensors in no optimizer that got gradients, each
    with an unused tensor of the same shape (else resized along one axis) this optimizer
    holds and no model does (or only a dropped model does: `_dropped_models`, `_part_of`)."""
    tensors = run.tensors
    dropped = _dropped_models(run)
    old = [
        i
        for i in s.members
        if (not run.params[i].in_model or run.params[i].model in dropped)
        and run.params[i].requires_grad
        and (not tensors.ever_had_grad(i) or _stopped_at(run, s, i) is not None)
    ]
    new = [
        i
        for i, p in enumerate(run.params)
        if p.in_model and not p.in_optimizer and p.requires_grad and tensors.got_grad(i)
    ]
    pairs: list[tuple[int, int]] = []
    for alike in (_same_shape, _resized_matrix, _resized_bias):
        for i in [i for i in new if all(i != n for n, _ in pairs)]:
            match = next(
                (
                    j
                    for j in old
                    if alike(run, i, j, pairs)
                    and run.params[j].model != run.params[i].model
                    and (not run.params[j].in_model or _part_of(run, j, i))
                ),
                None,
            )
            if match is not None:
                old.remove(match)
                pairs.append((i, match))
    return pairs


def _same_shape(run: WatchRun, new: int, old: int, _pairs: list[tuple[int, int]]) -> bool:
    return run.params[old].shape == run.params[new].shape


def _resized_matrix(run: WatchRun, new: int, old: int, _pairs: list[tuple[int, int]]) -> bool:
    """A matrix grown or shrunk along one axis: `resize_token_embeddings` after the
    optimizer was built (rows for added tokens), a head replaced for another class count."""
    a, b = run.params[new].shape, run.params[old].shape
    return len(a) == len(b) >= 2 and sum(x != y for x, y in zip(a, b, strict=True)) == 1


def _resized_bias(run: WatchRun, new: int, old: int, pairs: list[tuple[int, int]]) -> bool:
    """A vector only beside its module's resized weight, of that weight's old and new
    lengths: a lone vector of another length is no evidence of a replacement."""
    name = run.params[new].name
    if len(run.params[new].shape) != 1 or not name.endswith(".bias"):
        return False
    weight = name[: -len("bias")] + "weight"
    return any(
        run.params[n].name == weight
        and run.params[n].shape[:1] == run.params[new].shape
        and run.params[o].shape[:1] == run.params[old].shape
        for n, o in pairs
    )


def _part_of(run: WatchRun, old: int, new: int) -> bool:
    """The old tensor's model, dropped, is smaller than the new one's (a layer replaced in
    it), and the new tensor was left as it was: a whole copy of the model (an EMA the loss
    is computed through, unchanged while the network it follows never steps) is GS411's
    copy, not a replacement."""
    sizes = [sum(1 for p in run.params if p.model == run.params[k].model) for k in (old, new)]
    return sizes[0] < sizes[1] and values_changed(run.params[new]) is False


def _dropped_models(run: WatchRun) -> set[int]:
    """Models found beside others none of whose tensors got a gradient, zeros included, at
    any step: a module the script replaced (`net[0] = weight_norm(nn.Conv1d(...))` after
    the optimizer was built) that a reference cycle kept alive (a parametrized module's
    class holds it) when the models were found."""
    models: dict[int, bool] = {}
    for i, p in enumerate(run.params):
        if p.model is not None:
            models[p.model] = models.get(p.model, False) or run.tensors.ever_had_grad(i)
    return {m for m, graded in models.items() if not graded} if len(models) > 1 else set()


def _stopped_at(run: WatchRun, s: Series, i: int) -> int | None:
    """The first step without a gradient of a tensor that had them until a replacement
    took it out of the model (None: it never had one, or still gets them)."""
    learned = run.tensors.learned(s.index, i)
    if learned is None or learned.since_step < 0:
        return None
    return learned.since_step


def replaced_at(run: WatchRun, s: Series, pairs: list[tuple[int, int]]) -> int:
    """The first step the replacement shows in: step 1, or the first without a gradient
    of the tensors replaced mid-run."""
    mid = [x for _, j in pairs if (x := _stopped_at(run, s, j)) is not None]
    return min(mid) if mid else s.steps[0].step


def _shapes(run: WatchRun, pairs: list[tuple[int, int]]) -> str:
    """'same shapes', or the old shapes of those resized (a vocabulary grown after the
    optimizer was built reads as such)."""
    resized = [(i, j) for i, j in pairs if run.params[i].shape != run.params[j].shape]
    if not resized:
        return "the same shapes"
    shown = ", ".join(
        f"{list(run.params[j].shape)} for {run.params[i].name}" for i, j in resized[:3]
    )
    lead = "the same shapes or their" if len(resized) < len(pairs) else "their"
    return f"{lead} old shapes ({shown})"


def _finding(run: WatchRun, s: Series, pairs: list[tuple[int, int]]) -> Finding:
    names = [run.params[i].name for i, _ in pairs]
    owner = common_module(names) or (names[0] if len(names) == 1 else "model")
    shown = ", ".join(f"{run.params[i].name} {list(run.params[i].shape)}" for i, _ in pairs[:4]) + (
        f" (+{len(pairs) - 4})" if len(pairs) > 4 else ""
    )
    return RULES["GS437"].finding(
        s.subject(owner),
        s.say(
            f"the optimizer updates tensors the model no longer has: {shown} get gradients "
            f"but are in no optimizer, while the optimizer holds {len(pairs)} tensor(s) of "
            f"{_shapes(run, pairs)} that no model holds and that get no gradient: they were "
            "replaced after the optimizer was built, so no step moves the model's weights"
        ),
        "build the optimizer after the model is final (after replacing layers, resizing "
        "embeddings for added tokens, or load_state_dict(..., assign=True)); or "
        "optimizer.add_param_group({'params': "
        "new_module.parameters()}) for a layer replaced on purpose",
        value=float(len(pairs)),
        evidence=(
            "the optimizer's stale tensors: " + ", ".join(run.params[j].name for _, j in pairs[:6]),
        ),
    )
