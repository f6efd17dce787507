"""The one walk of an autograd graph (gradscope/autograd_walk.py): its orders, its bound,
a node reached twice, None edges and the leaves, on made-up nodes and on torch's own."""

from __future__ import annotations

import sys

import torch

from gradscope.autograd_walk import NodeWalk, Order, backward_nodes, inputs


class Node:
    """A backward node as the walk sees one: a name and its `next_functions`."""

    def __init__(self, name: str, *below: Node | None) -> None:
        self.name = name
        self.next_functions = tuple((b, 0) for b in below)

    def __repr__(self) -> str:
        return self.name


def _diamonds() -> Node:
    """top → a, b; a → c, b → c (a diamond); c → d, None, e; d → leaf, e → leaf."""
    leaf = Node("leaf")
    c = Node("c", Node("d", leaf), None, Node("e", leaf))
    return Node("top", Node("a", c), Node("b", c))


def _names(items) -> list[str]:
    return [n.name for n in items]


def test_depth_first_takes_the_last_input_first_by_default():
    assert _names(NodeWalk([_diamonds()])) == ["top", "b", "c", "e", "leaf", "d", "a"]


def test_depth_first_can_take_the_first_input_first():
    order = _names(NodeWalk([_diamonds()], order=Order.FIRST_INPUT))
    assert order == ["top", "a", "c", "d", "leaf", "e", "b"]


def test_reached_order_numbers_each_node_once_in_the_order_it_was_put_on_the_stack():
    # each node is pushed once, when first reached: c (under b, pushed with a) waits
    # below b's subtree, unlike the depth-first orders
    assert _names(NodeWalk([_diamonds()], order=Order.REACHED)) == [
        "top",
        "b",
        "c",
        "e",
        "leaf",
        "d",
        "a",
    ]
    top = Node("top", Node("x", Node("y")), Node("z", Node("y2")))
    shared = Node("s")
    wide = Node("w", shared, Node("m", shared))
    assert _names(NodeWalk([wide], order=Order.REACHED)) == ["w", "m", "s"]
    assert _names(NodeWalk([wide], order=Order.LAST_INPUT)) == ["w", "m", "s"]
    assert _names(NodeWalk([wide], order=Order.FIRST_INPUT)) == ["w", "s", "m"]
    assert _names(NodeWalk([top], order=Order.REACHED)) == ["top", "z", "y2", "x", "y"]
    assert _names(NodeWalk([top, top.next_functions[0][0]], order=Order.REACHED)) == [
        "x",
        "y",
        "top",
        "z",
        "y2",
    ]


def test_reached_order_differs_from_depth_first_where_a_diamond_closes_late():
    s = Node("s", Node("under"))
    root = Node("r", s, Node("m", Node("k", Node("q"), s)))
    # reached: s waits where it was first put (under r); depth first: visited under k
    assert _names(NodeWalk([root], order=Order.REACHED)) == ["r", "m", "k", "q", "s", "under"]
    assert _names(NodeWalk([root])) == ["r", "m", "k", "s", "under", "q"]
    late = Node("s3")
    root3 = Node("r", Node("m", late, Node("n", late)), Node("o"))
    assert _names(NodeWalk([root3], order=Order.REACHED)) == ["r", "o", "m", "n", "s3"]
    assert _names(NodeWalk([root3], order=Order.FIRST_INPUT)) == ["r", "m", "s3", "n", "o"]


def test_a_shared_node_is_visited_once_and_every_path_when_asked():
    leaf = Node("leaf")
    root = Node("r", Node("a", leaf), Node("b", leaf), leaf)
    assert _names(NodeWalk([root])).count("leaf") == 1
    assert _names(NodeWalk([root], order=Order.REACHED)).count("leaf") == 1
    every_path = _names(NodeWalk([root], order=Order.FIRST_INPUT, key=None))
    assert every_path == ["r", "a", "leaf", "b", "leaf", "leaf"]


def test_none_edges_are_left_out():
    root = Node("r", None, Node("a", None), None)
    assert _names(NodeWalk([root])) == ["r", "a"]
    assert inputs(root) == [root.next_functions[1][0]]
    assert inputs(object()) == []  # no next_functions: nothing below


def test_the_bound_counts_visits_and_says_what_was_left():
    chain = Node("end")
    for i in range(10):
        chain = Node(f"n{i}", chain, Node(f"side{i}"))
    walk = NodeWalk([chain], order=Order.FIRST_INPUT, limit=4)
    assert _names(walk) == ["n9", "n8", "n7", "n6"]
    assert walk.visited == 4
    assert walk.pending == 5  # n6's two inputs and the sides of n7, n8, n9 wait unvisited
    whole = NodeWalk([chain])
    assert len(list(whole)) == 21 and whole.pending == 0


def test_pruned_where_below_gives_nothing_and_stopped_by_leaving_the_loop():
    root = _diamonds()
    pruned = NodeWalk([root], lambda n: [] if n.name == "c" else inputs(n))
    assert _names(pruned) == ["top", "b", "c", "a"]
    seen = []
    for node in NodeWalk([root]):
        seen.append(node.name)
        if node.name == "c":
            break
    assert seen == ["top", "b", "c"]


def test_a_chain_of_100000_nodes_is_walked_without_recursion():
    chain = Node("end")
    for _ in range(100_000):
        chain = Node("n", chain)
    assert sys.getrecursionlimit() < 100_000  # a recursive walk could not go this deep
    count = sum(1 for _ in NodeWalk([chain], order=Order.FIRST_INPUT, key=None))
    assert count == 100_001
    assert sum(1 for _ in NodeWalk([chain], order=Order.REACHED)) == 100_001


def test_torch_graph_with_diamonds_reaches_every_accumulate_grad_leaf_once():
    w = torch.ones(3, requires_grad=True)
    b = torch.ones(3, requires_grad=True)
    h = w * 2
    loss = ((h + b) * h).sum() + (h * b).sum()  # h and b used twice: diamonds
    nodes = list(backward_nodes([loss]))
    assert len(nodes) == len({id(n) for n in nodes})
    leaves = [n.variable for n in nodes if type(n).__name__ == "AccumulateGrad"]
    assert sorted(id(t) for t in leaves) == sorted([id(w), id(b)])
    assert nodes[0] is loss.grad_fn
    for order in Order:
        again = list(backward_nodes([loss], order=order))
        assert {id(n) for n in again} == {id(n) for n in nodes}


def test_tensors_without_a_grad_fn_add_no_root():
    leaf = torch.ones(2, requires_grad=True)
    assert list(backward_nodes([torch.ones(2), leaf])) == []
    y = leaf * 3
    assert [type(n).__name__ for n in backward_nodes([leaf, y, y])] == [
        "MulBackward0",
        "AccumulateGrad",
    ]


def test_the_bound_on_a_long_torch_chain_stops_before_its_leaf():
    w = torch.ones(1, requires_grad=True)
    h = w
    for _ in range(300):
        h = h * 1.5
    walk = backward_nodes([h.sum()], limit=100)
    assert all(type(n).__name__ != "AccumulateGrad" for n in walk)
    assert walk.visited == 100


def test_nearest_order_visits_by_distance_from_the_roots():
    assert _names(NodeWalk([_diamonds()], order=Order.NEAREST)) == [
        "top",
        "a",
        "b",
        "c",
        "d",
        "e",
        "leaf",
    ]
    every_path = _names(NodeWalk([_diamonds()], order=Order.NEAREST, key=None))
    assert every_path == ["top", "a", "b", "c", "c", "d", "e", "d", "e"] + ["leaf"] * 4
    walk = NodeWalk([_diamonds()], order=Order.NEAREST, limit=3)
    assert _names(walk) == ["top", "a", "b"] and walk.pending == 2  # c, twice


def test_the_nan_probe_hooks_the_nodes_nearest_the_loss_up_to_its_bound():
    from gradscope.watcher import nan_probe

    w = torch.ones(2, requires_grad=True)
    branches = [w * float(k) for k in range(3)]  # three nodes one step below the sum
    chain = branches[0]
    for _ in range(nan_probe.MAX_NODES + 10):  # a long chain under the first branch
        chain = chain * 1.0
    loss = (chain + branches[1] + branches[2]).sum()
    nodes = nan_probe._nodes(loss.grad_fn)
    assert len(nodes) == nan_probe.MAX_NODES and nodes[0] is loss.grad_fn
    names = [type(n).__name__ for n in nodes]
    assert "AccumulateGrad" in names  # reached through the short branches, not the chain's end
    assert len({id(n) for n in nodes}) == len(nodes)
