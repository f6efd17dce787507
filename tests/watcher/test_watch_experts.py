"""Routed experts (a mixture of experts): an expert the router stopped choosing is a dead
expert, named with the load-balancing advice, not a cut graph; a router with no gradient is
named as the router. Look-alikes: a healthy Switch layer (experts idle at some steps by
design) stays silent; parallel branches with no router keep the cut-graph advice; a stack
of blocks beside a head with one output per block is no mixture."""

from __future__ import annotations

import pytest

from gradscope.findings import Severity
from gradscope.rules.routed import routed
from gradscope.steps.records import ParamInfo, WatchRun
from tests.watcher.watch_scripts import domain_watched

SCRIPT = "moe_routing.py"


def _warnings(mode: str, rule: str):
    found = domain_watched(SCRIPT, mode).findings
    return [f for f in found if f.rule == rule and f.severity >= Severity.WARNING]


def test_a_healthy_switch_layer_is_silent():
    found = domain_watched(SCRIPT, "switch").findings
    assert not [f for f in found if f.severity >= Severity.WARNING]


def test_an_expert_the_router_stopped_choosing_is_a_dead_expert():
    stopped = _warnings("dead", "GS417")
    assert {f.subject.rpartition(".")[0].rpartition(".")[0] for f in stopped} == {"moe.experts.3"}
    for f in stopped:
        assert "dead expert" in f.message and "moe.gate.weight" in f.message
        assert "load-balancing loss" in f.advice and "detach() or no_grad()" not in f.advice


def test_branches_without_a_router_keep_the_cut_graph_advice():
    stopped = _warnings("branches", "GS417")
    assert stopped and all(f.subject.startswith("moe.branches.3.") for f in stopped)
    assert all("dead expert" not in f.message and "detach()" in f.advice for f in stopped)


def test_a_detached_router_is_named_as_the_router():
    (never,) = _warnings("router-detached", "GS413")
    assert never.subject == "moe.gate.weight"
    assert "router of the 4 experts of moe.experts" in never.message
    assert "not detached" in never.advice


@pytest.mark.parametrize("head", [(3, 8), (8, 3)])
def test_blocks_beside_a_head_of_as_many_outputs_are_no_mixture(head):
    """Three alike blocks at the model's root and a 3-way head: the head is no router (a
    router sits beside its experts inside their layer)."""
    params = [ParamInfo(f"blocks.{k}.fc.weight", (8, 8), True, True, 0.1) for k in range(3)]
    params.append(ParamInfo("head.weight", head, True, True, 0.1))
    assert not routed(WatchRun("t", tuple(params), [], "completed", 1.0))


def test_a_noisy_gate_is_the_router_of_its_experts():
    """Shazeer et al.'s noisy top-k gating: w_gate and w_noise, one column per expert each."""
    params = [ParamInfo(f"moe.experts.{k}.fc.weight", (8, 8), True, True, 0.1) for k in range(3)]
    params += [ParamInfo(f"moe.{n}", (8, 3), True, True, 0.1) for n in ("w_gate", "w_noise")]
    places = routed(WatchRun("t", tuple(params), [], "completed", 1.0))
    assert {p.mixture.router for p in places.values()} == {"moe.w_gate"}
    assert sorted(i for i, p in places.items() if p.expert is not None) == [0, 1, 2]
