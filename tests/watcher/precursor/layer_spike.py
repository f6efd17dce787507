# One layer's gradient jumps far above its own median at step 150 while the total norm
# moves about 10x (GS450): "column" fills a normally empty input column with values 100x
# the features' scale (the input layer: 60x); "penalty" adds a one-step L2 penalty on the
# hidden layer's weights (27x); "healthy" is the same run (model, data, seed) without
# either. ARGS: MODE [STEPS [SIZE]] (SIZE: the column's value, or the penalty's weight).
import sys

import torch
from torch import nn

mode = sys.argv[1] if len(sys.argv) > 1 else "healthy"
steps = int(sys.argv[2]) if len(sys.argv) > 2 else 200
size = float(sys.argv[3]) if len(sys.argv) > 3 else {"column": 5.0, "penalty": 0.2}.get(mode, 0)
torch.manual_seed(0)


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.inp = nn.Linear(16, 64)
        self.hidden = nn.Linear(64, 64)
        self.head = nn.Linear(64, 4)

    def forward(self, x):
        return self.head(torch.relu(self.hidden(torch.relu(self.inp(x)))))


model = Net()
truth = torch.randn(16, 4)
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
for step in range(1, steps + 1):
    x = 0.05 * torch.randn(32, 16)  # features scaled small, as a pipeline normalised them
    x[:, 5] = 0.0  # a feature that is missing (0) in every row the run normally sees
    y = (x @ truth).argmax(1)
    if mode == "column" and step == 150:
        x[:, 5] = size  # a batch where it is filled: 100x the features' scale
    loss = nn.functional.cross_entropy(model(x), y)
    if mode == "penalty" and step == 150:
        loss = loss + size * model.hidden.weight.pow(2).sum()
    opt.zero_grad()
    loss.backward()
    opt.step()
