# a DataLoader worker killed by SIGKILL (as the OOM killer does) after 50 steps: the run
# fails there, the user's error; the 50 steps are reported
import os
import signal
import time

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
data = TensorDataset(torch.randn(4096, 4), torch.randn(4096, 1))
loader = DataLoader(data, batch_size=8, num_workers=2)
model = nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
it = iter(loader)
for step, (x, y) in enumerate(it):
    loss = (model(x) - y).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    if step == 49:
        os.kill(it._workers[0].pid, signal.SIGKILL)
        time.sleep(30)  # DataLoader's SIGCHLD handler raises here, before a 51st step
