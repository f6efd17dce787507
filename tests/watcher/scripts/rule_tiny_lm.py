# a tiny transformer language model (vocab 64, chance = ln 64 = 4.16); argv[1] is Adam's
# learning rate: 3e-3 trains, 0.3 blows up in the first steps and never recovers; with
# --clip (max_norm 1.0) the blow-up is held back and the loss stalls near its start instead
import sys

import torch

from gradscope.examples.transformer import GPT, GPTConfig

lr = float(sys.argv[1]) if len(sys.argv) > 1 else 3e-3
clip = "--clip" in sys.argv
torch.manual_seed(0)
cfg = GPTConfig(vocab=64, context=16, dim=32, heads=2, layers=2)
stream = torch.zeros(5000, dtype=torch.long)
stream[:2] = torch.tensor([1, 2])
for i in range(2, len(stream)):
    stream[i] = (3 * stream[i - 1] + stream[i - 2]) % cfg.vocab
model = GPT(cfg)
opt = torch.optim.Adam(model.parameters(), lr=lr)
for _step in range(120):
    starts = torch.randint(0, len(stream) - cfg.context - 1, (8,))
    chunk = torch.stack([stream[s : s + cfg.context + 1] for s in starts.tolist()])
    loss = model(chunk[:, :-1], chunk[:, 1:]).loss
    opt.zero_grad()
    loss.backward()
    if clip:
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
