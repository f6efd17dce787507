"""The precursor scripts' text: batches of a Markov chain over the symbols of `table`, drawn
from a generator seeded `seed`. A chain's batches are kept for the process with the
generator that drew them: a test file watches several runs of one chain in-process (drawing
600 batches of logit_gpt.py's cost about 0.8 s of CPU a run), and each run reads the very
batches it would have drawn itself."""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import torch

Batch = tuple[torch.Tensor, torch.Tensor]
_CHAINS: dict[tuple[bytes, int, int, int], tuple[torch.Generator, list[Batch]]] = {}


def batches(table: torch.Tensor, seed: int, rows: int, length: int) -> Iterator[Batch]:
    """Every batch in turn: `rows` sequences of `length` symbols and their next symbols."""
    key = (table.numpy().tobytes(), seed, rows, length)
    g, drawn = _CHAINS.setdefault(key, (torch.Generator().manual_seed(seed), []))
    for i in itertools.count():
        if i == len(drawn):
            drawn.append(_draw(table, g, rows, length))
        yield drawn[i]


def _draw(table: torch.Tensor, g: torch.Generator, rows: int, length: int) -> Batch:
    x = torch.randint(0, table.shape[0], (rows, 1), generator=g)
    for _ in range(length):
        x = torch.cat([x, torch.multinomial(table[x[:, -1]], 1, generator=g)], 1)
    return x[:, :-1], x[:, 1:]
