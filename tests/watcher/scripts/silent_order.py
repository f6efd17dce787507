"""Silent bugs of order and scale, on a character-level LM (`lm`) or an MLP classifier
(`clf`), one picked by argv[2]; each trains in well under a second on a CPU.

healthy        AdamW, zero_grad() before each step
accum          4 micro-batches of loss / 4 per step, zero_grad() once per step (healthy)
micro-steps    zero_grad(); backward(); step() per micro-batch (healthy: no accumulation)
zero-inside    optimizer.zero_grad() inside the accumulation loop: 1 of 4 micro-batches reaches
               the step
module-inside  model.zero_grad() inside the accumulation loop
none-inside    p.grad = None for every parameter inside the accumulation loop
steplr-batch   StepLR(step_size=10, gamma=0.1) meant per epoch, stepped per batch
exp-batch      ExponentialLR(gamma=0.8) meant per epoch, stepped per batch
cosine-batch   CosineAnnealingLR(T_max=10 epochs) stepped per batch
steplr-micro   StepLR(step_size=10, gamma=0.5) stepped per micro-batch of 4
cosine-steps   CosineAnnealingLR(T_max=total steps) stepped per step (healthy)
onecycle       OneCycleLR over the total steps (healthy)
steplr-epoch   StepLR(step_size=1, gamma=0.5) stepped once per epoch of 10 batches (healthy)
multistep-batch MultiStepLR(milestones=[5, 10] epochs) stepped per batch
linear-batch   LinearLR(end_factor=0, total_iters=10 epochs) stepped per batch
cosine-floor   CosineAnnealingLR(T_max=total steps, eta_min=peak / 1000) (healthy)
cosine-last    CosineAnnealingLR(T_max=total steps - 1): eta_min at the last step (healthy)
linear-steps   LinearLR(end_factor=0, total_iters=total steps) (healthy)
warmup-cosine  LambdaLR: 5 steps of warm-up, then a cosine to 0 over the run (healthy)
multistep-end  MultiStepLR(milestones at 75% and 92% of the steps, gamma=0.1) stepped per
               step: 1% of the peak for the last 8% of the run, a detection recipe (healthy)
exp-end        ExponentialLR stepped per step, its gamma taking the lr to 1% at 92% of the
               run (healthy)
replace-weight the output layer's weight replaced by a new nn.Parameter after the optimizer
replace-head   the output layer replaced by a new nn.Linear after the optimizer
load-assign    load_state_dict(..., assign=True) after the optimizer: fresh tensors
load-copy      load_state_dict(...) after the optimizer: copied in place (healthy)
replace-before the output layer replaced before the optimizer was built (healthy)
*-mid          replace-weight, replace-head, load-assign, load-copy after step 5 instead;
               add-group-mid: the head replaced after step 5 and given to the optimizer with
               add_param_group (healthy); identity-mid: a parameterless module attached
               after step 5 (healthy)
sum-sgd        SGD with reduction="sum" over a batch of 256: the step × 256
sum-adam       Adam with reduction="sum" over a batch of 256 (healthy: Adam is invariant)
twice-sgd      SGD, 4 micro-batches, the loss divided by 4 twice: the step ÷ 4
twice-adam     Adam, 4 micro-batches, the loss divided by 4 twice (healthy: invariant)
sum-sgd-small  SGD with reduction="sum" and an lr set for it (lr / batch: healthy)
"""

import math
import sys

import torch
import torch.nn.functional as F
from torch import nn

kind = sys.argv[1] if len(sys.argv) > 1 else "lm"
bug = sys.argv[2] if len(sys.argv) > 2 else "healthy"
steps = int(sys.argv[3]) if len(sys.argv) > 3 else 60
torch.manual_seed(0)
g = torch.Generator().manual_seed(1)
V, CONTEXT = 27, 3
BATCH = 256 if bug.startswith("sum") else 32
table = torch.distributions.Dirichlet(torch.full((V,), 0.1)).sample((V,))
centres = torch.randn(10, 20) * 2


def batch() -> tuple[torch.Tensor, torch.Tensor]:
    if kind == "clf":
        y = torch.randint(0, 10, (BATCH,), generator=g)
        return centres[y] + torch.randn(BATCH, 20, generator=g), y
    x = torch.randint(0, V, (BATCH, 1), generator=g)
    for _ in range(CONTEXT):
        x = torch.cat([x, torch.multinomial(table[x[:, -1]], 1, generator=g)], 1)
    return x[:, :CONTEXT], x[:, CONTEXT]


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        if kind == "clf":
            self.body = nn.Sequential(nn.Linear(20, 64), nn.ReLU())
        else:
            self.body = nn.Sequential(
                nn.Embedding(V, 16), nn.Flatten(), nn.Linear(16 * CONTEXT, 64), nn.Tanh()
            )
        self.head = nn.Linear(64, 10 if kind == "clf" else V)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.body(x))


model = Net()
if bug == "replace-before":
    model.head = nn.Linear(64, model.head.out_features)
sgd = bug.endswith("sgd") or bug == "sum-sgd-small"
if sgd:
    lr = 0.5 / BATCH if bug == "sum-sgd-small" else 0.1
    opt: torch.optim.Optimizer = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
elif bug.endswith("adam"):
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
else:
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)


def replace(bug: str) -> None:
    if bug == "replace-weight":
        model.head.weight = nn.Parameter(torch.randn_like(model.head.weight) * 0.05)
    elif bug == "replace-head":
        model.head = nn.Linear(64, model.head.out_features)
    elif bug in ("load-assign", "load-copy"):
        saved = {k: v.clone() for k, v in Net().state_dict().items()}
        model.load_state_dict(saved, assign=bug == "load-assign")
    elif bug == "add-group":
        model.head = nn.Linear(64, model.head.out_features)
        opt.add_param_group({"params": model.head.parameters()})
    elif bug == "identity":
        model.tap = nn.Identity()


MID = 5
replace(bug)

epoch = 10  # batches per epoch
sched = None
if bug == "steplr-batch":
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=10, gamma=0.1)
elif bug == "exp-batch":
    sched = torch.optim.lr_scheduler.ExponentialLR(opt, gamma=0.8)
elif bug == "cosine-batch":
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=10)
elif bug == "steplr-micro":
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=10, gamma=0.5)
elif bug == "cosine-steps":
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=steps)
elif bug == "onecycle":
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=3e-3, total_steps=steps)
elif bug == "steplr-epoch":
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)
elif bug == "multistep-batch":
    sched = torch.optim.lr_scheduler.MultiStepLR(opt, milestones=[5, 10], gamma=0.1)
elif bug == "multistep-end":
    marks = [int(steps * 0.75), int(steps * 0.92)]
    sched = torch.optim.lr_scheduler.MultiStepLR(opt, milestones=marks, gamma=0.1)
elif bug == "exp-end":
    sched = torch.optim.lr_scheduler.ExponentialLR(opt, gamma=0.01 ** (1 / (0.92 * steps)))
elif bug in ("linear-batch", "linear-steps"):
    total = 10 if bug == "linear-batch" else steps
    sched = torch.optim.lr_scheduler.LinearLR(opt, 1.0, 0.0, total_iters=total)
elif bug in ("cosine-floor", "cosine-last"):
    floor = 3e-6 if bug == "cosine-floor" else 0.0
    t_max = steps if bug == "cosine-floor" else steps - 1
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=t_max, eta_min=floor)
elif bug == "warmup-cosine":

    def warm_cosine(s: int) -> float:
        if s < 5:
            return (s + 1) / 5
        return 0.5 * (1 + math.cos(math.pi * (s - 5) / (steps - 5)))

    sched = torch.optim.lr_scheduler.LambdaLR(opt, warm_cosine)

micro = 4 if bug in ("accum", "micro-steps", "steplr-micro") or "inside" in bug else 1
micro = 4 if bug.startswith("twice") else micro
for it in range(steps):
    if it == MID and bug.endswith("-mid"):
        replace(bug.removesuffix("-mid"))
    opt.zero_grad()
    for _ in range(micro):
        if bug == "zero-inside":
            opt.zero_grad()
        elif bug == "module-inside":
            model.zero_grad()
        elif bug == "none-inside":
            for p in model.parameters():
                p.grad = None
        x, y = batch()
        loss = F.cross_entropy(model(x), y, reduction="sum" if bug.startswith("sum") else "mean")
        if bug.startswith("twice"):
            loss = loss / micro  # the recipe's division ...
        (loss / micro).backward()  # ... and again at the backward
        if bug == "micro-steps":
            opt.step()
            opt.zero_grad()
        if bug == "steplr-micro":
            sched.step()
    if bug != "micro-steps":
        opt.step()
    if sched is not None and bug != "steplr-micro" and (bug != "steplr-epoch" or it % epoch == 9):
        sched.step()
