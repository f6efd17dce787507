"""The rule catalogue: every module that declares rules with `@rule`, by stage, in the
order the stage runs its checks, as names (pytest's `default_plugins` are kept the same way).

Nothing is imported until a registry is read: `Declared` (findings.RULES, the registry's
docs and checks) loads the whole catalogue on its first read, so `import gradscope.errors`
and `gradscope --help` load no rule, and a report, `gradscope rules` or the judge still see
every rule of every family. A new rule module is one line here (tests/rules/test_catalogue.py
fails while a module that declares a rule is missing). No torch, nothing of gradscope
imported at the top.
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Iterator, Mapping
from typing import TypeVar

CATALOGUE: dict[str, tuple[str, ...]] = {
    # stage (registry.Stage's value): its declaring modules, in the order its checks run
    "run": (
        "gradscope.rules.experts",  # GS109
        "gradscope.rules.grads",  # GS101-GS103
        "gradscope.rules.magnitude",  # GS104, GS105
        "gradscope.rules.zeros",  # GS106, GS108, GS107
        "gradscope.rules.memory",  # GS301
        "gradscope.rules.logits",  # GS432
    ),
    "baseline": ("gradscope.gate.baseline",),
    "gradcheck": ("gradscope.gradcheck.findings",),
    "watch": (  # the judge runs them by rule id, whatever their order here
        "gradscope.rules.range_test",
        "gradscope.rules.step_above_chance",
        "gradscope.rules.step_after_clip",
        "gradscope.rules.step_amp",
        "gradscope.rules.step_betas",
        "gradscope.rules.step_attention",
        "gradscope.rules.step_batch",
        "gradscope.rules.step_blowup",
        "gradscope.rules.step_carried_graph",
        "gradscope.rules.step_buffer_graph",
        "gradscope.rules.step_clip_order",
        "gradscope.rules.step_copies",
        "gradscope.rules.step_derivative_cut",
        "gradscope.rules.step_clipping",
        "gradscope.rules.step_eps",
        "gradscope.rules.step_eval_train",
        "gradscope.rules.step_frozen_norms",
        "gradscope.rules.step_future_attention",
        "gradscope.rules.step_grad_off",
        "gradscope.rules.step_hook_again",
        "gradscope.rules.step_input_added",
        "gradscope.rules.step_layers",
        "gradscope.rules.step_logit_drift",
        "gradscope.rules.step_logits",
        "gradscope.rules.step_lr_compound",
        "gradscope.rules.step_lr_jump",
        "gradscope.rules.step_maximised",
        "gradscope.rules.step_meaning",
        "gradscope.rules.step_modes",
        "gradscope.rules.step_nan",
        "gradscope.rules.step_norm_spike",
        "gradscope.rules.step_optimizer",
        "gradscope.rules.step_outside",
        "gradscope.rules.step_progress",
        "gradscope.rules.step_reapplied",
        "gradscope.rules.step_reduction",
        "gradscope.rules.step_reference_trained",
        "gradscope.rules.step_same_batch",
        "gradscope.rules.step_same_grads",
        "gradscope.rules.step_schedule",
        "gradscope.rules.lr_negative",
        "gradscope.rules.step_schedule_pace",
        "gradscope.rules.step_self_scaled",
        "gradscope.rules.step_setup",
        "gradscope.rules.ste_undetached",
        "gradscope.rules.step_shared",
        "gradscope.rules.step_stale",
        "gradscope.rules.step_padding_targets",
        "gradscope.rules.step_stepped_nothing",
        "gradscope.rules.step_target_leak",
        "gradscope.rules.step_teacher_trained",
        "gradscope.rules.step_ema_reversed",
        "gradscope.rules.step_trends",
        "gradscope.rules.step_unbounded",
        "gradscope.rules.step_update_nan",
        "gradscope.rules.step_upstream_target",
        "gradscope.rules.step_vlag",
        "gradscope.rules.step_wiped",
        "gradscope.rules.step_zero_weight",
        "gradscope.rules.steps",
    ),
    "distributed": ("gradscope.distributed.findings",),
    "diff": ("gradscope.diff.findings", "gradscope.diff.runs.findings"),
}

_lock = threading.RLock()
_state = {"loaded": False, "loading": False}


def modules() -> list[str]:
    """Every declaring module, stage by stage."""
    return [name for names in CATALOGUE.values() for name in names]


def position(module: str) -> int:
    """The module's place in the catalogue, which orders a stage's checks (after every
    listed module for one not listed)."""
    listed = modules()
    return listed.index(module) if module in listed else len(listed)


def load() -> None:
    """Import every declaring module once. A read made while they load (by the thread
    loading them) sees the declarations so far; another thread waits for all of them."""
    if _state["loaded"]:
        return
    with _lock:
        if _state["loaded"] or _state["loading"]:
            return
        _state["loading"] = True
        try:
            for name in modules():
                importlib.import_module(name)
            _state["loaded"] = True
        finally:
            _state["loading"] = False


K = TypeVar("K")
V = TypeVar("V")


class Declared(Mapping[K, V]):
    """A registry the `@rule` declarations fill and every read of which first loads the
    catalogue, so it is complete wherever it is read. Declaring (`registry[key] = value`)
    and `holds` load nothing: a module being imported declares without importing others."""

    def __init__(self) -> None:
        self._items: dict[K, V] = {}

    def __setitem__(self, key: K, value: V) -> None:
        self._items[key] = value

    def holds(self, key: K) -> bool:
        """Whether `key` is declared so far (a declaration's own check: loads nothing)."""
        return key in self._items

    def __getitem__(self, key: K) -> V:
        load()
        return self._items[key]

    def __iter__(self) -> Iterator[K]:
        load()
        return iter(self._items)

    def __len__(self) -> int:
        load()
        return len(self._items)

    def __repr__(self) -> str:
        return f"Declared({self._items!r})"
