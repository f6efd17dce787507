# crashes with its own exception (or Ctrl-C, or sys.exit(3)) after 30 optimizer steps
import sys

import torch
from torch import nn

how = sys.argv[1] if len(sys.argv) > 1 else "raise"
torch.manual_seed(0)
model = nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for step in range(1, 100):
    loss = model(torch.randn(8, 4)).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    print(f"step {step}")
    if step == 30:
        if how == "raise":
            raise RuntimeError("loss assertion failed at step 30")
        if how == "interrupt":
            raise KeyboardInterrupt
        sys.exit(3)
