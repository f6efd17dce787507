"""A loss whose graph reaches nodes an earlier backward freed: truncated BPTT with the
hidden state carried into the next chunk without .detach(). The script's own backward
raises ("Trying to backward through the graph a second time"); gradscope's graph readers
at the backward call (the target-leak and loss-kind walks) read a freed node's saved
tensors first, raised it in gradscope's hook and ended the run as an internal error
(exit 3). A freed node is one they cannot read: the script's own error is the run's end,
a failure of the script (exit 2)."""

from __future__ import annotations

import pytest
import torch

from gradscope.autograd_walk import saved
from gradscope.errors import UserCodeError, known_cause
from gradscope.findings import Severity
from gradscope.watcher import loss_graph
from tests.watcher.watch_scripts import domain_watched


def _freed_graph():
    """A loss over h, whose graph (through h) the first backward freed."""
    w = torch.randn(3, 3, requires_grad=True)
    h = torch.tanh(torch.randn(2, 3) @ w)
    h.sum().backward()
    return torch.nn.functional.mse_loss(torch.tanh(h @ w), torch.zeros(2, 3))


def test_a_freed_nodes_saved_tensors_read_as_absent():
    node = _freed_graph().grad_fn.next_functions[0][0]  # tanh below the loss: alive
    below = node.next_functions[0][0].next_functions[0][0]  # ... mm, tanh of the freed step
    while type(below).__name__ != "TanhBackward0":
        below = below.next_functions[0][0]
    with pytest.raises(RuntimeError):
        below._saved_result  # noqa: B018 (what torch raises)
    assert saved(below, "_saved_result") is None
    assert saved(below, "_saved_result", "freed") == "freed"


def test_the_loss_kind_is_read_over_log_probabilities_a_backward_freed():
    x = torch.randn(4, 5, requires_grad=True)
    log_probs = torch.log_softmax(x, -1)
    log_probs[:, 0].sum().backward()  # frees log_softmax's saved result
    again = torch.nn.functional.nll_loss(log_probs, torch.tensor([0, 1, 2, 3]))
    assert [t.kind for t in loss_graph.read(again).terms] == ["cross_entropy"]


def test_a_carried_state_left_attached_is_the_scripts_failure_not_gradscopes():
    attached = domain_watched("tbptt_lm.py", "attached")
    assert not attached.faults, attached.internal_error()
    assert attached.run.status == "crashed"
    assert "backward through the graph a second time" in (attached.run.error or "")


def test_the_detached_state_trains_without_a_finding():
    healthy = domain_watched("tbptt_lm.py")
    assert not healthy.faults, healthy.internal_error()
    assert healthy.run.status == "completed" and len(healthy.run.steps) == 6
    assert [f for f in healthy.findings if f.severity >= Severity.WARNING] == []


def test_the_failure_names_the_attached_tensor_not_retain_graph_as_the_fix():
    line = domain_watched("tbptt_lm.py", "attached").failure() or ""
    assert "a second time" in line and ".detach() it where it is carried over" in line
    assert "retain_graph=True would backpropagate through every earlier step" in line


def test_other_script_errors_are_said_as_they_are():
    assert known_cause("RuntimeError: mat1 and mat2 shapes cannot be multiplied") == ""
    error = UserCodeError("running train.py", RuntimeError("CUDA out of memory"))
    assert str(error).endswith("raised RuntimeError: CUDA out of memory")
