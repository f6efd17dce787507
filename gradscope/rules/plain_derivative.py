"""A parameter that never got a gradient because it takes part only in an output the script
differentiated by `torch.autograd.grad` without create_graph (GS413).

An unrolled inner loop (bilevel hyper-parameter learning, dataset distillation, a learned
learning rate) takes `g = torch.autograd.grad(inner_loss, w)` and steps `w - lr * g`. Without
create_graph, g comes back as a constant: the outer loss reaches w and lr, but not what
shaped g (a weight decay in the inner loss, the synthetic inputs it was computed on), whose
gradient stays None. A first-order method that means it (first-order MAML) trains
through the unrolled weights themselves, whose meta-parameters still get gradients."""

from __future__ import annotations

from dataclasses import replace

from gradscope.findings import Finding
from gradscope.steps.records import ParamInfo

ADVICE = (
    "pass create_graph=True to that torch.autograd.grad (an unrolled inner step, a bilevel "
    "or dataset-distillation loop, needs the derivative in the graph); if the derivative is "
    "only read or logged, make the parameter take part in the loss, or freeze it"
)


def as_told(finding: Finding, p: ParamInfo, steps: int) -> Finding:
    """GS413's `finding` on p, which never had a gradient in `steps` steps, told by its cause."""
    return replace(
        finding,
        message=f"{p.name} got no gradient (None) in all {steps} steps: it takes part only in "
        "an output the script differentiated by torch.autograd.grad without create_graph, "
        "whose derivative comes back outside the graph, so a loss built on it (an unrolled "
        "step w - lr * g) sends it nothing",
        advice=ADVICE,
    )
