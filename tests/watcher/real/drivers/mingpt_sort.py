"""minGPT as its README and demo.ipynb drive it: a gpt-nano learning to sort digits,
`Trainer(train_config, model, train_dataset).run()`. The model and the trainer are the
vendored, unmodified `mingpt` package; this file is the user's part (the notebook's
SortDataset, without its hash-based train/test split).

    python mingpt_sort.py [--lr 5e-4] [--max-iters 60] [--bug no_zero_grad]
"""

from __future__ import annotations

import argparse
import os
import sys
from unittest import mock

import torch
from torch.utils.data import Dataset

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "vendor", "mingpt"))

from mingpt.model import GPT
from mingpt.trainer import Trainer
from mingpt.utils import set_seed


class SortDataset(Dataset):
    """Input 0 0 2 1 0 1 → output 0 0 0 1 1 2, fed as one sequence; -1 marks ignored targets."""

    def __init__(self, length: int = 6, num_digits: int = 3) -> None:
        self.length = length
        self.num_digits = num_digits

    def __len__(self) -> int:
        return 10000

    def get_vocab_size(self) -> int:
        return self.num_digits

    def get_block_size(self) -> int:
        return self.length * 2 - 1

    def __getitem__(self, idx: int):
        inp = torch.randint(self.num_digits, size=(self.length,), dtype=torch.long)
        sol = torch.sort(inp)[0]
        cat = torch.cat((inp, sol), dim=0)
        x = cat[:-1].clone()
        y = cat[1:].clone()
        y[: self.length - 1] = -1
        return x, y


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--lr", type=float, default=5e-4)
    parser.add_argument("--max-iters", type=int, default=60)
    parser.add_argument("--bug", choices=["none", "no_zero_grad"], default="none")
    args = parser.parse_args()
    set_seed(3407)

    train_dataset = SortDataset()
    model_config = GPT.get_default_config()
    model_config.model_type = "gpt-nano"
    model_config.vocab_size = train_dataset.get_vocab_size()
    model_config.block_size = train_dataset.get_block_size()
    model = GPT(model_config)

    train_config = Trainer.get_default_config()
    train_config.learning_rate = args.lr
    train_config.max_iters = args.max_iters
    train_config.batch_size = 32
    train_config.num_workers = 0
    train_config.device = "cpu"
    trainer = Trainer(train_config, model, train_dataset)
    if args.bug == "no_zero_grad":  # the trainer's model.zero_grad(set_to_none=True) is lost
        with mock.patch.object(GPT, "zero_grad", lambda *a, **k: None):
            trainer.run()
    else:
        trainer.run()


if __name__ == "__main__":
    main()
