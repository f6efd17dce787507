"""A plain training loop: a small GPT with AdamW, linear warm-up, cosine decay and
gradient clipping, on a synthetic token stream (healthy with the defaults).

    gradscope watch gradscope/examples/train_gpt.py -- --steps 300
    gradscope watch gradscope/examples/train_gpt.py -- --lr 0.05 --warmup 0   # too hot
"""

import argparse
import math

import torch

from gradscope.examples.transformer import GPT, GPTConfig

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=300)
parser.add_argument("--lr", type=float, default=3e-3)
parser.add_argument("--warmup", type=int, default=30)
parser.add_argument("--clip", type=float, default=2.0)
parser.add_argument("--batch-size", type=int, default=8)
parser.add_argument("--dim", type=int, default=64)
parser.add_argument("--layers", type=int, default=2)
parser.add_argument("--seed", type=int, default=0)
args = parser.parse_args()

torch.manual_seed(args.seed)
cfg = GPTConfig(vocab=64, context=32, dim=args.dim, heads=4, layers=args.layers)
# a learnable stream: each token follows from the two before it, with 10% noise
stream = torch.zeros(20000, dtype=torch.long)
stream[:2] = torch.tensor([1, 2])
noise = torch.rand(len(stream)) < 0.1
for i in range(2, len(stream)):
    stream[i] = (3 * stream[i - 1] + stream[i - 2]) % cfg.vocab
stream[noise] = torch.randint(0, cfg.vocab, (int(noise.sum()),))

model = GPT(cfg)
optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.1)


def lr_at(step: int) -> float:
    if step < args.warmup:
        return args.lr * (step + 1) / args.warmup
    progress = (step - args.warmup) / max(1, args.steps - args.warmup)
    return args.lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * progress)))


for step in range(args.steps):
    starts = torch.randint(0, len(stream) - cfg.context - 1, (args.batch_size,))
    chunk = torch.stack([stream[s : s + cfg.context + 1] for s in starts.tolist()])
    for group in optimizer.param_groups:
        group["lr"] = lr_at(step)
    loss = model(chunk[:, :-1], chunk[:, 1:]).loss
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip)
    optimizer.step()
    if step % 100 == 0:
        print(f"step {step}: loss {loss.item():.3f}")
