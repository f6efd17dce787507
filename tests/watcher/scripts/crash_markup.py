# three optimizer steps, then an error whose text holds brackets, a rich closing tag and
# control characters; a module name with brackets that no optimizer holds (GS411)
import torch
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(3, 3), nn.Linear(3, 1))
model.add_module("odd[/x][bold]" + "n" * 70, nn.Linear(1, 1))
opt = torch.optim.SGD([*model[0].parameters(), *model[1].parameters()], lr=0.01)


def check(x):
    raise ValueError(f"expected [batch, 3] got {list(x.shape)} [/x] \x1b[31mred\x07")


for _ in range(3):
    loss = model(torch.randn(4, 3)).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
check(torch.randn(4, 3))
