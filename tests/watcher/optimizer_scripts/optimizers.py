"""The optimizers the sweep runs, each at its documented default or recommended settings.

A spec names the package, the class and the keywords its documentation recommends
(lr=1.0 for Prodigy and D-Adaptation; a weight decay where the docs use one); "po:NAME"
is pytorch_optimizer's NAME at its defaults (`OVERRIDES` where a default cannot train
300 steps: an SGD at lr 1e-4), "po-wd:NAME" the same with weight_decay=0.01. `How` says
what the training loop must do for it."""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class How:
    train_eval: bool = False
    """optimizer.train() before each step (schedule-free: it swaps the weights in place)."""
    closure: bool = False
    create_graph: bool = False


SCHEDULE_FREE = How(train_eval=True)
HESSIAN = How(create_graph=True)

SPECS: dict[str, tuple[str, dict[str, Any], How]] = {
    "torch-adamw": ("torch.optim:AdamW", {"lr": 3e-3, "weight_decay": 0.01}, How()),
    "torch-adam": ("torch.optim:Adam", {"lr": 3e-3}, How()),
    "torch-adam-l2": ("torch.optim:Adam", {"lr": 3e-3, "weight_decay": 0.01}, How()),
    "torch-nadam": ("torch.optim:NAdam", {"lr": 3e-3}, How()),
    "torch-radam": ("torch.optim:RAdam", {"lr": 3e-3}, How()),
    "torch-adamax": ("torch.optim:Adamax", {"lr": 3e-3}, How()),
    "torch-sgd": ("torch.optim:SGD", {"lr": 0.1, "momentum": 0.9, "weight_decay": 5e-4}, How()),
    "prodigy": ("prodigyopt:Prodigy", {"lr": 1.0, "weight_decay": 0.01}, How()),
    "prodigy-nowd": ("prodigyopt:Prodigy", {"lr": 1.0}, How()),
    "prodigy-lr100": ("prodigyopt:Prodigy", {"lr": 100.0}, How()),
    "lion-wd100": ("lion_pytorch:Lion", {"lr": 3e-4, "weight_decay": 100.0}, How()),
    "clone": ("adam_clone:AdamClone", {"lr": 3e-3, "weight_decay": 0.01}, How()),
    "clone-eps": ("adam_clone:AdamClone", {"lr": 3e-3, "eps": 0.1}, How()),
    "torch-adam-eps": ("torch.optim:Adam", {"lr": 3e-3, "eps": 0.1}, How()),
    "dadapt-adam": ("dadaptation:DAdaptAdam", {"lr": 1.0, "weight_decay": 0.01}, How()),
    "dadapt-sgd": ("dadaptation:DAdaptSGD", {"lr": 1.0, "momentum": 0.9}, How()),
    "dadapt-lion": ("dadaptation:DAdaptLion", {"lr": 1.0, "weight_decay": 0.01}, How()),
    "dadapt-adagrad": ("dadaptation:DAdaptAdaGrad", {"lr": 1.0}, How()),
    "sf-adamw": (
        "schedulefree:AdamWScheduleFree",
        {"lr": 2.5e-3, "warmup_steps": 20, "weight_decay": 0.01},
        SCHEDULE_FREE,
    ),
    "sf-sgd": ("schedulefree:SGDScheduleFree", {"lr": 0.5, "warmup_steps": 20}, SCHEDULE_FREE),
    "sf-radam": ("schedulefree:RAdamScheduleFree", {"lr": 2.5e-3}, SCHEDULE_FREE),
    "lion": ("lion_pytorch:Lion", {"lr": 3e-4, "weight_decay": 0.1}, How()),
    "came": (
        "came_pytorch:CAME",
        {"lr": 2e-4, "weight_decay": 0.01, "betas": (0.9, 0.999, 0.9999), "eps": (1e-30, 1e-16)},
        How(),
    ),
    "to-lamb": ("torch_optimizer:Lamb", {"lr": 1e-2, "weight_decay": 0.01}, How()),
    "to-adabelief": ("torch_optimizer:AdaBelief", {"lr": 1e-3, "eps": 1e-16}, How()),
    "to-yogi": ("torch_optimizer:Yogi", {"lr": 1e-2}, How()),
    "to-radam": ("torch_optimizer:RAdam", {"lr": 1e-3}, How()),
    "to-ranger": ("torch_optimizer:Ranger", {"lr": 1e-3}, How()),
    "to-qhadam": ("torch_optimizer:QHAdam", {"lr": 1e-3}, How()),
    "to-shampoo": ("torch_optimizer:Shampoo", {"lr": 1e-1}, How()),
    "to-adahessian": ("torch_optimizer:Adahessian", {"lr": 0.15}, HESSIAN),
    "to-madgrad": ("torch_optimizer:MADGRAD", {"lr": 1e-2}, How()),
    "ranger": ("pytorch_ranger:Ranger", {"lr": 1e-3}, How()),
}

OVERRIDES: dict[str, dict[str, Any]] = {
    "sgd": {"lr": 0.1, "momentum": 0.9},
    "sgdw": {"lr": 0.1, "momentum": 0.9, "weight_decay": 5e-4},
    "signsgd": {"lr": 1e-3},
    "asgd": {"lr": 0.05},
    "accsgd": {"lr": 0.1},
    "qhm": {"lr": 0.1},
    "aggmo": {"lr": 0.1},
    "lars": {"lr": 0.1},
    "sgdp": {"lr": 0.1, "weight_decay": 1e-5},
    "nero": {"lr": 0.01},
    "madgrad": {"lr": 1e-2},
    "lion": {"lr": 3e-4, "weight_decay": 0.1},
    "adamw": {"lr": 3e-3, "weight_decay": 0.01},
    "lamb": {"lr": 1e-2, "weight_decay": 0.01},
    "soap": {"lr": 3e-3, "weight_decay": 0.01},
    "adan": {"lr": 3e-3, "weight_decay": 0.02},
    "ademamix": {"lr": 1e-3},
    "mars": {"lr": 3e-3, "weight_decay": 0.01},
    "sophiah": {"lr": 0.06},
    "adahessian": {"lr": 0.15},
    "prodigy": {"lr": 1.0, "weight_decay": 0.01},
    "schedulefreeadamw": {"lr": 2.5e-3, "warmup_steps": 20, "weight_decay": 0.01},
    "schedulefreeradam": {"lr": 2.5e-3},
    "schedulefreesgd": {"lr": 0.5, "warmup_steps": 20},
    "dadaptadam": {"lr": 1.0, "weight_decay": 0.01},
    "dadaptlion": {"lr": 1.0, "weight_decay": 0.01},
    "dadaptsgd": {"lr": 1.0, "momentum": 0.9},
}
"""pytorch_optimizer's defaults replaced where its docs recommend otherwise or the default
cannot train 300 steps."""

SPECIAL = {"sophiah": HESSIAN, "adahessian": HESSIAN, "lbfgs": How(closure=True)}


def names() -> list[str]:
    import pytorch_optimizer

    return [*SPECS, *(f"po:{n}" for n in pytorch_optimizer.get_supported_optimizers())]


def build(name: str, model: Any) -> tuple[Any, How]:
    if name.startswith(("po:", "po-wd:")):
        import pytorch_optimizer

        prefix, _, short = name.partition(":")
        how = SPECIAL.get(short, How(train_eval=short.startswith("schedulefree")))
        cls = pytorch_optimizer.load_optimizer(short)
        kwargs = {
            **OVERRIDES.get(short, {}),
            **({"weight_decay": 0.01} if prefix == "po-wd" else {}),
        }
        return cls(model.parameters(), **kwargs), how
    where, kwargs, how = SPECS[name]
    module, _, cls = where.partition(":")
    return getattr(importlib.import_module(module), cls)(model.parameters(), **kwargs), how
