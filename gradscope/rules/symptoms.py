"""The groups of symptoms the causes' declarations share (`@rule(explains=...)`), so a
cause names a family of consequences once. No torch.
"""

from __future__ import annotations

KILLED = ("GS405", "GS410", "GS417")
"""What GS419 explains only for the parameters whose gradients it saw die."""

GROWTH = ("GS401", "GS402", "GS403", "GS404", "GS406", "GS409", "GS414", "GS415", "GS419")
"""What gradients that grow lead to: non-finite steps, spikes, a rising norm, clipping,
large updates, an early blow-up, a loss that does not fall, an lr that looks too high."""

LR_HIGH = ("GS401", "GS402", "GS403", "GS404", "GS409", "GS414", "GS415", *KILLED)
"""What a learning rate too high leads to."""

DIVERGENCE = (*GROWTH, "GS450", "GS451")
"""A divergence's symptoms, one layer's spike and Adam's lagging v among them."""
