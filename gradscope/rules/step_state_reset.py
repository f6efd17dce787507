"""GS459's reading where the older graph is held by a module's own state (a spiking
neuron's membrane, kept on the module between forwards): the state was not reset between
batches. No torch."""

from __future__ import annotations

from gradscope.findings import Finding, Rule
from gradscope.fmt import listed
from gradscope.steps.records import CarriedGraph


def state_not_reset(this: Rule, found: CarriedGraph, older: str) -> Finding:
    """The module state named in `found.states` still reaches the previous step's graph:
    each batch began from the state the last one left, graph and all. Batches of
    independent samples (a spiking network's BPTT over each batch's time steps) need the
    state reset before each forward; a .detach() would silence the error and leave every
    sample starting from another batch's state."""
    shown = listed(found.states)
    return this.finding(
        "backward",
        f"{older}. The older graph is held by the state the module keeps between forwards "
        f"({shown}): it was not reset between batches, so this batch began from the state "
        "the last one left, graph and all, as a spiking neuron's membrane does when the "
        "network is not reset",
        "reset the network's state before each batch's forward (snnTorch: "
        "utils.reset(net) or each neuron's init_leaky(); spikingjelly: "
        "functional.reset_net(net) after each step; a hand-written neuron: set its state "
        "to None or zeros); a .detach() would silence the error and still start each batch "
        "from the last one's state. Detach instead only where batches continue one sequence "
        "(truncated BPTT)",
        evidence=(
            f"joining node: {found.node}",
            f"failed at step {found.step}",
            f"module state holding the older graph: {shown}",
        ),
    )
