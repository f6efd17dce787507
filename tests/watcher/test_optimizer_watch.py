"""Each optimizer's part of the watch (WatchState.of): the open resets keep the order of
the steps that opened them, the order the sentinel of a backward is chosen in, and the
threads that stepped an optimizer decide whose gradients another thread may read."""

from __future__ import annotations

import torch

from gradscope.watcher import resets, stepping
from gradscope.watcher.recorder import Recorder
from gradscope.watcher.state import WatchState
from gradscope.watcher.threads import ThreadState, Window


def _two_optimizers() -> tuple[WatchState, list[torch.optim.Optimizer]]:
    """Two optimizers over their own parameter, both with a gradient, both tracked."""
    state = WatchState(Recorder(10))
    params = [torch.nn.Parameter(torch.ones(2) * (i + 1)) for i in range(2)]
    for p in params:
        p.grad = torch.ones(2)
    for name, p in zip("ab", params, strict=True):
        state.tracked.add(name, p)
    optimizers = [torch.optim.SGD([p], lr=0.1) for p in params]
    return state, optimizers


def _step(state: WatchState, here: ThreadState, optimizer: torch.optim.Optimizer) -> None:
    """What a step does to its optimizer's reset: closed at its start, opened at its end."""
    stepping.optimizer_index(state, here, optimizer)
    resets.carried(state, optimizer)
    resets.stepped(state, optimizer, resets.trained(state, optimizer), here.ident)


def _sentinel(state: WatchState, here: ThreadState) -> torch.Tensor:
    window = Window()
    resets.sentinel(state, here, window)
    return window.sentinel


def test_the_sentinel_is_a_parameter_of_the_optimizer_that_stepped_longest_ago():
    state, (first, second) = _two_optimizers()
    here = ThreadState(1, "main", True)
    _step(state, here, first)
    _step(state, here, second)
    assert _sentinel(state, here) is first.param_groups[0]["params"][0]
    _step(state, here, first)  # the first steps again: now the second stepped longest ago
    assert _sentinel(state, here) is second.param_groups[0]["params"][0]
    _step(state, here, second)
    assert _sentinel(state, here) is first.param_groups[0]["params"][0]


def test_a_step_whose_start_left_the_reset_open_keeps_its_place():
    state, (first, second) = _two_optimizers()
    here = ThreadState(1, "main", True)
    _step(state, here, first)
    _step(state, here, second)
    # its end without its start (another thread began it before this one ended)
    resets.stepped(state, first, resets.trained(state, first), here.ident)
    assert _sentinel(state, here) is first.param_groups[0]["params"][0]


def test_another_threads_sentinel_and_gradients_are_not_read():
    state, (first, second) = _two_optimizers()
    main, helper = ThreadState(1, "main", True), ThreadState(2, "helper", False)
    _step(state, main, first)
    _step(state, helper, second)
    assert _sentinel(state, main) is first.param_groups[0]["params"][0]
    assert _sentinel(state, helper) is second.param_groups[0]["params"][0]
    assert state.foreign(main, 0) == frozenset({1})
    assert state.foreign(helper, 1) == frozenset({0})
    assert state.foreign(main, None) == frozenset({1})
