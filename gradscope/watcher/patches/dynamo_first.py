"""torch's dynamo copies the Tensor class's attributes when it is first imported
(`torch._dynamo.variables.tensor.all_tensor_attrs`), and torch imports it lazily, at the
first optimizer a script builds (`Optimizer.add_param_group` is wrapped to disable dynamo).
Built inside a watch, that copy took the patched Tensor methods (backward, softmax,
log_softmax) for the life of the process: their closures hold the watch's state, and with
it every model, optimizer and tensor the run made, after the watch ended (a search of many
trials run under `gradscope.watch()` kept them all), and a torch.compile later in the
process read the patches as the Tensor's own methods. Importing it before patching leaves
torch's own methods in the copy; the script would import it at its first optimizer anyway."""

from __future__ import annotations

import importlib
import sys


def import_dynamo_first() -> None:
    """Import torch._dynamo (and its copy of the Tensor's attributes) now, unpatched."""
    if "torch._dynamo" in sys.modules:
        return
    try:
        importlib.import_module("torch._dynamo")
    except Exception:  # a torch built without dynamo: nothing takes the copy
        return
