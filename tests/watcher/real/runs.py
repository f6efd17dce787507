"""The real scripts as the tests run them: tiny configs, synthetic data written to a fresh
temporary folder (the run's working directory), and each run made once per session.

`plain(case)` runs the script without gradscope, inside the independent `Oracle`;
`watched(case)` runs the same seeded script under `watch_script`. Both run in this
process, on one thread, in the same isolation: working directory, sys.argv, sys.path
(the torchvision stand-in first), environment, and the modules the run imported from
this folder are all put back afterwards, so two scripts' `model` modules never meet.
"""

from __future__ import annotations

import atexit
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
GAT = os.path.join(EXAMPLES, "gat", "main.py")
MAKEMORE = os.path.join(VENDOR, "makemore", "makemore.py")
MINGPT_PKG = os.path.join(VENDOR, "mingpt")
ADDER = os.path.join(MINGPT_PKG, "projects", "adder", "adder.py")
MINGPT = os.path.join(DRIVERS, "mingpt_sort.py")
MLP = os.path.join(DRIVERS, "mlp.py")
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


def names_data(workdir: str) -> None:
    """makemore's names.txt: 2000 lowercase words of 3-9 letters from a letter Markov
    chain, every letter a first letter somewhere (a 27-token vocabulary, as with names)."""
    rng = np.random.default_rng(4)
    letters = "abcdefghijklmnopqrstuvwxyz"
    table = rng.dirichlet(np.full(26, 0.2), size=26)
    words = []
    for i in range(2000):
        state = i % 26
        word = [letters[state]]
        for _ in range(int(rng.integers(2, 9))):
            state = int(rng.choice(26, p=table[state]))
            word.append(letters[state])
        words.append("".join(word))
    with open(os.path.join(workdir, "names.txt"), "w", encoding="utf8") as f:
        f.write("\n".join(words) + "\n")


def cora_data(workdir: str, nodes: int = 1650, features: int = 48, classes: int = 7) -> None:
    """cora/cora.content and cora/cora.cites in Cora's format (paper id, binary features,
    class name; citing pairs), Cora-like: a class-dependent bag of words and 4 of 5
    citations within the class. gat/main.py splits 1200 test / 400 val / the rest train,
    and its attention is dense (nodes x nodes): the graph is kept just above 1600 nodes."""
    rng = np.random.default_rng(5)
    labels = rng.integers(classes, size=nodes)
    proto = 0.02 + 0.25 * (rng.random((classes, features)) < 0.2)
    bits = (rng.random((nodes, features)) < proto[labels]).astype(int)
    ids = 1000 + 7 * np.arange(nodes)
    folder = os.path.join(workdir, "cora")
    os.makedirs(folder)
    with open(os.path.join(folder, "cora.content"), "w", encoding="utf8") as f:
        for i in range(nodes):
            row = "\t".join(str(b) for b in bits[i])
            f.write(f"{ids[i]}\t{row}\tClass_{labels[i]}\n")
    src = np.repeat(np.arange(nodes), 2)
    order, counts = np.argsort(labels, kind="stable"), np.bincount(labels, minlength=classes)
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    mate = order[starts[labels[src]] + rng.integers(0, counts[labels[src]])]
    dst = np.where(rng.random(len(src)) < 0.8, mate, rng.integers(0, nodes, len(src)))
    with open(os.path.join(folder, "cora.cites"), "w", encoding="utf8") as f:
        f.writelines(f"{ids[d]}\t{ids[s]}\n" for s, d in zip(src, dst, strict=True))


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
    paths: tuple[str, ...] = ()
    """Folders put first on sys.path for the run (minGPT's projects import `mingpt`)."""


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
        "--epochs=4",
        "--save=model.pt",
        "--log-interval=1000",
        *extra,
    )
    if bug is None:
        return Case(name, WORD_LM, argv, word_lm_data)
    return Case(name, INJECT, (bug, WORD_LM, *argv), word_lm_data)


def _maybe_injected(name: str, script: str, argv: tuple[str, ...], bug: str | None, **kw) -> Case:
    if bug is None:
        return Case(name, script, argv, **kw)
    return Case(name, INJECT, (bug, script, *argv), **kw)


def makemore(name: str, *extra: str, bug: str | None = None, steps: int = 60) -> Case:
    """makemore.py's default transformer, shrunk (2 layers of 32), on synthetic names."""
    argv = (
        "--input-file=names.txt",
        "--work-dir=out",
        "--num-workers=0",
        f"--max-steps={steps}",
        "--n-layer=2",
        "--n-head=2",
        "--n-embd=32",
        "--n-embd2=32",
        *extra,
    )
    return _maybe_injected(name, MAKEMORE, argv, bug, data=names_data)


def gat(name: str, *extra: str, bug: str | None = None) -> Case:
    """gat/main.py (Adam, NLLLoss, dropout 0.6) on a synthetic Cora-like graph, 1 head of 8."""
    argv = ("--epochs=4", "--hidden-dim=8", "--num-heads=1", "--val-every=4", "--no-accel")
    return _maybe_injected(name, GAT, (*argv, *extra), bug, data=cora_data)


def adder(name: str, *extra: str, bug: str | None = None, ndigit: int = 1, iters: int = 60) -> Case:
    """minGPT's projects/adder as shipped (gpt-nano, AdamW, clip 1.0). The bugs run on 1-digit
    sums: the 2-digit default scores 10,000 sums by generation at iteration 0 (seconds)."""
    argv = (
        f"--data.ndigit={ndigit}",
        f"--trainer.max_iters={iters}",
        "--trainer.num_workers=0",
        "--system.work_dir=out",
        *extra,
    )
    return _maybe_injected(name, ADDER, argv, bug, paths=(MINGPT_PKG,))


def mlp(name: str, *extra: str, bug: str | None = None) -> Case:
    return _maybe_injected(name, MLP, extra, bug)


def mingpt(name: str, *extra: str, bug: str | None = None) -> Case:
    """The minGPT sort driver, 30 iterations (the stock `mingpt` case runs 60)."""
    return _maybe_injected(name, MINGPT, ("--max-iters=30", *extra), bug)


WORD_LM_TRANSFORMER = ("--model=Transformer", "--use-optimizer", "--lr=0.003", "--epochs=1")
VAE_ARGV = ("--epochs=2", "--batch-size=32", "--no-accel")
VAE_ENV = (("GS_FAKE_MNIST_TRAIN", "256"), ("GS_FAKE_MNIST_TEST", "64"))


def vae(name: str, bug: str | None = None) -> Case:
    return _maybe_injected(name, VAE, VAE_ARGV, bug, env=VAE_ENV)


FROZEN = {
    "nanogpt": "transformer.h.0",
    "makemore": "transformer.h.0",
    "mingpt": "transformer.h.0",
    "vae": "fc1",
}
"""The layer each project's frozen-in-optimizer case freezes after building the optimizer."""

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
        nanogpt("nanogpt-no-zero-grad", bug="nanogpt_no_zero_grad", iters=40),
        nanogpt("nanogpt-drop-param", bug="nanogpt_drop_param", iters=40),
        nanogpt("nanogpt-freeze-midway", bug="nanogpt_freeze_midway"),
        nanogpt("nanogpt-detach", bug="nanogpt_detach"),
        nanogpt("nanogpt-unshifted", bug="nanogpt_unshifted", iters=30),
        nanogpt("nanogpt-unmasked", bug="nanogpt_unmasked", iters=30),
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
        word_lm("word-lm-transformer", *WORD_LM_TRANSFORMER),
        word_lm("word-lm-unmasked", *WORD_LM_TRANSFORMER, bug="wlm_unmasked"),
        Case(
            "sine-lbfgs",
            SINE,
            ("--steps=3",),
            sine_data,
            (("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", "1"),),
        ),
        vae("vae"),
        Case(
            "mnist",
            MNIST,
            ("--epochs=1", "--batch-size=32", "--test-batch-size=64", "--no-accel"),
            env=MNIST_ENV,
        ),
        # issue 26: what the numbers mean (matrix.py lists them by project and bug class)
        nanogpt("nanogpt-loss-negated", bug="loss_negated", iters=40),
        nanogpt("nanogpt-decay100", "--weight_decay=100.0", iters=40),
        nanogpt("nanogpt-frozen", bug=f"freeze_in_optimizer={FROZEN['nanogpt']}", iters=40),
        nanogpt("nanogpt-zero-grad-before-step", bug="zero_grad_before_step", iters=40),
        makemore("makemore"),
        makemore("makemore-loss-negated", bug="loss_negated", steps=20),
        makemore("makemore-decay100", "--weight-decay=100", steps=20),
        makemore("makemore-frozen", bug=f"freeze_in_optimizer={FROZEN['makemore']}", steps=20),
        makemore("makemore-zero-grad-before-step", bug="zero_grad_before_step", steps=20),
        makemore("makemore-no-zero-grad", bug="no_zero_grad", steps=20),
        mingpt("mingpt-lr100", "--lr=0.05"),
        mingpt("mingpt-loss-negated", bug="loss_negated"),
        mingpt("mingpt-frozen", bug=f"freeze_in_optimizer={FROZEN['mingpt']}"),
        mingpt("mingpt-zero-grad-before-step", bug="zero_grad_before_step"),
        adder("adder", ndigit=2, iters=240),  # two norm spikes (steps 223, 226) clip absorbs
        adder("adder-1digit"),
        adder("adder-lr100", "--trainer.learning_rate=0.05", iters=20),
        adder("adder-decay100", "--trainer.weight_decay=100", iters=20),
        gat("gat"),
        gat("gat-lr100", "--lr=0.5"),
        gat("gat-loss-negated", bug="loss_negated"),
        vae("vae-lr100", bug="lr_x100"),
        vae("vae-loss-negated", bug="loss_negated"),
        vae("vae-frozen", bug=f"freeze_in_optimizer={FROZEN['vae']}"),
        vae("vae-zero-grad-before-step", bug="zero_grad_before_step"),
        vae("vae-no-zero-grad", bug="no_zero_grad"),
        word_lm("word-lm-loss-negated", bug="loss_negated"),
        word_lm("word-lm-no-zero-grad", bug="no_zero_grad"),
        mlp("mlp-adam"),
        mlp("mlp-sgd", "--optimizer=sgd"),
        mlp("mlp-adam-loss-negated", bug="loss_negated"),
        mlp("mlp-adam-zero-grad-before-step", bug="zero_grad_before_step"),
        mlp("mlp-adam-no-zero-grad", bug="no_zero_grad"),
        mlp("mlp-sgd-no-zero-grad", "--optimizer=sgd", bug="no_zero_grad"),
        # issue 40: the model's state (test_real_state.py)
        nanogpt("nanogpt-eval-left", bug="train_ignored", iters=20),
        nanogpt("nanogpt-adam-eps", bug="adam_eps=0.1", iters=20),
        mlp("mlp-adam-eps", "--steps=20", bug="adam_eps=0.1"),
        vae("vae-adam-eps", bug="adam_eps=0.001"),
        word_lm("word-lm-eval-left", bug="train_ignored"),
        Case(
            "mnist-one-batch",
            INJECT,
            ("loader_one_batch", MNIST, "--epochs=1", "--batch-size=32", "--no-accel"),
            env=MNIST_ENV,
        ),
    )
}


# -- running ---------------------------------------------------------------------------------
@functools.cache
def _written(data: Callable[[str], None]) -> str:
    """A folder holding what `data` writes, written once per process (nanoGPT's Markov text
    alone costs ~0.13 s of CPU, and some twenty runs read it): each run gets a copy."""
    folder = tempfile.mkdtemp(prefix=f"gs-real-data-{data.__name__}-")
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    data(folder)
    return folder


@contextlib.contextmanager
def _isolated(case: Case) -> Iterator[None]:
    workdir = tempfile.mkdtemp(prefix=f"gs-real-{case.name}-")
    shutil.copytree(_written(case.data), workdir, dirs_exist_ok=True)
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
    sys.path[:0] = [STAND_INS, *case.paths]
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
