"""Targets for the CLI tests: the HF models and their ports, one factory per seeded bug."""

from __future__ import annotations

import sys

sys.path.insert(0, __file__.rpartition("/")[0])
import diff_ports as ports


def gpt2_ref():
    return ports.gpt2_ref()


def gpt2_port():
    return ports.gpt2_port()


def gpt2_port_residual():
    return ports.gpt2_port(["residual"])


def gpt2_port_dropout():
    return ports.gpt2_port(["dropout"])


def llama_ref():
    return ports.llama_ref()


def llama_port_rotary():
    return ports.llama_port(["rotary"])


def broken():
    raise RuntimeError("cannot build")


def gpt2_port_eps():
    return ports.gpt2_port(["eps"])
