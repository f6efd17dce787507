"""A spiking network whose neurons keep their membrane on the module between forwards
(snnTorch's `init_hidden=True`, spikingjelly's neurons, a hand-written LIF) and is not reset
between batches: the second batch starts from the first one's membrane, graph and all, and
its backward dies. GS459 told the user to detach an RNN's hidden state, which would silence
the error and start every batch from another batch's membrane. Named now by the module
state, with the reset as the fix; the same network reset before each batch is silent. A
spike made by a plain comparison under a spike-count loss gets the surrogate gradient."""

from __future__ import annotations

from gradscope.findings import Severity
from tests.watcher.watch_scripts import domain_watched


def test_a_membrane_not_reset_is_named_with_the_reset():
    run = domain_watched("spiking_state.py", "stale")
    carried = [f for f in run.findings if f.rule == "GS459"]
    assert len(carried) == 1, run.findings
    assert "module state holding the older graph: 0.mem, 1.mem" in carried[0].evidence
    assert "not reset between batches" in carried[0].message
    assert carried[0].advice.startswith("reset the network's state before each batch")


def test_the_network_reset_before_each_batch_is_silent():
    run = domain_watched("spiking_state.py", "reset")
    assert [f for f in run.findings if f.severity >= Severity.WARNING] == [], run.findings


def test_a_comparison_as_the_spike_under_a_spike_count_loss_gets_the_surrogate():
    """The spike a plain comparison and the loss on spike counts alone: the loss has no
    graph (GS468), whose advice named only ranking's smooth surrogates."""
    run = domain_watched("spiking_state.py", "heaviside")
    graphless = [f for f in run.findings if f.rule == "GS468"]
    assert len(graphless) == 1, run.findings
    assert "spiking neuron's threshold comparison" in graphless[0].advice
    assert "surrogate gradient" in graphless[0].advice
