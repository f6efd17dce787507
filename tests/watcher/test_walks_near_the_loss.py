"""The two searches near the loss (watcher/same_batch.py's loss target, watcher/loss_inputs.py's
misfed losses) on autograd_walk's iterator, breadth first, give what their hand-written
queues gave: compared on torch graphs and on made-up ones where the order, the bound, a node
reached twice and a pruned loss node decide the answer."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from gradscope.autograd_walk import NodeWalk, Order
from gradscope.watcher import loss_inputs, same_batch


def _target_by_hand(node):
    """same_batch.target_of as it was written: a queue, no node skipped, None edges not counted."""
    queue, visited = [node], 0
    while queue and visited < same_batch.MAX_NODES:
        node = queue.pop(0)
        if node is None:
            continue
        visited += 1
        name = type(node).__name__
        if name in same_batch.TARGETS:
            target = getattr(node, "_saved_target", None)
            return (name, target) if isinstance(target, torch.Tensor) else None
        queue.extend(n for n, _ in node.next_functions)
    return None


def _find_by_hand(loss_node):
    """loss_inputs.find as it was written: a queue, each node once, loss nodes not searched."""
    out, seen, queue = [], set(), [loss_node]
    while queue and len(seen) < loss_inputs.MAX_SEARCH:
        node = queue.pop(0)
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        name = type(node).__name__
        found = None
        if name == "BinaryCrossEntropyWithLogitsBackward0":
            found = loss_inputs.logits_input(node)
        elif name in loss_inputs._NLL:
            found = loss_inputs._nll(node)
        if found is not None:
            out.append(found)
        elif name not in loss_inputs._NLL:
            queue.extend(n for n, _ in node.next_functions)
    return out


def _node(name: str, *below, target=None):
    """A made-up backward node of class `name` (the searches read the class's name)."""
    node = type(name, (), {})()
    node.next_functions = tuple((b, 0) for b in below)
    if target is not None:
        node._saved_target = target
    return node


def _chain(top, length: int):
    for _ in range(length):
        top = _node("AddBackward0", top, None)
    return top


torch.manual_seed(0)
X = torch.randn(6, 5, requires_grad=True)
Y = torch.randint(0, 5, (6,))
R = torch.randn(6, 5)


def _deep(loss: torch.Tensor, depth: int) -> torch.Tensor:
    for _ in range(depth):
        loss = loss * 1.0
    return loss


GRAPHS = {
    "cross-entropy": lambda: F.cross_entropy(X, Y),
    "softmax into cross-entropy": lambda: F.cross_entropy(F.softmax(X, 1), Y),
    "sigmoid into bce-with-logits": lambda: F.binary_cross_entropy_with_logits(
        torch.sigmoid(X), R.clamp(0, 1)
    ),
    "mse under a sum": lambda: F.mse_loss(X, R) + 0.0 * X.sum(),
    "two losses, one misfed": lambda: (
        F.cross_entropy(F.softmax(X, 1), Y) + 0.1 * F.smooth_l1_loss(X, R)
    ),
    "two misfed, at two depths": lambda: (
        _deep(F.cross_entropy(F.softmax(X, 0), Y), 3)
        + F.binary_cross_entropy_with_logits(torch.sigmoid(X), R.clamp(0, 1))
    ),
    "log_softmax into nll (right)": lambda: F.nll_loss(F.log_softmax(X, 1), Y),
    "a loss 20 nodes down": lambda: _deep(F.mse_loss(X, R), 20),
    "a loss 70 nodes down": lambda: _deep(F.cross_entropy(F.softmax(X, 1), Y), 70),
}


def _same(a, b) -> bool:
    if a is None or b is None:
        return a is b
    return a[0] == b[0] and a[1] is b[1]


@pytest.mark.parametrize("graph", list(GRAPHS))
def test_the_searches_near_the_loss_find_what_the_hand_written_ones_found(graph):
    root = GRAPHS[graph]().grad_fn
    assert _same(same_batch.target_of(root), _target_by_hand(root))
    assert loss_inputs.find(root) == _find_by_hand(root)
    found = loss_inputs.find(root)
    assert [m.node for m in found] == [m.node for m in _find_by_hand(root)]


def test_the_graphs_tell_the_orders_apart():
    """Breadth first is what the hand-written queues did: the two-depths graph's misfed
    losses come out nearest first (a depth-first walk takes the deeper one first)."""
    root = GRAPHS["two misfed, at two depths"]().grad_fn
    assert [m.what for m in loss_inputs.find(root)] == ["sigmoid", "softmax-wrong-dim"]
    assert same_batch.target_of(GRAPHS["a loss 20 nodes down"]().grad_fn) is None
    assert loss_inputs.find(GRAPHS["a loss 70 nodes down"]().grad_fn) == []


def _made_up() -> dict[str, object]:
    t1, t2 = torch.zeros(1), torch.ones(1)
    shared = _node("MulBackward0", _node("AccumulateGrad"))
    wide = _node("MulBackward0", *[shared] * 6)  # one node reached six times
    return {
        "nearest of two targets": _node(
            "AddBackward0",
            _chain(_node("MseLossBackward0", target=t1), 3),
            _node("L1LossBackward0", target=t2),
        ),
        "a target without its saved tensor": _node(
            "AddBackward0", _node("NllLossBackward0"), _node("MseLossBackward0", target=t1)
        ),
        "a node reached many times counts each time": _node(
            "AddBackward0", wide, wide, _chain(_node("MseLossBackward0", target=t1), 6)
        ),
        "none edges and a leaf": _node(
            "SumBackward0", None, _node("MseLossBackward0", None, target=t2), None
        ),
        "just past the bound": _chain(_node("MseLossBackward0", target=t1), 16),
        "just inside the bound": _chain(_node("MseLossBackward0", target=t1), 15),
        "an nll node not searched below": _node(
            "AddBackward0",
            _node("NllLossBackward0", _node("NllLossBackward0")),
            _chain(_node("AddBackward0"), 3),
        ),
        "no node": None,
    }


@pytest.mark.parametrize("graph", list(_made_up()))
def test_made_up_graphs_give_the_hand_written_answers(graph):
    root = _made_up()[graph]
    assert _same(same_batch.target_of(root), _target_by_hand(root))
    assert loss_inputs.find(root) == _find_by_hand(root)


def test_made_up_answers_that_hang_on_order_bound_and_repeats():
    graphs = _made_up()
    name, target = same_batch.target_of(graphs["nearest of two targets"])
    assert name == "L1LossBackward0" and float(target) == 1.0  # nearest, not first input
    assert same_batch.target_of(graphs["a target without its saved tensor"]) is None
    assert same_batch.target_of(graphs["just past the bound"]) is None
    assert same_batch.target_of(graphs["just inside the bound"])[0] == "MseLossBackward0"
    # six visits of one shared node use up the bound where each visit counts
    assert same_batch.target_of(graphs["a node reached many times counts each time"]) is None
    once = NodeWalk([graphs["a node reached many times counts each time"]], order=Order.NEAREST)
    assert any(type(n).__name__ == "MseLossBackward0" for n in once)
