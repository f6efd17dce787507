"""GS411 for a parameter assigned to its module in place of a tensor an optimizer holds
(`head.weight = nn.Parameter(emb.weight.clone())`, `layers[2] = copy.deepcopy(layers[0])`:
a tie undone after the optimizer was built): the optimizer still holds the tensor it
replaced, so the new one is a layer of the model left out, not a copy kept by the
algorithm, whatever values it started with. No torch."""

from __future__ import annotations

from gradscope.findings import Finding, Rule
from gradscope.steps.records import ParamInfo, WatchRun


def finding(this: Rule, run: WatchRun, p: ParamInfo, piled: tuple[str, ...]) -> Finding:
    """Assigned in place of `p.assigned_over` after the optimizer was built: the step applies
    the old tensor's gradients (where the model still uses it, as a tied embedding is) and
    never this one's; a no_grad or detach would cut the gradient to the model below it."""
    held = p.assigned_over or "the tensor it replaced"
    return this.finding(
        p.name,
        f"{p.name} requires grad and gets gradients but is in no optimizer param group: it "
        f"took the place of {held}, which an optimizer holds, by an assignment (of it or of "
        "its module) after that optimizer was built, so the steps apply the old tensor's "
        "gradients and never this one's (a shared weight re-assigned as a copy is no longer "
        "shared)",
        "to keep the weights shared, assign the same Parameter or module (head.weight = "
        "emb.weight; layers[2] = layers[0]), not a copy; otherwise make the assignment "
        "before building the optimizer, or add a param group for it "
        "(optimizer.add_param_group({'params': [...]}))",
        evidence=(
            f"optimizers: {', '.join(run.optimizers)}",
            f"assigned in place of {held}",
            *piled,
        ),
    )
