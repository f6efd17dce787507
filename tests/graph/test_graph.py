"""`gradscope graph`: the DOT text names and colours parameters, big graphs collapse by
module, and no failure (no `dot`, a crashing `dot`, a bad --out) leaves a file behind."""

from __future__ import annotations

import os
import re
import shutil
import stat
import struct
import subprocess
import sys
import textwrap

import pytest
import torch
import typer
from typer.testing import CliRunner

from gradscope import graph
from gradscope.api import inspect_target
from gradscope.api.graphing import probe_statuses
from gradscope.cli.graph_cmd import graph as graph_command
from gradscope.errors import GradscopeError
from gradscope.examples.transformer import GPTConfig, make_gpt
from gradscope.graph import compat as graph_compat
from gradscope.graph import style as graph_style
from gradscope.inspector import targets

NODE = re.compile(r'^\t+(\w+) \[label="(.*?)" fillcolor="?([^"\s\]]+)"?', re.S | re.M)
EDGE = re.compile(r"^\t+(\w+) -> (\w+)", re.M)
needs_dot = pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz `dot` not on PATH")


@pytest.fixture
def cli():
    app = typer.Typer()
    app.command("graph")(graph_command)

    @app.callback()
    def root() -> None:
        """Make `graph` a subcommand, as in gradscope.cli."""

    def invoke(*args: str):
        return CliRunner().invoke(app, ["graph", *args])

    return invoke


def nodes(source: str) -> dict[str, tuple[str, str]]:
    """node id → (label, fill colour), read back from the DOT text."""
    return {m[1]: (m[2], m[3]) for m in NODE.finditer(source)}


def drawing_of(spec: str, **options) -> graph.Drawing:
    t = targets.load(spec)
    statuses = probe_statuses(t.model, t.batch, t.loss_fn)
    return graph.graph_of(
        t.model,
        t.batch,
        t.loss_fn,
        statuses=statuses,
        options=graph.DrawOptions(**options),
        label=spec,
    )


def write_target(folder, body: str, marker: str | None = None) -> str:
    """A target file; its factory touches `marker`, to tell whether model code ran."""
    touch = f"open({marker!r}, 'w').close()" if marker else "pass"
    path = folder / "target.py"
    path.write_text(f"def gradscope_target():\n    {touch}\n" + textwrap.indent(body, "    "))
    return str(path)


GPT12 = (
    "from gradscope.examples.transformer import GPTConfig, make_gpt\n"
    "return make_gpt(GPTConfig(layers=12))\n"
)
MLP = "from gradscope.examples.models import healthy_mlp\nreturn healthy_mlp()\n"


# --- the picture -------------------------------------------------------------------------


@needs_dot
def test_png_is_a_real_picture(cli, tmp_path):
    out = tmp_path / "graph.png"
    result = cli("unused-submodule", "--out", str(out))
    assert result.exit_code == 0, result.stderr
    data = out.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", data[16:24])
    assert len(data) > 10_000 and width > 200 and height > 200
    assert os.listdir(tmp_path) == ["graph.png"]  # no temporary file left beside it


@pytest.mark.parametrize(
    "spec, status",
    [
        ("nan-loss", "non-finite"),
        ("exploding-deep", "exploding"),
        ("vanishing-sigmoid", "vanishing"),
    ],
)
def test_dot_names_parameters_and_colours_them_by_probe_status(spec, status):
    report = inspect_target(spec, explain=False)
    expected = {p.name: report.status(p) for p in report.stats.params}
    assert status in expected.values()
    drawn = {
        label.split("\n")[0]: colour
        for label, colour in nodes(drawing_of(spec, collapse="none").source).values()
    }
    for name, want in expected.items():
        assert drawn[name] == graph_style.STATUS[want].colour, name
    assert graph_style.STATUS[status].colour != graph_style.STATUS["ok"].colour


def test_cli_writes_dot_to_stdout_with_names_and_status_words(cli):
    result = cli("nan-loss", "--format", "dot")
    assert result.exit_code == 0, result.stderr
    labels = [label for label, _ in nodes(result.stdout).values()]
    assert any(label.startswith("fc.weight\n(8, 20)\nnon-finite") for label in labels)
    assert "gradscope: graph:" in result.stderr


def test_parameters_without_grad_are_listed_in_the_legend_not_drawn():
    d = drawing_of("detached-middle", collapse="none")
    report = inspect_target("detached-middle", explain=False)
    none = [p.name for p in report.stats.params if report.status(p) == "none"]
    assert none and [a.split(" ")[0] for a in d.absent] == none
    legend = d.source[d.source.index("legend [") :]
    drawn = [label.split("\n")[0] for label, _ in nodes(d.source).values()]
    for name in none:
        assert name in legend and name not in drawn


def test_frozen_parameters_are_listed_too():
    d = drawing_of("frozen-layers", collapse="none")
    model = targets.load("frozen-layers").model
    frozen = [n for n, p in model.named_parameters() if not p.requires_grad]
    legend = d.source[d.source.index("legend [") :]
    assert frozen and "frozen" in legend and all(n in legend for n in frozen)


def test_show_saved_and_show_attrs_expose_torchvizs_views():
    plain = drawing_of("unused-submodule", collapse="none").source
    saved = drawing_of("unused-submodule", collapse="none", show_saved=True).source
    attrs = drawing_of("unused-submodule", collapse="none", show_attrs=True).source
    colour = graph_style.SAVED.colour
    assert colour not in plain and "[saved tensor]" not in plain
    assert sum(c == colour for _, c in nodes(saved).values()) >= 3
    assert "[saved tensor]" in attrs and "mat1_sym_sizes" in attrs
    collapsed = drawing_of("unused-submodule", collapse="modules", show_saved=True).source
    assert "saved: " in collapsed


def test_custom_function_saved_tensors_are_always_drawn():
    class Square(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return 2 * x * g

    x = torch.ones(3, requires_grad=True)
    source = graph.draw(Square.apply(x).sum(), options=graph.DrawOptions(collapse="none")).source
    assert graph_style.SAVED.colour in source and "SquareBackward" in source


def test_deep_graph_is_walked_without_recursion():
    x = torch.ones(2, requires_grad=True)
    y = x
    for _ in range(3 * sys.getrecursionlimit()):
        y = y * 1.0
    d = graph.draw(y.sum(), options=graph.DrawOptions(collapse="none"))
    assert d.full_nodes > 3 * sys.getrecursionlimit()
    assert d.source.count("MulBackward0") == 3 * sys.getrecursionlimit()


# --- collapsing --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def gpt12():
    model, batch = make_gpt(GPTConfig(layers=12))
    return model, batch, graph.graph_of(model, batch)


@pytest.mark.slow
def test_collapsed_at_full_depth_is_about_one_node_per_module(gpt12):
    model, batch, _ = gpt12
    d = graph.graph_of(model, batch, options=graph.DrawOptions(collapse="modules", depth=10))
    modules = [n for n, _ in model.named_modules()]
    drawn = {i: label for i, (label, _) in nodes(d.source).items() if i.startswith("m")}
    assert d.collapsed and d.full_nodes > graph.COLLAPSE_ABOVE
    assert 0.8 * len(modules) <= len(drawn) <= 1.2 * len(modules)
    for name, m in model.named_modules():
        if isinstance(m, torch.nn.Linear) and name != "lm_head":
            assert sum(label.split("\n")[0] == name for label in drawn.values()) == 1, name


@pytest.mark.slow
def test_big_graph_collapses_to_a_depth_that_stays_readable(gpt12):
    d = gpt12[2]
    labels = [label.split("\n")[0] for i, (label, _) in nodes(d.source).items() if i[0] == "m"]
    assert d.collapsed and len(labels) <= 60
    assert [f"blocks.{i}" for i in range(12)] == [n for n in labels if n.startswith("blocks.")]
    assert '12 parameters (49,984 elements)"' in d.source  # not probed: no health claimed
    assert any("2 levels deep" in n and "--collapse none" in n for n in d.notes)


def test_depth_alone_collapses():
    small, small_batch = make_gpt(GPTConfig(layers=2))
    d = graph.graph_of(small, small_batch, options=graph.DrawOptions(depth=1))
    assert d.collapsed and not d.notes


@pytest.mark.skipif(shutil.which("dot") is None, reason="needs Graphviz's dot")
@pytest.mark.slow
def test_the_big_picture_has_a_screen_friendly_shape(gpt12):
    import struct

    png = graph.render(gpt12[2], "png")
    width, height = struct.unpack(">II", png[16:24])
    assert height / width < 2.5, (width, height)


@pytest.mark.slow
def test_collapsed_transformer_reads_top_to_bottom(gpt12):
    """Splitting a module's own ops at its child calls keeps the module graph acyclic."""
    edges = EDGE.findall(gpt12[2].source)
    indegree = {n: 0 for e in edges for n in e}
    for _, dst in edges:
        indegree[dst] += 1
    ready = [n for n, k in indegree.items() if k == 0]
    seen = 0
    while ready:
        node = ready.pop()
        seen += 1
        for src, dst in edges:
            if src == node:
                indegree[dst] -= 1
                if indegree[dst] == 0:
                    ready.append(dst)
    assert seen == len(indegree)


@pytest.mark.slow
def test_depth_merges_blocks(gpt12):
    model, batch, _ = gpt12
    d = graph.graph_of(model, batch, options=graph.DrawOptions(collapse="modules", depth=2))
    heads = [label.split("\n")[0] for label, _ in nodes(d.source).values()]
    assert sorted(h for h in heads if h.startswith("blocks.")) == sorted(
        f"blocks.{i}" for i in range(12)
    )


def test_small_graph_stays_full():
    d = drawing_of("tiny-transformer")
    assert not d.collapsed and d.full_nodes <= graph.COLLAPSE_ABOVE and not d.notes


def test_model_is_left_as_found():
    model, batch = make_gpt(GPTConfig(layers=2))
    model.eval()
    graph.graph_of(model, batch, options=graph.DrawOptions(collapse="modules"))
    for m in model.modules():
        assert not m._forward_hooks and not m._forward_pre_hooks and not m.training
    assert all(p.grad is None for p in model.parameters())


def test_cli_says_when_it_collapses(cli, tmp_path):
    out = tmp_path / "gpt.dot"
    result = cli(write_target(tmp_path, GPT12), "--out", str(out), "--no-probe")
    assert result.exit_code == 0, result.stderr
    assert "one node per module" in result.stderr and "--collapse none" in result.stderr
    assert out.read_text().startswith("digraph")


# --- failures leave nothing behind ---------------------------------------------------------


def test_missing_dot_exits_2_before_model_code_and_leaves_no_file(cli, tmp_path, monkeypatch):
    empty = tmp_path / "bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    marker = tmp_path / "ran"
    spec = write_target(tmp_path, MLP, marker=str(marker))
    result = cli(spec, "--out", str(tmp_path / "graph.png"))
    assert result.exit_code == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "install Graphviz" in lines[0] and "--format dot" in lines[0]
    assert not (tmp_path / "graph.png").exists() and not marker.exists()
    result = cli(spec, "--out", str(tmp_path / "graph.dot"))
    assert result.exit_code == 0, result.stderr
    assert (tmp_path / "graph.dot").read_text().startswith("digraph")


def test_crashing_dot_leaves_the_old_file_untouched(cli, tmp_path, monkeypatch):
    fake = tmp_path / "bin" / "dot"
    fake.parent.mkdir()
    fake.write_text("#!/bin/sh\nprintf 'half a png' \necho 'Error: simulated crash' >&2\nexit 1\n")
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{fake.parent}{os.pathsep}/usr/bin{os.pathsep}/bin")
    out = tmp_path / "graph.png"
    out.write_bytes(b"the previous picture")
    result = cli("nan-loss", "--out", str(out))
    assert result.exit_code == 2
    assert "simulated crash" in result.stderr
    assert out.read_bytes() == b"the previous picture"
    assert sorted(os.listdir(tmp_path)) == ["bin", "graph.png"]


@pytest.mark.parametrize("where", ["missing/graph.dot", "."])
def test_unwritable_out_exits_2_before_model_code(cli, tmp_path, where):
    marker = tmp_path / "ran"
    result = cli(
        write_target(tmp_path, MLP, marker=str(marker)),
        "--out",
        str(tmp_path / where),
        "--format",
        "dot",
    )
    assert result.exit_code == 2
    assert result.stderr.startswith("gradscope: error: cannot write")
    assert not marker.exists()


def test_format_follows_extension_or_flag(cli, tmp_path):
    assert graph.format_for("a.SVG", None) == "svg"
    assert graph.format_for("a.txt", "pdf") == "pdf"
    assert graph.format_for(None, None) == "dot"
    with pytest.raises(GradscopeError, match="extension"):
        graph.format_for("a.jpg", None)
    result = cli("nan-loss", "--out", str(tmp_path / "a.jpg"))
    assert result.exit_code == 2 and "--format" in result.stderr


# --- the target from config ----------------------------------------------------------------


def test_no_target_and_none_configured_says_so(cli, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = cli("--format", "dot")
    assert result.exit_code == 2
    assert "no TARGET given" in result.stderr and "[[inspect]]" in result.stderr


def test_no_target_uses_the_first_configured_inspect_entry(cli, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pyproject.toml").write_text(
        '[tool.gradscope]\n[[tool.gradscope.inspect]]\ntarget = "unused-submodule"\n'
        '[[tool.gradscope.inspect]]\ntarget = "nan-loss"\n'
    )
    result = cli("--format", "dot")
    assert result.exit_code == 0, result.stderr
    assert "body.0.weight" in result.stdout and "fc.weight" not in result.stdout
    (tmp_path / "other.toml").write_text('[[inspect]]\ntarget = "nan-loss"\n')
    result = cli("--config", "other.toml", "--format", "dot")
    assert result.exit_code == 0, result.stderr
    assert "fc.weight" in result.stdout and "body.0.weight" not in result.stdout


# --- Python 3.12+: no distutils ------------------------------------------------------------


def test_torchviz_imports_when_distutils_is_gone(monkeypatch):
    graph_compat.import_torchviz()
    for name in ("torchviz", "torchviz.dot"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    monkeypatch.setitem(sys.modules, "distutils", None)  # what `import distutils` sees on 3.12
    monkeypatch.setitem(sys.modules, "distutils.version", None)
    torchviz = graph_compat.import_torchviz()
    assert sys.modules["distutils.version"].LooseVersion is graph_compat.LooseVersion
    x = torch.ones(2, requires_grad=True)
    assert "SumBackward0" in torchviz.make_dot((x * 2).sum(), show_saved=True).source


def test_loose_version_orders_like_distutils():
    v = graph_compat.LooseVersion
    assert v("2.13.0+cpu") > v("1.9") and v("1.10") > v("1.9") and v("1.9") < "1.9.1"
    assert v("1.9") == v("1.9") and not v("1.9") < v("1.9")


@pytest.mark.slow
def test_command_module_does_not_import_torch():
    code = "import sys, gradscope.cli.graph_cmd; print('torch' in sys.modules)"
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=os.path.dirname(os.path.dirname(os.path.dirname(__file__))),
        check=True,
    )
    assert out.stdout.strip() == "False"


def test_the_cut_site_is_drawn_where_the_cut_tensor_is_used_next():
    t = targets.load("detached-middle")
    d = graph.graph_of(t.model, t.batch, t.loss_fn, options=graph.DrawOptions(collapse="none"))
    (cut_label,) = re.findall(r'^\t+cut0 \[label="(.*?)"', d.source, flags=re.S | re.M)
    assert ".detach() at " in cut_label and "examples/models.py:" in cut_label
    (consumer,) = [dst for src, dst in EDGE.findall(d.source) if src == "cut0"]
    assert re.search(rf'^\t+{consumer} \[label="?AddmmBackward0\b', d.source, flags=re.M)
    assert any(n.startswith("graph cut by .detach() at") for n in d.notes)
    healthy = targets.load("healthy-mlp")
    clean = graph.graph_of(healthy.model, healthy.batch, healthy.loss_fn)
    assert "cut0" not in clean.source and not any("graph cut" in n for n in clean.notes)


def test_a_no_grad_region_is_a_cut_too():
    class Frozen(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b = torch.nn.Linear(3, 3), torch.nn.Linear(3, 1)

        def forward(self, x):
            with torch.no_grad():
                h = self.a(x)
            return self.b(h).sum()

    d = graph.graph_of(Frozen(), torch.randn(2, 3), options=graph.DrawOptions(collapse="none"))
    assert any("no_grad region" in n for n in d.notes), d.notes


@pytest.mark.parametrize("probe", [True, False], ids=["probed", "no-probe"])
def test_a_reentrant_checkpoint_is_a_closed_node_not_a_cut(probe):
    """A reentrant checkpoint runs its region under no_grad and builds its graph in the
    backward: nothing is cut, and with a probe its parameters are known to get gradients."""
    from torch.utils.checkpoint import checkpoint

    class Checkpointed(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.block, self.b = (torch.nn.Linear(3, 3) for _ in range(3))

        def forward(self, x):
            return self.b(checkpoint(self.block, self.a(x), use_reentrant=True)).sum()

    model, x = Checkpointed(), torch.randn(2, 3)
    statuses = probe_statuses(model, x) if probe else None
    d = graph.graph_of(model, x, statuses=statuses, options=graph.DrawOptions(collapse="none"))
    assert not any("cut" in n for n in d.notes) and "cut0" not in d.source, d.notes
    assert any(n.startswith("CheckpointFunctionBackward: a reentrant") for n in d.notes)
    inside = ["block.weight", "block.bias"]
    assert [a.split(" ")[0] for a in d.absent] == ([] if probe else inside)
    assert statuses is None or all(statuses[n] == "ok" for n in inside)
