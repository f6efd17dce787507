"""torch's own warnings raised inside a patched entry point keep the user's line as their
location under `watch` (patches/warning_site.py), as they have without it: one case per
kind of patch that puts frames between the script and torch, and the filters a script
sets by module and `-W error` acting as they do bare."""

from __future__ import annotations

import warnings
from collections.abc import Callable

import pytest
import torch
from torch import nn

import gradscope


def _sgd() -> tuple[nn.Module, torch.optim.Optimizer]:
    model = nn.Linear(2, 1)
    return model, torch.optim.SGD(model.parameters(), lr=0.1)


def scheduler_before_step() -> None:
    model, opt = _sgd()
    schedule = torch.optim.lr_scheduler.StepLR(opt, 2)
    model(torch.randn(3, 2)).sum().backward()
    schedule.step()  # WARNS
    opt.step()


def autograd_backward_deprecated_argument() -> None:
    model, opt = _sgd()
    loss = model(torch.randn(3, 2)).sum()
    torch.autograd.backward(loss, grad_variables=torch.ones(()))  # WARNS
    opt.step()


def clip_of_an_empty_generator() -> None:
    model, opt = _sgd()
    model(torch.randn(3, 2)).sum().backward()
    torch.nn.utils.clip_grad_norm_((p for p in model.parameters() if p.ndim > 5), 1.0)  # WARNS
    opt.step()


def module_zero_grad_of_a_replica() -> None:
    model, opt = _sgd()
    model(torch.randn(3, 2)).sum().backward()
    opt.step()
    model._is_replica = True
    model.zero_grad()  # WARNS


class ScalingSGD(torch.optim.SGD):
    """An optimizer that takes GradScaler's deprecated `grad_scaler` keyword."""

    _step_supports_amp_scaling = True

    def step(self, closure=None, grad_scaler=None):  # type: ignore[override]
        return super().step(closure)


def grad_scaler_step_with_the_old_keyword() -> None:
    model = nn.Linear(2, 1)
    opt = ScalingSGD(model.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler("cpu")
    scaler.scale(model(torch.randn(3, 2)).sum()).backward()
    scaler.step(opt)  # WARNS


CASES = [
    scheduler_before_step,
    autograd_backward_deprecated_argument,
    clip_of_an_empty_generator,
    module_zero_grad_of_a_replica,
    grad_scaler_step_with_the_old_keyword,
]


def _line(case: Callable[[], None]) -> int:
    import inspect

    lines, first = inspect.getsourcelines(case)
    return first + next(i for i, text in enumerate(lines) if text.rstrip().endswith("# WARNS"))


def _warned(case: Callable[[], None], watched: bool) -> list[tuple[str, int, str]]:
    torch.manual_seed(0)
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        if watched:
            with gradscope.watch():
                case()
        else:
            case()
    return [(w.filename, w.lineno, str(w.message)[:40]) for w in got]


@pytest.mark.parametrize("case", CASES, ids=[c.__name__ for c in CASES])
def test_a_warning_inside_a_patch_points_at_the_users_line(case):
    bare = _warned(case, watched=False)
    assert (__file__, _line(case)) in [(f, n) for f, n, _ in bare]  # torch does warn there
    assert _warned(case, watched=True) == bare


def test_the_scripts_filters_by_module_and_error_act_as_without_the_watch():
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        warnings.filterwarnings("ignore", message="Detected call", module=__name__)
        with gradscope.watch():
            scheduler_before_step()
    assert not [w for w in got if "Detected call" in str(w.message)]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(UserWarning, match="Detected call"), gradscope.watch():
            scheduler_before_step()


def test_a_warning_with_no_patch_in_its_way_is_passed_on_unchanged():
    def hook(grad: torch.Tensor) -> torch.Tensor:
        warnings.warn("from the script's own hook", stacklevel=1)  # the hook's own line
        return grad

    def case() -> None:
        model, opt = _sgd()
        out = model(torch.randn(3, 2))
        out.register_hook(hook)
        out.sum().backward()
        opt.step()

    bare = _warned(case, watched=False)
    assert bare and bare[0][0] == __file__
    assert _warned(case, watched=True) == bare
