"""GS411 for a tensor a model keeps as a plain attribute rather than an nn.Parameter (half
of a real/imaginary pair of spectral weights, a scale made with requires_grad=True): the
optimizer built from model.parameters() never held it. No torch."""

from __future__ import annotations

from gradscope.findings import Finding, Rule
from gradscope.steps.records import ParamInfo, WatchRun


def finding(this: Rule, run: WatchRun, p: ParamInfo, piled: tuple[str, ...]) -> Finding:
    """The model keeps it as a plain tensor, not an nn.Parameter: model.parameters() never
    listed it, so the optimizer built from that left it out (half of a real/imaginary pair,
    a scale made with requires_grad=True); one of a plain list or dict attribute (a
    hypernetwork's layer embeddings) is to be kept in an nn.ParameterList or ParameterDict."""
    if p.name.endswith("]"):
        return _in_container(this, run, p, piled)
    return this.finding(
        p.name,
        f"{p.name} requires grad and gets gradients but is in no optimizer param group: "
        "the model keeps it as a plain tensor attribute, not an nn.Parameter, so "
        "model.parameters() does not list it and no step applies its gradients",
        f"register it: self.{p.name.rpartition('.')[2]} = nn.Parameter(...) in its "
        "module's __init__ (register_buffer(...) with no requires_grad if it is to stay "
        "fixed), then build the optimizer from model.parameters()",
        evidence=(f"optimizers: {', '.join(run.optimizers)}", *piled),
    )


def _in_container(this: Rule, run: WatchRun, p: ParamInfo, piled: tuple[str, ...]) -> Finding:
    """An item of a plain list, tuple or dict the model keeps (`z[0]`, `z['a']`): the
    container is no module, so nothing in it is registered."""
    holder, _, key = p.name[:-1].partition("[")
    attr = holder.rpartition(".")[2]
    kind, registered = (
        ("list", "nn.ParameterList") if key.isdigit() else ("dict", "nn.ParameterDict")
    )
    return this.finding(
        p.name,
        f"{p.name} requires grad and gets gradients but is in no optimizer param group: "
        f"the model keeps it in a plain {kind} attribute ({holder}), not an {registered}, "
        "so model.parameters() does not list it and no step applies its gradients",
        f"keep them in an {registered}: self.{attr} = {registered}(...) of nn.Parameter "
        "items in its module's __init__, then build the optimizer from model.parameters()",
        evidence=(f"optimizers: {', '.join(run.optimizers)}", *piled),
    )
