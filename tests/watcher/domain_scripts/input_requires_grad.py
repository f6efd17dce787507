"""A frozen embedding under trainable, checkpointed blocks, the way transformers'
enable_input_require_grads() sets up adapters with gradient checkpointing: a forward hook
makes the embedding's output require grad, so each step's output is a new leaf that holds
its own gradient. MODE: hook (that), batch (the batch made to require grad to read its
saliency), stray (a bare temperature the loss uses, left out of the optimizer: a bug)."""

import sys

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint

mode = sys.argv[1] if len(sys.argv) > 1 else "hook"
steps = int(sys.argv[2]) if len(sys.argv) > 2 else 40
torch.manual_seed(0)
V, D, L = 32, 16, 8
embed = nn.Embedding(V, D).requires_grad_(False)
blocks = nn.ModuleList(nn.Sequential(nn.Linear(D, D), nn.GELU()) for _ in range(2))
head = nn.Linear(D, V)
params = [*blocks.parameters(), *head.parameters()]
opt = torch.optim.AdamW(params, lr=3e-3)
temperature = torch.ones((), requires_grad=True)  # the stray mode's, in no optimizer
if mode == "hook":
    embed.register_forward_hook(lambda module, args, out: out.requires_grad_(True))
for _ in range(steps):
    ids = torch.randint(0, V, (16, L))
    target = (ids + 1) % V
    h = embed(ids)
    if mode == "batch":
        h.requires_grad_(True)
    x = h
    for block in blocks:
        x = x + checkpoint(block, x, use_reentrant=False)
    logits = head(x)
    if mode == "stray":
        logits = logits / temperature
    loss = F.cross_entropy(logits.flatten(0, 1), target.flatten())
    opt.zero_grad()
    loss.backward()
    if mode == "batch":
        saliency = h.grad.abs().sum(-1)  # what each token contributed
    opt.step()
print("loss", loss.item())
