"""`gradscope check` runs each target in a process of its own: nothing a target changes in
its process (modules, sys.path, directory, environment, torch's global state, signal
handlers, patches of torch) reaches the next target, and a target that ends its process
fails alone, reported as what it did."""

from __future__ import annotations

import json
import time

import pytest

from gradscope.cli import app

NET = """
import torch
from torch import nn

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc = nn.Linear(4, 4)
        self.head = nn.Linear(4, 1)
    def forward(self, x):
        return self.head(self.enc(x){cut}).pow(2).mean()

def make():
    torch.manual_seed(0)
    return Net(), torch.randn(8, 4)
"""

MODEL = "from helpers import make\n\ndef build():\n    return make()\n"

LEAKY = """
import os, signal, sys, types
import torch
import torch.nn.functional as F
from gradscope.examples.models import healthy_mlp

def on_term(signum, frame):
    pass

def build():
    sys.path.insert(0, "/leaked")
    sys.modules["leaked_module"] = types.ModuleType("leaked_module")
    os.environ["GS_LEAKED"] = "1"
    torch.set_default_dtype(torch.float64)
    torch.use_deterministic_algorithms(True)
    torch.manual_seed(1234)
    signal.signal(signal.SIGTERM, on_term)
    relu = F.relu
    F.relu = lambda *a, **k: relu(*a, **k)
    F.relu.leaked = True
    model = healthy_mlp()
    torch.set_grad_enabled(False)
    return model
"""

PROBE = """
import os, signal, sys
import torch
import torch.nn.functional as F
from gradscope.examples.models import healthy_mlp

def build():
    leaks = {
        "sys.path": "/leaked" in sys.path,
        "sys.modules": "leaked_module" in sys.modules,
        "os.environ": "GS_LEAKED" in os.environ,
        "default dtype": torch.get_default_dtype() != torch.float32,
        "deterministic": torch.are_deterministic_algorithms_enabled(),
        "seed": torch.initial_seed() == 1234,
        "SIGTERM handler": getattr(signal.getsignal(signal.SIGTERM), "__name__", "") == "on_term",
        "torch patch": getattr(F.relu, "leaked", False),
        "grad mode": not torch.is_grad_enabled(),
        "cwd": not os.path.exists("probe.py"),
    }
    leaked = [name for name, yes in leaks.items() if yes]
    if leaked:
        raise AssertionError("leaked: " + ", ".join(leaked))
    return healthy_mlp()
"""


@pytest.fixture
def project(tmp_path, monkeypatch):
    for folder, cut in (("a", ""), ("b", ".detach()")):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "helpers.py").write_text(NET.format(cut=cut))
        (tmp_path / folder / "model.py").write_text(MODEL)
    (tmp_path / "leaky.py").write_text(LEAKY)
    (tmp_path / "probe.py").write_text(PROBE)
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "chdir.py").write_text(
        "import os\nfrom gradscope.examples.models import healthy_mlp\n"
        "def build():\n    os.chdir('elsewhere')\n    return healthy_mlp()\n"
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)
    return tmp_path


def check_json(runner, project, *targets: str) -> tuple[int, list[dict]]:
    (project / "gs.toml").write_text("".join(f"[[inspect]]\ntarget = {t!r}\n" for t in targets))
    result = runner.invoke(
        app, ["check", "--config", "gs.toml", "-f", "json"], catch_exceptions=False
    )
    return result.exit_code, json.loads(result.stdout)["results"]


def _states(results: list[dict]) -> list[str]:
    return ["error" if r["error"] else "pass" if r["passed"] else "fail" for r in results]


def test_each_target_imports_its_own_helpers(runner, project):
    """Two targets in two folders each `from helpers import make`: the detached one is
    built from its own helpers.py, in either order."""
    for order in (["a", "b", "a"], ["b", "a", "b"]):
        code, results = check_json(runner, project, *(f"{x}/model.py:build" for x in order))
        assert code == 1
        assert _states(results) == ["pass" if x == "a" else "fail" for x in order]
        for r in results:
            if r["target"].startswith("b/"):
                assert {(f["rule"], f["subject"]) for f in r["findings"]} == {
                    ("GS101", "enc.weight"),
                    ("GS101", "enc.bias"),
                }
                assert "b/helpers.py:11" in r["findings"][0]["evidence"][0]


def test_nothing_a_target_changes_in_its_process_reaches_the_next(runner, project):
    _, results = check_json(
        runner, project, "leaky.py:build", "probe.py:build", "chdir.py:build", "probe.py:build"
    )
    assert [r["error"] for r in results[1::2]] == [None, None]
    assert _states(results)[1::2] == ["pass", "pass"]


def test_a_target_that_changed_directory_leaves_the_next_its_relative_path(runner, project):
    code, results = check_json(runner, project, "chdir.py:build", "a/model.py:build")
    assert code == 0 and _states(results) == ["pass", "pass"]


ENDS = {
    "exits": "    time.sleep(0.05)\n    os._exit(3)\n",
    "kills": "    time.sleep(0.05)\n    os.kill(os.getpid(), signal.SIGKILL)\n",
    "crashes": "    time.sleep(0.05)\n    ctypes.string_at(0)\n",
    # a child that outlives it keeps the result pipe open: the check must not wait for it
    "forks": "    if os.fork() == 0:\n        time.sleep(15)\n        os._exit(0)\n"
    "    os._exit(4)\n",
    # a thread it leaves running must not hold the check either
    "lingers": "    threading.Thread(target=time.sleep, args=(30,)).start()\n"
    "    from gradscope.examples.models import healthy_mlp\n    return healthy_mlp()\n",
}


def test_a_target_that_ends_its_process_is_reported_as_what_it_did(runner, project):
    for name, body in ENDS.items():
        (project / f"{name}.py").write_text(
            "import ctypes, os, signal, threading, time\ndef build():\n" + body
        )
    start = time.monotonic()
    code, results = check_json(
        runner,
        project,
        *(f"{name}.py:build" for name in ENDS),
        "a/model.py:build",
    )
    assert time.monotonic() - start < 12  # neither the forked child nor the thread waited for
    assert code == 2
    exits, kills, crashes, forks, lingers, after = results
    assert "ended gradscope's worker process (exit code 3)" in exits["error"]
    assert "os._exit()" in exits["error"]
    assert "(killed by SIGKILL, signal 9)" in kills["error"]
    assert "(killed by SIGSEGV, signal 11)" in crashes["error"]
    assert "a crash in native code" in crashes["error"]
    assert "(exit code 4)" in forks["error"]
    for r in (exits, kills, crashes):  # the time it ran, not "<1 ms"
        assert r["duration_s"] >= 0.05, r
        assert "ms into its run" in r["error"]
    assert lingers["error"] is None and lingers["passed"]
    assert after["error"] is None and after["passed"]  # a fresh worker, as before


def _gradscope_fails(*args: object) -> None:
    raise RuntimeError("a bug in gradscope")


def test_gradscope_s_own_failure_in_a_worker_is_its_own_not_the_target_s():
    """An exception that escapes the runner is gradscope's (the runners wrap the user's
    errors): raised in the parent as an internal error (exit 3), never a dead target."""
    from gradscope.gate import workers

    with pytest.raises(workers.WorkerFailed, match="RuntimeError: a bug in gradscope"):
        workers.run_one(workers.context(), _gradscope_fails, (), {})
