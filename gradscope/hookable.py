"""Whether a module takes Python forward hooks. A TorchScript module (what torch.jit.script
makes of an nn.Module) refuses them ("register_forward_pre_hook is not supported on
ScriptModules"), and its compiled forward would never call them: gradscope hooks around it."""

from __future__ import annotations

from typing import Any

import torch


def hookable(module: Any) -> bool:
    return not isinstance(module, torch.jit.ScriptModule)
