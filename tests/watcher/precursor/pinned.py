"""Watched runs whose loss curves are chaotic (a collapse's timing moves by hundreds of
steps with the last bit of a sum), made the same on every machine: each is watched in a
fresh process whose CPU kernels are pinned to one code path. Torch's vectorised kernels
follow the CPU (AVX2, AVX-512) and MKL's matrix products the CPU's maker, so the same seed
diverged at step ~525 on one machine and not by step 600 on another; scalar kernels, MKL's
reproducible path and oneDNN's SSE4.1 code are the same on any x86-64 CPU (at about 1.8×
the time). Not across machine images: most likely through the C library's math
functions the scalar kernels call, on a Debian 12 image (glibc 2.36) the `attn` run of
seed 0 climbs from about step 300, not 392; a test of such a run asserts what holds on
both."""

from __future__ import annotations

import multiprocessing
import os
from concurrent.futures import ProcessPoolExecutor
from typing import Any

PINNED = {
    "ATEN_CPU_CAPABILITY": "default",
    "MKL_CBWR": "COMPATIBLE",
    "ONEDNN_MAX_CPU_ISA": "SSE41",
    "OMP_NUM_THREADS": "1",
}
"""Read once, as torch loads: so in a process of their own."""


def _watch(script: str, argv: list[str]) -> Any:
    from gradscope.watcher import watch_script

    return watch_script(script, argv)


def watch_pinned(script: str, argv: list[str]) -> Any:
    """The WatchReport of `script argv`, watched in a spawned process under PINNED."""
    saved = {k: os.environ.get(k) for k in PINNED}
    os.environ.update(PINNED)
    try:
        spawn = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(1, mp_context=spawn) as pool:
            return pool.submit(_watch, script, argv).result()
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
