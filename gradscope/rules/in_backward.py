"""GS411 told for torch's "optimizer in backward" recipe: an optimizer per parameter,
stepped by a post-accumulate-grad hook as the parameter's gradient lands. A parameter the
hook was not registered on is in an optimizer that nothing steps (and that the watch never
sees): the hook is what it lacks. No torch."""

from __future__ import annotations

from gradscope.findings import Finding, Rule
from gradscope.steps.records import ParamInfo, WatchRun


def optimizers_in_backward(run: WatchRun) -> bool:
    """torch's "optimizer in backward": one optimizer per stepped parameter, each parameter
    with a post-accumulate-grad hook (which steps its optimizer as its gradient lands)."""
    stepped = [q for q in run.params if q.in_optimizer]
    return (
        len(stepped) > 1
        and len(run.optimizers) >= len(stepped)
        and all(q.stepped_by_hook for q in stepped)
    )


def hook_missing(this: Rule, run: WatchRun, p: ParamInfo, piled: tuple[str, ...]) -> Finding:
    """A parameter left out of the loop that registers the stepping hook."""
    return this.finding(
        p.name,
        f"{p.name} requires grad and gets gradients but no optimizer that steps holds it: "
        "every stepped parameter has an optimizer of its own, stepped by a "
        "post-accumulate-grad hook as its gradient lands (an optimizer in backward), and "
        f"{p.name} has no such hook; its gradients are never applied",
        f"register the hook on {p.name} too: build the per-parameter optimizers and call "
        "register_post_accumulate_grad_hook over all of model.parameters(), not a subset",
        evidence=(
            f"optimizers: {len(run.optimizers)} ({', '.join(sorted(set(run.optimizers)))}), "
            "one per stepped parameter",
            *piled,
        ),
    )
