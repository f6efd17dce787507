"""Messages that say what is true and what to write: a file that is not Python, a folder,
and a model file that defines a class but no gradscope_target()."""

from __future__ import annotations

import pytest

from gradscope.cli import app
from gradscope.inspector.model_file import model_classes

MODEL = """
import torch
from torch import nn

class Block(nn.Module):
    def __init__(self, n=32):
        super().__init__()
        self.fc = nn.Linear(n, n)
    def forward(self, x):
        return torch.relu(self.fc(x))

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.inp = nn.Linear(16, 32)
        self.block = Block()
        self.out = nn.Linear(32, 4)
    def forward(self, x):
        return self.out(self.block(self.inp(x)))

def build():
    return Net()     # the model alone: no batch

if __name__ == "__main__":
    print(Net()(torch.randn(2, 16)))
"""

CONV = """
from torch import nn
class ConvNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3)
        self.pool = nn.AdaptiveAvgPool2d(1)
    def forward(self, x):
        return self.pool(self.conv(x)).flatten(1)
"""

EMBED = """
from torch import nn
class Tagger(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(100, 8)
        self.head = nn.Linear(8, 3)
    def forward(self, ids):
        return self.head(self.emb(ids))
"""

NEEDS_ARGS = """
from torch import nn
class Classifier(nn.Module):
    def __init__(self, classes):
        super().__init__()
        self.fc = nn.Linear(10, classes)
    def forward(self, x):
        return self.fc(x)
"""

LM = """
from torch import nn
class TinyLM(nn.Module):
    def __init__(self, vocab_size, dim, layers=2):
        super().__init__()
        self.tok = nn.Embedding(vocab_size, dim)
        self.head = nn.Linear(dim, vocab_size)
    def forward(self, ids):
        return self.head(self.tok(ids))
"""

STEM = """
from torch import nn
class Stem(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.body = nn.Sequential(nn.Conv2d(channels, 8, 3), nn.ReLU())
class Net(nn.Module):
    def __init__(self, width, *, classes, **extra):
        super().__init__()
        self.stem = Stem(width)
        self.fc = nn.Linear(8, classes)
"""

RNN = """
from torch import nn
class Tagger(nn.Module):
    def __init__(self, tags):
        super().__init__()
        self.rnn = nn.GRU(input_size=12, hidden_size=16, batch_first=True)
        self.out = nn.Linear(16, tags)
"""

WRONG_SHAPE = """
from torch import nn
class Flat(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3)
        self.fc = nn.Linear(8 * 10 * 10, 2)
    def forward(self, x):
        return self.fc(self.conv(x).flatten(1))
"""

SCRIPT = """
import torch
from torch import nn
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 1)
    def forward(self, x):
        return self.fc(x)
model = Net()
model(torch.randn(2, 4)).sum().backward()
"""


@pytest.fixture
def project(tmp_path, monkeypatch):
    files = {"model.py": MODEL, "conv.py": CONV, "embed.py": EMBED, "args.py": NEEDS_ARGS}
    files |= {"flat.py": WRONG_SHAPE, "train.py": SCRIPT, "notes.txt": "to do\n"}
    files |= {"lm.py": LM, "stem.py": STEM, "rnn.py": RNN}
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    (tmp_path / "adir").mkdir()
    (tmp_path / "proj").mkdir()
    (tmp_path / "proj" / "pyproject.toml").write_text("[tool.gradscope]\n")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def inspect(runner, *args):
    return runner.invoke(app, ["inspect", *args])


@pytest.mark.parametrize(
    "target, message",
    [
        ("notes.txt", "notes.txt is not a Python file: name a .py file that defines"),
        ("adir", "adir is a folder, not a Python file: name a .py file in it"),
        ("adir/", "adir/ is a folder, not a Python file"),
        ("proj", "proj is a folder, not a Python file: name a .py file in it; to check the "),
    ],
)
def test_a_file_or_folder_that_is_not_python_says_so(runner, project, target, message):
    result = inspect(runner, target)
    assert result.exit_code == 2 and result.stdout == ""
    assert message in result.stderr and len(result.stderr.splitlines()) == 1
    assert "no module named" not in result.stderr and "no such file" not in result.stderr


def test_a_folder_with_a_pyproject_suggests_check(runner, project):
    assert "run `gradscope check` in proj" in inspect(runner, "proj").stderr
    assert "gradscope check" not in inspect(runner, "adir").stderr


def test_watch_on_a_folder_says_so(runner, project):
    result = runner.invoke(app, ["watch", "adir"])
    assert result.exit_code == 2
    assert "adir is a folder, not a training script" in result.stderr


@pytest.mark.parametrize(
    "target, built",
    [
        ("model.py", "inspecting Net() on torch.randn(2, 16), a batch built from its first "
         "layer Linear(in_features=16)"),
        ("model.py:Net", "model.py:Net is a class: inspecting Net() on torch.randn(2, 16)"),
        ("conv.py", "on torch.randn(2, 3, 32, 32), a batch built from its first layer "
         "Conv2d(in_channels=3)"),
        ("embed.py", "on torch.randint(0, 100, (2, 8)), a batch built from its first layer "
         "Embedding(100, 8)"),
    ],
)  # fmt: skip
def test_a_model_file_gets_a_batch_built_and_says_which(runner, project, target, built):
    result = inspect(runner, target)
    assert result.exit_code == 0, result.output
    assert built in result.stderr
    assert "define gradscope_target() to choose the batch and the loss" in result.stderr
    assert "finished without calling backward" not in result.stderr
    assert "returned Net" not in result.stderr


def test_model_file_picks_the_whole_model_not_a_block(runner, project):
    result = inspect(runner, "model.py")
    assert "gradscope inspect · model.py:Net" in result.stdout


@pytest.mark.parametrize(
    "target, why, snippet",
    [
        ("args.py", "Classifier() cannot be inspected as it is: needs arguments",
         "        model = Classifier(classes=...)  # fill in its arguments\n"
         "        return model, torch.randn(2, 10)  # a batch as Classifier.forward takes it"),
        ("lm.py", "TinyLM() cannot be inspected as it is: needs arguments",
         "        model = TinyLM(vocab_size=..., dim=...)  # fill in its arguments\n"
         "        return model, torch.randint(0, model.tok.num_embeddings, (2, 8))  # token ids"),
        ("stem.py", "Net() cannot be inspected as it is: needs arguments",
         "        model = Net(width=..., classes=...)  # fill in its arguments\n"
         "        return model, torch.randn(2, model.stem.body[0].in_channels, 32, 32)  # a batch"),
        ("rnn.py", "Tagger() cannot be inspected as it is: needs arguments",
         "        return model, torch.randn(2, 8, 12)  # a sequence as Tagger.forward takes it"),
        ("flat.py", "its forward failed on torch.randn(2, 3, 32, 32), a batch built from "
         "Conv2d(in_channels=3): RuntimeError: mat1 and mat2",
         "        return model, torch.randn(2, 3, 32, 32)  # a batch as Flat.forward takes it"),
    ],
)  # fmt: skip
def test_a_class_that_cannot_be_built_says_what_to_write(runner, project, target, why, snippet):
    result = inspect(runner, target)
    assert result.exit_code == 2 and result.stdout == ""
    assert why in result.stderr
    assert "    import torch\n\n    def gradscope_target():\n" in result.stderr
    assert snippet in result.stderr


def test_a_factory_that_returns_the_model_alone_says_what_to_return(runner, project):
    result = inspect(runner, "model.py:build")
    assert result.exit_code == 2
    assert "model.py:build gave the model Net but no batch: return (model, batch)" in (
        result.stderr
    )


def test_a_training_script_with_a_module_class_stays_a_script(project):
    assert model_classes("train.py") == []
    imported = "from torch import nn\nfrom loop import main\nclass Net(nn.Module):\n    pass\n"
    (project / "entry.py").write_text(imported + "if __name__ == '__main__':\n    main()\n")
    assert model_classes("entry.py") == []  # its loop lives elsewhere: still a script
    assert model_classes("model.py") == ["Block", "Net"]
    assert model_classes("notes.txt") == []


@pytest.mark.parametrize(
    "target, said, close",
    [
        ("detached-midle", "is not a .py file, a module or a built-in example", "detached-middle"),
        ("Nan-Loss", "is not a .py file, a module or a built-in example", "nan-loss"),
        ("detached_middle", "no module named 'detached_middle'", "detached-middle"),
        ("conv.pyy", "conv.pyy: no such file (nor a module of that name)", "conv.py"),
        ("modle.py", "modle.py: no such file", "model.py"),
        ("model.py:buld", "model.py has no attribute `buld`", "build"),
    ],
)  # fmt: skip
def test_a_misspelt_target_gets_the_close_match(runner, project, target, said, close):
    result = inspect(runner, target)
    assert result.exit_code == 2 and len(result.stderr.splitlines()) == 1
    assert said in result.stderr and result.stderr.rstrip().endswith(f"; did you mean {close}?")


@pytest.mark.parametrize("target", ["sub/missing.py", "mypkg.model", "zzzz-qqqq"])
def test_nothing_close_suggests_nothing(runner, project, target):
    result = inspect(runner, target)
    assert result.exit_code == 2 and "did you mean" not in result.stderr
    if target == "mypkg.model":
        assert "no module named 'mypkg.model'" in result.stderr


@pytest.mark.parametrize(
    "args, close",
    [
        (["rules", "GS1O4"], "GS104"),
        (["rules", "explodng"], "exploding"),
        (["watch", "train.py", "-t", "spike-sigm=3"], "spike-sigma"),
        (["inspect", "train.py", "--script", "--step", "first-nonfinte"], "first-nonfinite"),
    ],
)
def test_closed_sets_suggest_the_close_name(runner, project, args, close):
    result = runner.invoke(app, args)
    assert result.exit_code == 2
    assert result.stderr.rstrip().endswith(f"did you mean {close}?"), result.stderr


def test_close_match_is_for_near_names_only():
    from gradscope.suggest import close_match, did_you_mean

    assert close_match("detached-midle", ["detached-middle", "nan-loss"]) == "detached-middle"
    assert close_match("NAN-LOSS", ["nan-loss"]) == "nan-loss"
    assert close_match("transformer", ["nan-loss", "healthy-mlp"]) is None
    assert did_you_mean("zz", ["GS104"]) == ""
