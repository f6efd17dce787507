"""Every command's front door: `api.<command>(target, options, settings)` does what the
command line does (a model class, a baseline, an unwritten file, a misspelt option), and
a config entry can set every option its command has."""

from __future__ import annotations

import json
import textwrap

import pytest

from gradscope import api, config
from gradscope.api.options import WatchOptions
from gradscope.errors import ConfigError, ExitCode, GradscopeError
from gradscope.outcome import CheckReport, Outcome, exit_code

TRAIN = textwrap.dedent("""
    import torch
    from torch import nn

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for _ in range(6):
        loss = model(torch.randn(8, 4)).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
""")

NET = textwrap.dedent("""
    from torch import nn

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(6, 3)

        def forward(self, x):
            return self.fc(x).relu()
""")


@pytest.fixture
def project(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "train.py").write_text(TRAIN)
    (tmp_path / "net.py").write_text(NET)
    return tmp_path


@pytest.mark.parametrize("spec", ["net.py:Net", "net.py"])
def test_a_file_with_only_a_module_class_inspects_as_on_the_command_line(project, spec):
    resolved = api.resolve(spec, api.InspectOptions())
    assert not resolved.script and "Net" in resolved.note
    report = api.inspect_target(spec)
    assert report.stats.params and report.outcome().could_not_run is None


def test_a_training_script_without_a_target_runs_to_its_backward(project):
    resolved = api.resolve("train.py", api.InspectOptions())
    assert resolved.script and "training script" in resolved.note
    report = api.inspect_target("train.py", step=2)
    assert report.outcome().label == "script train.py" and report.stats.params


def test_script_arguments_or_a_step_for_a_target_are_one_line(project):
    with pytest.raises(GradscopeError, match="--step is for a training script"):
        api.inspect_target("net.py:Net", step=2)
    with pytest.raises(GradscopeError, match="unexpected arguments"):
        api.resolve("healthy-mlp", api.InspectOptions(argv=("--lr", "1")))


@pytest.mark.parametrize(
    "call, said",
    [
        (
            lambda: api.watch_script("train.py", stepz=3),
            "unknown option stepz; did you mean steps?",
        ),
        (lambda: api.watch(flush_evry=3), "unknown option flush_evry; did you mean flush_every?"),
        (lambda: api.inspect_target("healthy-mlp", explian=False), "did you mean explain?"),
        (lambda: api.gradcheck(["torch:sqrt"], shapes={"x": (3,)}), "did you mean shape?"),
        (lambda: api.graph("healthy-mlp", outptu="g.dot"), "did you mean output?"),
        (lambda: api.diff("healthy-mlp", rtl=1e-3), "did you mean rtol?"),
        (lambda: api.check(baselin="b.json"), "did you mean baseline?"),
        (lambda: api.watch_script("train.py", steps="3"), "option steps: expected int, got '3'"),
        (lambda: api.watch_script("train.py", steps=0), "steps must be at least 1"),
        (lambda: api.inspect_target("train.py", step="last"), "step 'last': give an optimizer"),
    ],
)
def test_a_misspelt_or_mistyped_option_is_one_line_never_a_type_error(project, call, said):
    with pytest.raises(GradscopeError) as raised:
        call()
    assert said in str(raised.value) and "\n" not in str(raised.value)


def test_an_unwritten_file_is_exit_2_whatever_the_findings():
    fine = Outcome("watch", "train.py")
    assert exit_code([fine], None) == ExitCode.OK
    lost = Outcome("watch", "train.py", unwritten=["--plot /gone/run.png: no such folder"])
    assert exit_code([lost], None) == ExitCode.ERROR
    stopped = Outcome("watch", "t.py", unwritten=["--log x"], stopped_by=ExitCode.INTERRUPTED)
    assert exit_code([stopped], None) == ExitCode.INTERRUPTED
    gate = CheckReport([fine, lost], None)
    assert gate.exit_code() == ExitCode.ERROR
    assert [r["passed"] for r in gate.to_dict()["results"]] == [True, False]


def test_a_plot_the_run_could_not_write_is_exit_2(project):
    """The script removes the folder its plot was to go to: the run is judged, the plot
    is said unwritten, and the outcome's exit code is 2 (was the CLI's own decision)."""
    out = project / "pictures"
    out.mkdir()
    (project / "gone.py").write_text(TRAIN + "\nimport shutil\nshutil.rmtree('pictures')\n")
    report = api.watch_script("gone.py", plot=str(out / "run.png"))
    outcome = report.outcome()
    assert report.judged and outcome.unwritten and "--plot" in outcome.unwritten[0]
    assert exit_code([outcome], None) == ExitCode.ERROR


def _write_project(project, extra=""):
    (project / "pyproject.toml").write_text(
        '[[tool.gradscope.inspect]]\ntarget = "unused-submodule"\n' + extra
    )
    return config.load(None)


def test_check_adopts_then_gates_on_a_baseline(project):
    settings = _write_project(project)
    notes: list[str] = []
    first = api.check(settings=settings, baseline="base.json", isolated=False, notes=notes)
    assert first.exit_code() == ExitCode.FINDINGS and "no baseline base.json yet" in notes[0]
    adopted = api.check(settings=settings, write_baseline="base.json", isolated=False)
    assert adopted.exit_code() == ExitCode.OK and (project / "base.json").exists()
    gated = api.check(api.CheckOptions(baseline="base.json"), settings, isolated=False)
    assert gated.exit_code() == ExitCode.OK and gated.results[0].known


def test_a_watch_entry_sets_any_watch_option_and_runs_through_the_api(project):
    settings = _write_project(
        project,
        '[[tool.gradscope.watch]]\nscript = "train.py"\nsteps = 3\nlog = "steps.jsonl"\n'
        "flush-every = 1\n",
    )
    (entry,) = settings.watch
    assert WatchOptions.from_entry(entry) == WatchOptions(steps=3, log="steps.jsonl", flush_every=1)
    report = api.check(settings=settings, isolated=False)
    watched = report.results[1]
    assert watched.kind == "watch" and watched.could_not_run is None
    lines = (project / "steps.jsonl").read_text().splitlines()
    assert len([json.loads(line) for line in lines if '"step"' in line]) >= 3


def test_an_inspect_entry_can_run_a_script_to_a_step(project):
    (project / "pyproject.toml").write_text(
        '[[tool.gradscope.inspect]]\ntarget = "train.py"\nscript = true\nstep = 2\n'
        "explain = false\n"
    )
    settings = config.load(None)
    assert api.InspectOptions.from_entry(settings.inspect[0]) == api.InspectOptions(
        script=True, step=2, explain=False
    )
    (result,) = api.check(settings=settings, isolated=False).results
    assert result.kind == "inspect" and result.could_not_run is None


@pytest.mark.parametrize(
    "table, key",
    [
        ('[[tool.gradscope.watch]]\nscript = "train.py"\nflush-every = "often"\n', "flush-every"),
        ('[[tool.gradscope.inspect]]\ntarget = "t.py"\nstep = 0\n', "inspect"),
        ('[[tool.gradscope.inspect]]\ntarget = "t.py"\nargs = "--lr 1"\n', "args"),
    ],
)
def test_a_wrong_entry_value_names_the_file_and_key_before_anything_runs(project, table, key):
    (project / "pyproject.toml").write_text(table)
    with pytest.raises(ConfigError, match=rf"pyproject.toml.*{key}"):
        api.check(settings=config.load(None), isolated=False)


def test_every_inspect_and_watch_option_is_a_key_of_its_entry():
    """from_entry reads kebab-case keys: the config accepts every option's key (the
    launcher's nproc_per_node and the gate's own quiet_stdout aside)."""
    from dataclasses import fields

    for options, keys in (
        (api.InspectOptions, config.INSPECT_KEYS),
        (api.WatchOptions, config.WATCH_KEYS),
    ):
        names = {f.name for f in fields(options)} - {"nproc_per_node", "quiet_stdout"}
        wanted = {"args" if n == "argv" else n.replace("_", "-") for n in names}
        assert wanted <= keys, options.__name__


def test_gradcheck_takes_typed_values_over_its_entries(project):
    report = api.gradcheck(["torch:sqrt"], domain={}, shape={"input": (2, 3)}, dtype="double")
    assert report.targets[0].inputs[0].shape == (2, 3)


def test_graph_without_a_target_draws_the_first_configured_one(project):
    (project / "pyproject.toml").write_text('[[tool.gradscope.inspect]]\ntarget = "net.py:Net"\n')
    result = api.graph(None, settings=config.load(None), probe=False)
    assert result.picture.startswith(b"digraph") and "Net" in result.note
    with pytest.raises(GradscopeError, match="no TARGET given"):
        api.graph(None)


def test_the_gate_reads_a_model_class_file_as_the_command_does(project):
    (project / "pyproject.toml").write_text('[[tool.gradscope.inspect]]\ntarget = "net.py"\n')
    (result,) = api.check(settings=config.load(None), isolated=False).results
    assert result.could_not_run is None and result.label == "net.py"
