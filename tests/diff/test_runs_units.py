"""The diff of two runs on hand-made `watch --log` files (fast, no torch): reading,
step and name alignment, the tolerance per dtype, trained-at-all, the result contract."""

from __future__ import annotations

import gzip
import io
import json
import math

import pytest
from runs_logs import NAMES, healthy, step_line, write

from gradscope.diff.align import name_map
from gradscope.diff.runs import RunsOptions, diff_logs, log
from gradscope.diff.runs.engine import RunsComparer
from gradscope.diff.runs.live import Against, summary
from gradscope.diff.runs.tolerance import RTOL, choose
from gradscope.errors import ConfigError
from gradscope.findings import RULES, Severity
from gradscope.report import diff_runs_terminal
from gradscope.report.console import View
from gradscope.report.json import dumps

STEPS = list(range(1, 101))


def bump(at: int, index: int, factor: float):
    """From step `at` on, parameter `index`'s norm times `factor`."""

    def change(step, norms, loss):
        if step >= at:
            norms = list(norms)
            norms[index] *= factor
        return norms, loss

    return change


@pytest.fixture
def ref(tmp_path):
    return write(tmp_path / "ref.jsonl", STEPS)


# reading


def test_a_last_line_cut_mid_write_is_left_out_with_a_note(tmp_path, ref):
    cut = tmp_path / "cut.jsonl"
    text = ref.read_text()
    cut.write_text(text[: len(text) - 40])  # inside the last line
    run = log.read(str(cut))
    assert [s.step for s in run.steps[0]][-1] == 99
    assert any("cut short" in n for n in run.notes)
    result = diff_logs(str(ref), str(cut))
    assert result.common == {0: 99} and not result.differs
    assert any("cut short" in n for n in result.notes)


def test_a_bad_line_inside_is_skipped_and_counted(tmp_path, ref):
    lines = ref.read_text().splitlines()
    lines[10] = "{not json"
    bad = tmp_path / "bad.jsonl"
    bad.write_text("\n".join(lines) + "\n")
    run = log.read(str(bad))
    assert run.count == 99 and run.notes == ["bad.jsonl: 1 unreadable line(s) skipped (11)"]


@pytest.mark.parametrize(
    "last",
    [
        {"findings": []},
        {"findings": [{"rule": "GS401", "explained_by": "GS452:lr", "lead": 47, "value": "nan"}]},
    ],
)
def test_the_findings_line_that_ends_a_log_is_read_past_without_a_note(tmp_path, ref, last):
    judged = tmp_path / "judged.jsonl"
    judged.write_text(ref.read_text() + json.dumps(last) + "\n")
    run = log.read(str(judged))
    assert run.count == 100 and run.notes == []
    result = diff_logs(str(ref), str(judged))
    assert result.common == {0: 100} and not result.differs and result.notes == []


def test_gzip_and_special_numbers_and_a_repeated_longer_header(tmp_path):
    lines = [
        {"params": NAMES[:2]},
        step_line(1, [0.5, "nan"], 1.0),
        {"params": NAMES[:3]},
        step_line(2, [0.5, "inf", 0.2], "nan"),
    ]
    path = tmp_path / "r.jsonl.gz"
    with gzip.open(path, "wt") as f:
        f.write("\n".join(json.dumps(x) for x in lines) + "\n")
    run = log.read(str(path))
    assert run.names == NAMES[:3]
    second = run.steps[0][1]
    assert math.isinf(second.param_norms[1]) and math.isnan(second.loss)
    assert math.isnan(run.steps[0][0].param_norms[1])


@pytest.mark.parametrize("text", ["", '{"params": ["a"]}\n', "hello\n"])
def test_a_file_without_steps_is_a_config_error(tmp_path, text):
    path = tmp_path / "x.jsonl"
    path.write_text(text)
    with pytest.raises(ConfigError, match="no step found"):
        log.read(str(path))


def test_a_missing_file_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match="No such file"):
        log.read(str(tmp_path / "absent.jsonl"))


# steps


def test_identical_logs_are_bitwise_identical(tmp_path, ref):
    same = write(tmp_path / "same.jsonl", STEPS)
    result = diff_logs(str(ref), str(same), RunsOptions(exact=True))
    assert result.verdict() == "identical (bitwise)" and result.findings == []
    assert not result.outcome().failed(Severity.INFO)


def test_the_first_differing_step_and_parameter(tmp_path, ref):
    new = write(tmp_path / "new.jsonl", STEPS, change=bump(37, 2, 1.001))
    result = diff_logs(str(ref), str(new))
    assert result.first.step == 37
    assert [p.ref for p in result.parting] == ["h.0.mlp.weight"]
    finding = result.findings[0]
    assert finding.rule == "GS607" and finding.subject == "h.0.mlp.weight"
    assert result.outcome().failed(Severity.ERROR)


def test_runs_of_different_lengths_compare_their_common_steps(tmp_path, ref):
    short = write(tmp_path / "short.jsonl", STEPS[:40])
    result = diff_logs(str(ref), str(short))
    assert result.common == {0: 40} and result.lengths == {"ref": {0: 100}, "new": {0: 40}}
    assert not result.differs
    assert [f.rule for f in result.findings] == ["GS609"]
    assert "to step 100" in result.findings[0].message
    assert not result.outcome().failed(Severity.WARNING)


def test_steps_logged_at_other_intervals_compare_the_shared_ones(tmp_path, ref):
    sparse = write(tmp_path / "sparse.jsonl", STEPS[9::10], change=bump(55, 0, 1.01))
    result = diff_logs(str(ref), str(sparse))
    assert result.intervals == {"ref": {0: 1}, "new": {0: 10}}
    assert result.common == {0: 10}
    assert result.first.step == 60  # the first logged step at or after 55


def test_several_optimizers_are_compared_each_on_its_own(tmp_path):
    def two(path, late_bump):
        lines = [json.dumps({"params": NAMES})]
        for s in range(1, 61):
            norms, loss = healthy(s)
            which = s % 2
            if which == 1 and s >= late_bump:
                norms = [n * 1.01 for n in norms]
            lines.append(json.dumps(step_line(s, norms, loss, optimizer=which)))
        path.write_text("\n".join(lines) + "\n")
        return str(path)

    result = diff_logs(two(tmp_path / "a.jsonl", 999), two(tmp_path / "b.jsonl", 30))
    assert [(d.optimizer, d.step) for d in result.divergences] == [(1, 31)]
    assert result.common == {0: 30, 1: 30}


def test_the_comparer_announces_the_first_divergence_once(tmp_path, ref):
    comparer = RunsComparer(log.read(str(ref)), choose(None, None))
    found = []
    for s in STEPS:
        norms, loss = healthy(s)
        if s >= 12:
            loss *= 1.5
        found.append(comparer.feed(log.Step.from_dict(step_line(s, norms, loss)), NAMES))
    hits = [f for f in found if f is not None]
    assert len(hits) == 1 and hits[0].step == 12 and hits[0].gaps[0].subject == "loss"


def test_the_gap_growth_is_measured_from_the_first_divergence(tmp_path, ref):
    def grows(step, norms, loss):
        return norms, loss * (1 + 1e-3 * 2 ** min(step - 20, 10)) if step >= 20 else loss

    result = diff_logs(str(ref), str(write(tmp_path / "g.jsonl", STEPS, change=grows)))
    assert result.first.step == 20
    by_step = {g.step: g for g in result.growth}
    assert set(by_step) == {20, 21, 30, 100}
    assert by_step[21].factor == pytest.approx(2.0, rel=1e-3)
    assert by_step[30].factor == pytest.approx(1024.0, rel=1e-2)


def test_no_common_step_cannot_be_compared(tmp_path, ref):
    later = write(tmp_path / "later.jsonl", [s + 1000 for s in STEPS])
    result = diff_logs(str(ref), str(later))
    assert result.could_not_run and "no step is in both logs" in result.could_not_run
    assert result.to_dict()["could_not_run"] == result.could_not_run


# names


@pytest.mark.parametrize(
    "rename",
    [
        lambda n: "module." + n,  # DDP
        lambda n: "_orig_mod." + n,  # torch.compile
        lambda n: "_fsdp_wrapped_module." + n.replace("h.0.", "h.0._fsdp_wrapped_module."),
        lambda n: "model." + n,  # timm / Lightning's self.model
    ],
)
def test_wrapper_prefixes_pair_without_help(tmp_path, ref, rename):
    wrapped = write(tmp_path / "w.jsonl", STEPS, names=[rename(n) for n in NAMES])
    result = diff_logs(str(ref), str(wrapped))
    assert len(result.pairs) == len(NAMES) and not result.ref_only and not result.new_only
    assert result.verdict() == "identical (bitwise)"


def test_a_name_map_pairs_the_rest(tmp_path, ref):
    names = ["tok.weight", "blocks.0.attn.weight", "blocks.0.ffn.weight", "lm_head.weight"]
    renamed = write(tmp_path / "r.jsonl", STEPS, names=names, change=bump(5, 3, 2.0))
    plain = diff_logs(str(ref), str(renamed))
    assert plain.ref_only and any(f.rule == "GS609" for f in plain.findings)
    mapping = {"embed.weight": "tok.weight", "h.": "blocks.", "h.0.mlp.": "blocks.0.ffn."}
    mapping["head.weight"] = "lm_head.weight"
    mapped = diff_logs(str(ref), str(renamed), RunsOptions(names=name_map(mapping)))
    assert not mapped.ref_only and mapped.parting[0].new == "lm_head.weight"
    assert mapped.first.step == 5


# tolerance


def test_float32_tolerance_is_stated_as_assumed_and_judges_relative_gaps(tmp_path, ref):
    inside = write(tmp_path / "in.jsonl", STEPS, change=bump(1, 1, 1 + 5e-5))
    outside = write(tmp_path / "out.jsonl", STEPS, change=bump(1, 1, 1 + 2e-4))
    a, b = diff_logs(str(ref), str(inside)), diff_logs(str(ref), str(outside))
    assert a.tolerance.rtol == 1e-4 and "assumed" in a.tolerance.source
    assert a.verdict() == "identical within tolerance" and b.differs
    exact = diff_logs(str(ref), str(inside), RunsOptions(exact=True))
    assert exact.differs and exact.first.step == 1


def test_a_recorded_or_given_dtype_sets_the_tolerance(tmp_path):
    header = {"params": NAMES, "dtype": "torch.bfloat16"}
    a = write(tmp_path / "a.jsonl", STEPS, header=header)
    b = write(tmp_path / "b.jsonl", STEPS, header=header, change=bump(1, 0, 1.05))
    recorded = diff_logs(str(a), str(b))
    assert recorded.tolerance.rtol == RTOL["bfloat16"] and "recorded" in recorded.tolerance.source
    assert not recorded.differs
    given = diff_logs(str(a), str(b), RunsOptions(dtype="float64"))
    assert given.tolerance.rtol == 1e-6 and given.differs


def test_the_per_dtype_rtol_is_the_model_diffs_gradient_tolerance():
    torch = pytest.importorskip("torch")
    from gradscope.diff.compare import DEFAULTS, GRAD_FACTOR

    for name, rtol in RTOL.items():
        assert rtol == pytest.approx(DEFAULTS[getattr(torch, name)][0] * GRAD_FACTOR)


def test_a_gradient_on_one_side_only_differs_and_nan_in_both_agrees():
    tol = choose(None, None)
    assert tol.ratio(0.3, None) == math.inf and tol.ratio(None, None) == 0
    assert tol.ratio(math.nan, math.nan) == 0 and tol.ratio(math.nan, 1.0) == math.inf
    assert tol.ratio(0.0, 0.0) == 0 and tol.ratio(0.0, 1e-13) <= 1


# trained at all


def test_two_flat_runs_that_agree_are_still_flagged(tmp_path):
    def flat(step, norms, loss):
        return norms, 2.3 + 0.01 * math.sin(step)

    a = write(tmp_path / "a.jsonl", STEPS, change=flat, lr=0.0)
    b = write(tmp_path / "b.jsonl", STEPS, change=flat, lr=0.0)
    result = diff_logs(str(a), str(b), RunsOptions(rtol=0.5))
    assert not result.differs
    flagged = [f for f in result.findings if f.rule == "GS608"]
    assert len(flagged) == 2 and all(f.severity is Severity.ERROR for f in flagged)
    assert "learning rate is 0" in flagged[0].message or "never moved" in flagged[0].message
    assert result.outcome().failed(Severity.ERROR)


def test_a_run_whose_weights_move_but_loss_stays_flat_is_a_warning(tmp_path, ref):
    """A converged checkpoint fine-tuned further moves its weights and keeps its loss: told,
    not failed under the default --fail-on error."""

    def flat(step, norms, loss):
        return norms, 2.3 + 0.01 * math.sin(step)

    new = write(tmp_path / "flat.jsonl", STEPS, change=flat)
    result = diff_logs(str(ref), str(new))
    flagged = [f for f in result.findings if f.rule == "GS608"]
    assert [(f.severity, f.subject) for f in flagged] == [(Severity.WARNING, f"new ({new})")]
    assert "did not fall" in flagged[0].message
    trained = {t.run: t.trained for t in result.training}
    assert trained == {"ref": True, "new": False}


def test_a_short_run_is_not_judged_on_its_loss(tmp_path):
    a = write(tmp_path / "a.jsonl", STEPS[:8])
    result = diff_logs(str(a), str(a))
    assert [t.trained for t in result.training] == [None, None]
    assert not [f for f in result.findings if f.rule == "GS608"]


# the result, its renderings and the live comparer


def test_the_result_follows_the_outcome_contract(tmp_path, ref):
    new = write(tmp_path / "new.jsonl", STEPS, change=bump(3, 0, math.inf))
    result = diff_logs(str(ref), str(new))
    assert (result.kind, result.label) == ("diff", f"{ref} vs {new}")
    assert result.ignored == [] and result.could_not_run is None
    doc = json.loads(dumps(result.to_dict()))
    assert {k: doc[k] for k in ("version", "tool", "kind", "mode")} == {
        "version": 1,
        "tool": "gradscope",
        "kind": "diff",
        "mode": "runs",
    }
    assert doc["summary"]["first_step"] == 3 and doc["parting"][0]["rel"] == "inf"


def test_the_rules_are_registered():
    assert [RULES[r].slug for r in ("GS607", "GS608", "GS609")] == [
        "runs-diverge",
        "run-did-not-train",
        "runs-misaligned",
    ]


def test_the_terminal_report_fits_80_columns_and_shows_names_literally(tmp_path, ref):
    names = ["[bold]embed.weight", *NAMES[1:]]
    odd = write(tmp_path / "odd[red].jsonl", STEPS, names=names, change=bump(9, 0, 1.1))
    result = diff_logs(str(ref), str(odd))
    text = diff_runs_terminal.render(result, View(80))
    assert max(len(line) for line in text.splitlines()) <= 80
    assert "✗ the runs part at step 9" in text and "[bold]embed.weight" in text
    assert "odd[red].jsonl" in "".join(text.split()) and "Trained at all" in text
    last = text.rstrip("\n").rsplit("\n\n", 1)[-1]  # the verdict, after a blank line
    assert last.startswith("verdict: DIFFER  (first beyond tolerance at step 9")


def test_live_against_announces_once_and_summarises(tmp_path, ref, monkeypatch):
    from gradscope.steps.records import StepRecord

    err = io.StringIO()
    monkeypatch.setattr("sys.stderr", err)
    listener = Against(str(ref))
    for batch in (STEPS[:50], STEPS[50:]):
        records = []
        for s in batch:
            norms, loss = healthy(s)
            norms[1] = norms[1] * 3 if s >= 44 else norms[1]
            d = step_line(s, norms, loss, update=0.02 if s == 1 else None)
            fields = (d["loss"], d["grad_norm"], None, None, (0.01,), 1, None, False, None)
            records.append(StepRecord(s, 0, *fields, tuple(norms), update_norm=d["update_norm"]))
        listener(records, NAMES)
    lines = err.getvalue().splitlines()
    assert len(lines) == 1 and "parts from the reference at step 44" in lines[0]
    said = summary(listener.result())
    assert "differ from step 44 of 100 compared" in said[0] and "h.0.attn.weight" in said[0]
    assert [line.split(": ")[1] for line in said[1:]] == ["reference trained", "this run trained"]


def test_watch_against_an_unreadable_log_exits_2_before_the_script_runs(tmp_path):
    from typer.testing import CliRunner

    from gradscope.cli.root import app

    ran = tmp_path / "ran"
    script = tmp_path / "train.py"
    script.write_text(f"open({str(ran)!r}, 'w').write('ran')\n")
    absent = str(tmp_path / "absent.jsonl")
    result = CliRunner().invoke(app, ["watch", str(script), "--against", absent])
    assert result.exit_code == 2 and "absent.jsonl" in result.stderr
    assert not ran.exists()


def test_cli_two_flat_runs_fail_unless_the_config_says_the_loss_is_not_meant_to_fall(tmp_path):
    from typer.testing import CliRunner

    from gradscope.cli.root import app

    def flat(step, norms, loss):
        return norms, 2.3 + 0.01 * math.sin(step)

    a = str(write(tmp_path / "a.jsonl", STEPS, change=flat, lr=0.0))
    b = str(write(tmp_path / "b.jsonl", STEPS, change=flat, lr=0.0))
    runner = CliRunner()
    assert runner.invoke(app, ["diff", a, b]).exit_code == 1
    assert runner.invoke(app, ["diff", a, b, "--fail-on", "never"]).exit_code == 0
    config = tmp_path / "gradscope.toml"
    config.write_text('ignore = ["run-did-not-train:*"]\n')
    quiet = runner.invoke(app, ["diff", a, b, "--config", str(config), "-f", "json"])
    assert quiet.exit_code == 0, quiet.output
    doc = json.loads(quiet.stdout)
    assert doc["findings"] == [] and len(doc["ignored"]) == 2
    assert doc["summary"]["trained"] == {"ref": False, "new": False}
    shown = runner.invoke(app, ["diff", a, b, "--config", str(config)], env={"COLUMNS": "80"})
    assert "2 ignored (run-did-not-train:* x2) by the config" in shown.stdout
    assert "verdict: IDENTICAL" in shown.stdout and "did not train: ref, new" in shown.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("{ref}", "healthy-mlp"), "two `gradscope watch --log` files"),
        (("{ref}", "{ref}", "--dtype", "int8"), "--dtype int8"),
        (("{ref}", "{ref}", "--fail-on", "loud"), "'loud' is not one of"),
        (("{ref}", "absent.jsonl"), "absent.jsonl"),
        (("{ref}", "{later}"), "no step is in both logs"),
    ],
)
def test_cli_bad_input_exits_2_with_one_line(tmp_path, ref, args, message):
    from typer.testing import CliRunner

    from gradscope.cli.root import app

    later = write(tmp_path / "later.jsonl", [s + 1000 for s in STEPS])
    argv = [a.format(ref=ref, later=later) for a in args]
    result = CliRunner().invoke(app, ["diff", *argv, "-f", "json"])
    assert result.exit_code == 2, result.output
    assert message in result.stderr and len(result.stderr.strip().splitlines()) == 1
