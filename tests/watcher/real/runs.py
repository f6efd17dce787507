"""The real scripts as the tests run them: tiny configs, synthetic data written to a fresh
temporary folder (the run's working directory), and each run made once per session.

`plain(case)` runs the script without gradscope, inside the independent `Oracle`;
`watched(case)` runs the same seeded script under `watch_script`. Both run in this
process, on one thread, in the same isolation: working directory, sys.argv, sys.path
(the torchvision stand-in first), environment, and the modules the run imported from
this folder are all put back afterwards, so two scripts' `model` modules never meet.
"""

from __future__ import annotations

import contextlib
import functools
import os
import pickle
import runpy
import shutil
import sys
import tempfile
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np
import torch

from .oracle import Oracle, OracleStep

HERE = os.path.dirname(os.path.abspath(__file__))
VENDOR = os.path.join(HERE, "vendor")
STAND_INS = os.path.join(HERE, "stand_ins")
DRIVERS = os.path.join(HERE, "drivers")

NANOGPT = os.path.join(VENDOR, "nanogpt", "train.py")
EXAMPLES = os.path.join(VENDOR, "pytorch_examples")
DCGAN = os.path.join(EXAMPLES, "dcgan", "main.py")
WORD_LM = os.path.join(EXAMPLES, "word_language_model", "main.py")
SINE = os.path.join(EXAMPLES, "time_sequence_prediction", "train.py")
VAE = os.path.join(EXAMPLES, "vae", "main.py")
MNIST = os.path.join(EXAMPLES, "mnist", "main.py")
MINGPT = os.path.join(DRIVERS, "mingpt_sort.py")
INJECT = os.path.join(DRIVERS, "inject.py")


# -- synthetic data, written into the run's working directory --------------------------------
def _markov_text(n: int, vocab: list[str], seed: int) -> list[str]:
    """Tokens from a sparse random Markov chain: structure a tiny model can learn."""
    rng = np.random.default_rng(seed)
    table = rng.dirichlet(np.full(len(vocab), 0.1), size=len(vocab))
    out, state = [], 0
    for _ in range(n):
        state = int(rng.choice(len(vocab), p=table[state]))
        out.append(vocab[state])
    return out


def nanogpt_data(workdir: str) -> None:
    """data/shakespeare_char/{train,val}.bin and meta.pkl as prepare.py writes them; the
    script reads `configurator.py` and `config/` from its working directory."""
    chars = sorted(set("abcdefghijklmnopqrstuvwxyz .,\n"))
    text = "".join(_markov_text(20000, chars, seed=0))
    stoi = {c: i for i, c in enumerate(chars)}
    ids = np.array([stoi[c] for c in text], dtype=np.uint16)
    folder = os.path.join(workdir, "data", "shakespeare_char")
    os.makedirs(folder)
    split = int(len(ids) * 0.9)
    for name, part in (("train.bin", ids[:split]), ("val.bin", ids[split:])):
        mm = np.memmap(os.path.join(folder, name), dtype=np.uint16, mode="w+", shape=part.shape)
        mm[:] = part
        mm.flush()
    meta = {"vocab_size": len(chars), "itos": dict(enumerate(chars)), "stoi": stoi}
    with open(os.path.join(folder, "meta.pkl"), "wb") as f:
        pickle.dump(meta, f)
    nano = os.path.join(VENDOR, "nanogpt")
    shutil.copy(os.path.join(nano, "configurator.py"), workdir)
    shutil.copytree(os.path.join(nano, "config"), os.path.join(workdir, "config"))


def word_lm_data(workdir: str) -> None:
    """train.txt / valid.txt / test.txt of sentences over a 40-word vocabulary."""
    words = [f"w{i}" for i in range(40)]
    folder = os.path.join(workdir, "corpus")
    os.makedirs(folder)
    for name, n, seed in (("train.txt", 4400, 1), ("valid.txt", 800, 2), ("test.txt", 800, 3)):
        tokens = _markov_text(n, words, seed)
        lines = [" ".join(tokens[i : i + 11]) for i in range(0, n, 11)]
        with open(os.path.join(folder, name), "w", encoding="utf8") as f:
            f.write("\n".join(lines) + "\n")


def sine_data(workdir: str) -> None:
    """traindata.pt by generate_sine_wave.py's recipe, smaller: 8 waves of 60 points."""
    rng = np.random.RandomState(2)
    t, length, n = 20, 60, 8
    x = np.empty((n, length), "int64")
    x[:] = np.array(range(length)) + rng.randint(-4 * t, 4 * t, n).reshape(n, 1)
    torch.save(np.sin(x / 1.0 / t).astype("float64"), os.path.join(workdir, "traindata.pt"))


def no_data(workdir: str) -> None:
    return None


@dataclass(frozen=True)
class Case:
    """One reproducible run of a real script (or a driver around one)."""

    name: str
    script: str
    argv: tuple[str, ...]
    data: Callable[[str], None] = no_data
    env: tuple[tuple[str, str], ...] = ()


def nanogpt(name: str, *overrides: str, bug: str | None = None, iters: int = 80) -> Case:
    """nanoGPT's train.py with the stock shakespeare_char config, shrunk for a CPU."""
    argv = (
        "config/train_shakespeare_char.py",
        "--device=cpu",
        "--compile=False",
        "--dtype=float32",
        "--n_layer=2",
        "--n_head=2",
        "--n_embd=32",
        "--block_size=32",
        "--batch_size=4",
        f"--max_iters={iters}",
        f"--lr_decay_iters={iters}",
        "--warmup_iters=10",
        "--eval_interval=100000",
        "--eval_iters=2",
        "--log_interval=20",
        *overrides,
    )
    if bug is None:
        return Case(name, NANOGPT, argv, nanogpt_data)
    return Case(name, INJECT, (bug, NANOGPT, *argv), nanogpt_data)


def word_lm(name: str, *extra: str, bug: str | None = None) -> Case:
    argv = (
        "--data=corpus",
        "--emsize=16",
        "--nhid=16",
        "--epochs=6",
        "--save=model.pt",
        "--log-interval=1000",
        *extra,
    )
    if bug is None:
        return Case(name, WORD_LM, argv, word_lm_data)
    return Case(name, INJECT, (bug, WORD_LM, *argv), word_lm_data)


DCGAN_ARGV = (
    "--dataset=fake",
    "--workers=0",
    "--batchSize=8",
    "--nz=16",
    "--ngf=8",
    "--ndf=8",
    "--niter=1",
    "--manualSeed=1",
    "--outf=out",
)
DCGAN_ENV = (("GS_FAKE_SIZE", "160"),)
MNIST_ENV = (("GS_FAKE_MNIST_TRAIN", "640"), ("GS_FAKE_MNIST_TEST", "64"))

CASES = {
    c.name: c
    for c in (
        nanogpt("nanogpt"),
        nanogpt("nanogpt-accum", "--gradient_accumulation_steps=4", iters=30),
        nanogpt("nanogpt-lr100", "--learning_rate=0.1"),
        nanogpt("nanogpt-no-zero-grad", bug="nanogpt_no_zero_grad"),
        nanogpt("nanogpt-drop-param", bug="nanogpt_drop_param"),
        nanogpt("nanogpt-freeze-midway", bug="nanogpt_freeze_midway"),
        nanogpt("nanogpt-detach", bug="nanogpt_detach"),
        nanogpt("nanogpt-log0", bug="nanogpt_log0", iters=40),
        nanogpt("nanogpt-amp", "--dtype=float16", bug="nanogpt_cpu_scaler"),
        nanogpt("nanogpt-clip-scaled", "--dtype=float16", bug="nanogpt_clip_before_unscale"),
        Case("mingpt", MINGPT, ()),
        Case("mingpt-no-zero-grad", MINGPT, ("--bug=no_zero_grad",)),
        Case("dcgan", DCGAN, DCGAN_ARGV, env=DCGAN_ENV),
        Case(
            "dcgan-no-zero-grad-d",
            INJECT,
            ("dcgan_no_zero_grad_d", DCGAN, *DCGAN_ARGV),
            env=DCGAN_ENV,
        ),
        word_lm("word-lm"),
        word_lm("word-lm-adamw", "--use-optimizer", "--lr=0.003"),
        word_lm("word-lm-ascent", "--lr=-20"),
        word_lm("word-lm-skip-param", bug="wlm_skip_param"),
        Case(
            "sine-lbfgs",
            SINE,
            ("--steps=3",),
            sine_data,
            (("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", "1"),),
        ),
        Case(
            "vae",
            VAE,
            ("--epochs=2", "--batch-size=32", "--no-accel"),
            env=(("GS_FAKE_MNIST_TRAIN", "256"), ("GS_FAKE_MNIST_TEST", "64")),
        ),
        Case(
            "mnist",
            MNIST,
            ("--epochs=1", "--batch-size=32", "--test-batch-size=64", "--no-accel"),
            env=MNIST_ENV,
        ),
    )
}


# -- running ---------------------------------------------------------------------------------
@contextlib.contextmanager
def _isolated(case: Case) -> Iterator[None]:
    workdir = tempfile.mkdtemp(prefix=f"gs-real-{case.name}-")
    case.data(workdir)
    shadowed = _set_aside_shadowed_modules()
    modules = set(sys.modules)
    cwd, path, env = os.getcwd(), list(sys.path), {k: os.environ.get(k) for k, _ in case.env}
    threads, grad, dtype = (
        torch.get_num_threads(),
        torch.is_grad_enabled(),
        torch.get_default_dtype(),
    )
    benchmark = torch.backends.cudnn.benchmark  # dcgan sets it
    os.chdir(workdir)
    sys.path.insert(0, STAND_INS)
    os.environ.update(dict(case.env))
    torch.set_num_threads(1)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        os.chdir(cwd)
        sys.path[:] = path
        for k, v in env.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        torch.set_num_threads(threads)
        torch.set_grad_enabled(grad)
        torch.set_default_dtype(dtype)
        torch.backends.cudnn.benchmark = benchmark
        for name in set(sys.modules) - modules:
            file = getattr(sys.modules[name], "__file__", None) or ""
            if file.startswith(HERE):
                del sys.modules[name]
        sys.modules.update(shadowed)
        shutil.rmtree(workdir, ignore_errors=True)


def _set_aside_shadowed_modules() -> dict[str, object]:
    """Modules imported before the run under a name the vendored code imports from its own
    folder (`from model import GPTConfig`: another test's `model.py` may be cached as
    `model`): taken out of sys.modules for the run, as a fresh `python train.py` would
    not see them, and put back afterwards."""
    names = set()
    for folder, dirs, files in os.walk(HERE):
        if "__pycache__" in folder:
            continue
        names.update(f[:-3] for f in files if f.endswith(".py"))
        names.update(d for d in dirs if os.path.isfile(os.path.join(folder, d, "__init__.py")))
    out = {}
    for name in list(sys.modules):
        module = sys.modules[name]
        if name.partition(".")[0] in names:
            file = getattr(module, "__file__", None) or ""
            if not file.startswith(HERE):
                out[name] = sys.modules.pop(name)
    return out


def _run_main(script: str, argv: tuple[str, ...]) -> None:
    old_argv = sys.argv
    sys.argv = [script, *argv]
    sys.path.insert(0, os.path.dirname(script))
    try:
        runpy.run_path(script, run_name="__main__")
    except SystemExit as exc:
        if exc.code not in (0, None):
            raise
    finally:
        sys.argv = old_argv


@functools.cache
def plain(name: str) -> list[OracleStep]:
    """The true steps of the run, by the oracle, without gradscope."""
    case = CASES[name]
    with _isolated(case), Oracle() as oracle:
        _run_main(case.script, case.argv)
    return oracle.steps


@functools.cache
def watched(name: str):
    """The WatchReport of the same run under `gradscope.watcher.watch_script`."""
    from gradscope.watcher import watch_script

    case = CASES[name]
    with _isolated(case):
        return watch_script(case.script, list(case.argv))
