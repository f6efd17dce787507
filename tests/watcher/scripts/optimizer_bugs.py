# optimizer set-up bugs: the head's group has lr 0, `extra` is in no param group, `unused`
# is in the optimizer but never takes part in the loss; `frozen` (requires_grad=False) is
# passed to the optimizer anyway
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Linear(8, 16)
        self.head = nn.Linear(16, 1)
        self.extra = nn.Linear(16, 16)
        self.unused = nn.Linear(4, 4)
        self.frozen = nn.Linear(16, 16).requires_grad_(False)

    def forward(self, x):
        h = self.frozen(torch.relu(self.body(x)))
        return self.head(torch.relu(self.extra(h)))


torch.manual_seed(0)
model = Net()
opt = torch.optim.SGD(
    [
        {
            "params": [
                *model.body.parameters(),
                *model.unused.parameters(),
                *model.frozen.parameters(),
            ]
        },
        {"params": model.head.parameters(), "lr": 0.0},
    ],
    lr=0.05,
)
for _step in range(60):
    x = torch.randn(16, 8)
    loss = nn.functional.mse_loss(model(x), x[:, :1])
    opt.zero_grad()
    loss.backward()
    opt.step()
