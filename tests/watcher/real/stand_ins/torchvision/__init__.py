"""A test-only stand-in for torchvision (the real wheel on this machine is a CUDA build
that does not load): just what the vendored pytorch/examples scripts import, with
synthetic data and no files written. Never a copy of torchvision's code.

Dataset sizes come from the environment so that a test keeps a run to a few steps:
GS_FAKE_SIZE (FakeData, default 1000 as torchvision's), GS_FAKE_MNIST_TRAIN and
GS_FAKE_MNIST_TEST (default 256 and 64).
"""

from . import datasets, transforms, utils

__all__ = ["datasets", "transforms", "utils"]
__version__ = "0.0-stand-in"
