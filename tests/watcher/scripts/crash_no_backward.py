# runs to its end without a backward
import torch

print(torch.ones(2).sum().item())
