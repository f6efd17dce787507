"""What gradscope knows of an optimizer's update rule, from the torch class it is, never
from its name or from the keys of its param groups.

A third-party optimizer may hold `betas`, `eps`, an `exp_avg_sq` and a `weight_decay`
and mean something else by each (Prodigy's moments are scaled by its adapted d, its
denominator is √v + d·eps, its decay is decoupled and scaled by d): reading them with
Adam's or AdamW's meaning gives false alarms on healthy runs. So:
- Adam's rule (m̂/(√v̂ + eps) at lr) is known for torch's Adam and AdamW (one step
  function), NAdam, and their subclasses (a subclass's own step wraps torch's);
- the step's size (about lr per element, or lr × the gradient) is known for torch's
  classes and VERIFIED ones; for any other no rule reads its lr as either;
- the weight decay's kind is known for torch's optimizers (decoupled where the group says
  decoupled_weight_decay, and Muon and Adafactor, which scale the weights; else added to
  the gradient) and for the third-party classes whose source was read (VERIFIED);
  for any other it is unknown (None), and no rule claims what it does.
"""

from __future__ import annotations

from typing import Any

import torch

ADAM_RULE = (torch.optim.Adam, torch.optim.NAdam)
"""Classes whose step is Adam's: torch's AdamW is an Adam (decoupled_weight_decay=True)."""

DECOUPLED_TORCH = ("Muon", "Adafactor")
"""torch classes that scale the weights by 1 - lr·wd whatever the group says."""

ADAM_STEP = (torch.optim.Adam, torch.optim.NAdam, torch.optim.RAdam, torch.optim.Adamax)
"""torch classes whose step moves each element by about lr, over a moving second moment
(Adamax's: a moving maximum) with β2."""

VERIFIED: dict[tuple[str, str], tuple[str, bool | None]] = {
    ("lion_pytorch.lion_pytorch", "Lion"): ("sign", True),
    ("transformers.optimization", "Adafactor"): ("", True),
    ("prodigyopt.prodigy", "Prodigy"): ("adapted", None),
    ("pytorch_optimizer.optimizer.prodigy", "Prodigy"): ("adapted", None),
    ("dadaptation.dadapt_adam", "DAdaptAdam"): ("adapted", None),
    ("pytorch_optimizer.optimizer.dadapt", "DAdaptAdam"): ("adapted", None),
}
"""(module, class) of third-party optimizers read at their source: what their update is
(`update`'s words) and whether their decay scales the weights (decoupled) or is added to
the gradient. Prodigy and D-Adaptation's Adam divide a d-scaled momentum by √v (+ eps):
each element moves by about d·lr, d their own estimate of the distance to travel (their
lr, 1 by design, only multiplies it); their decay is scaled by d too, so not claimed."""


def inner(optimizer: Any) -> Any:
    """The optimizer that steps: a wrapper sharing its param groups (accelerate's
    AcceleratedOptimizer, Lightning's) gives the one it wraps."""
    wrapped = getattr(optimizer, "optimizer", None)
    if wrapped is not None and getattr(wrapped, "param_groups", None) is getattr(
        optimizer, "param_groups", ()
    ):
        return wrapped
    return optimizer


def torch_class(optimizer: Any) -> type | None:
    """The torch.optim class it is or subclasses (a subclass's own step wraps torch's:
    logging, closures); None for any other, such as a class built on Optimizer itself."""
    for cls in type(inner(optimizer)).__mro__:
        module = cls.__module__
        if cls is not torch.optim.Optimizer and (
            module == "torch.optim" or module.startswith("torch.optim.")
        ):
            return cls
    return None


def adam_rule(optimizer: Any) -> bool:
    """Its update is Adam's m̂/(√v̂ + eps) at lr: torch's Adam, AdamW, NAdam or a subclass."""
    return isinstance(inner(optimizer), ADAM_RULE)


def update(optimizer: Any) -> str:
    """What its step is: "adam" (about lr per element over a moving second moment: torch's
    Adam family), "sign" (exactly lr per element: Lion), "adapted" (about d·lr per element,
    d the optimizer's own estimate: Prodigy, D-Adaptation's Adam), "torch" (torch's other
    classes: SGD, RMSprop, Adagrad...), "" where gradscope does not know."""
    cls = torch_class(optimizer)
    if cls is not None:
        return "adam" if issubclass(cls, ADAM_STEP) else "torch"
    return _verified(optimizer)[0]


def decoupled(optimizer: Any, group: dict[str, Any]) -> bool | None:
    """True where the group's weight decay scales the weights (AdamW's), False where it is
    added to the gradient (L2), None where gradscope does not know which."""
    cls = torch_class(optimizer)
    if cls is not None:
        return bool(group.get("decoupled_weight_decay")) or cls.__name__ in DECOUPLED_TORCH
    return _verified(optimizer)[1]


def _verified(optimizer: Any) -> tuple[str, bool | None]:
    """(its update, its decay decoupled) where its class was read at its source; ("", None)."""
    kind = type(inner(optimizer))
    return VERIFIED.get((kind.__module__, kind.__qualname__), ("", None))
