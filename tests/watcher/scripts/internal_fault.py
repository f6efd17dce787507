"""A healthy loop in which gradscope's post-step hook fails at step 3 (the failure is
put there by the script, standing in for a bug of gradscope's): the loop runs on."""

import torch

from gradscope.watcher import stepping

finish = stepping.finish


def failing(state, here, optimizer):
    if state.steps == 2:
        raise ZeroDivisionError("float division by zero")
    finish(state, here, optimizer)


stepping.finish = failing
torch.manual_seed(0)
model = torch.nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for _ in range(6):
    loss = model(torch.randn(8, 4)).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
print("done", round(loss.item(), 6))
