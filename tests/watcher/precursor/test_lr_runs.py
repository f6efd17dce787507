"""GS452 and GS451 on real runs of a char-level GPT (char_gpt.py: 2 layers, d=48, AdamW
at 1e-2 after a 20-step warm-up, 300 steps; those whose findings come by step 214 cut to
232-240): a sudden ×10 learning rate at step 200 (the loss goes back to the uniform guess)
and the ramp protocol (×1.2 per step after step 120: NaN by step 170; its run 200 steps)
are named at the step whose update applied the rise, first in the report, and the
divergence findings point back to it with their lead; one batch with a 1000× gradient at
step 200 (the loss then climbs from 2.2 to 4.1) is named by GS451 at that step, every
tensor's RMS_t alike, and a one-step penalty on one layer's weight there names that tensor
alone; the same run without either, and with a cosine schedule restarted at its peak, stay
silent for 300 steps."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gradscope.findings import Severity

pytestmark = pytest.mark.slow

SCRIPT = str(Path(__file__).with_name("char_gpt.py"))


def _run(mode: str, steps: int = 300):
    """The run of `mode`: its 300 steps, or `steps` where what a test reads comes sooner."""
    from gradscope.watcher import watch_script

    report = watch_script(SCRIPT, [mode, str(steps)])
    assert report.run.status == "completed", report.run.error
    return report.findings


@pytest.mark.parametrize("mode", ["healthy", "restart"])
def test_the_controls_are_silent(mode):
    assert [f.rule for f in _run(mode) if f.severity >= Severity.WARNING] == []


def test_a_sudden_jump_is_named_at_the_step_that_applied_it():
    findings = _run("jump", 240)  # back to the uniform guess by 213, GS403 at 211
    first = findings[0]
    assert first.rule == "GS452" and first.steps == (200,) and "×10.0" in first.message
    later = [f for f in findings if f.explained_by == "GS452:lr"]
    assert later and all(f.lead is not None and f.lead > 0 for f in later if f.steps)
    assert "GS419" not in {f.rule for f in findings}  # the jump's harm is not the start's


@pytest.fixture(scope="module")
def ramp(tmp_path_factory):
    """The ramp's run, 200 steps (NaN by 170), once for the three tests that read it:
    `watch` on the command line in this process (no launch takes part in what they read),
    its JSON report on stdout, TensorBoard's events and the --log lines of one run."""
    from typer.testing import CliRunner

    from gradscope.cli import app

    out = tmp_path_factory.mktemp("ramp")
    args = ["watch", SCRIPT, "-f", "json", "--tensorboard", str(out / "tb")]
    args += ["--log", str(out / "steps.jsonl"), "--", "ramp", "200"]
    done = CliRunner().invoke(app, args, catch_exceptions=False)
    assert done.exit_code == 1, done.output
    return json.loads(done.stdout), out


def test_the_ramp_is_named_before_the_run_diverges(ramp):
    findings = ramp[0]["findings"]
    first = findings[0]
    assert first["rule"] == "GS452" and first["steps"] == [124]
    by_rule = {f["rule"]: f for f in findings}
    nan = by_rule["GS401"]
    assert nan["explained_by"] == "GS452:lr" and nan["lead"] == nan["steps"][0] - 124 >= 25
    spike = by_rule["GS402"]
    assert spike["explained_by"] == "GS452:lr" and spike["lead"] > 0


def test_the_lead_is_in_the_json_and_the_tensorboard_text(ramp):
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    doc, out = ramp
    findings = {f["rule"]: f for f in doc["findings"]}
    assert findings["GS452"]["steps"][0] == 124 and "lead" not in findings["GS452"]
    nan = findings["GS401"]
    assert nan["explained_by"] == "GS452:lr" and nan["lead"] == nan["steps"][0] - 124
    assert f"which warned {nan['lead']} steps before" in nan["advice"]
    events = EventAccumulator(str(out / "tb"), size_guidance={"tensors": 0})
    events.Reload()
    (text,) = events.Tensors("findings/GS401/text_summary")
    assert f"lead: {nan['lead']} steps after the warning GS452:lr" in (
        text.tensor_proto.string_val[0].decode()
    )


def test_a_large_gradient_batch_under_adamw_is_named_at_its_step():
    findings = _run("vlag", 232)  # its findings at 200-203, named alike in 300 steps
    first = findings[0]
    assert first.rule == "GS451" and first.steps == (200,) and "β2 = 0.999" in first.message
    assert "RMS_t jumped alike (13.4-13.5×, the whole gradient scaled)" in first.message
    spike = next(f for f in findings if f.rule == "GS403")
    assert spike.explained_by == "GS451:optimizer-state" and spike.lead == 0


def test_a_large_gradient_in_one_layer_names_that_tensor():
    findings = _run("vlag-layer", 232)  # the same findings as in 300 steps
    first = findings[0]
    assert first.rule == "GS451" and first.steps == (200,)
    assert "jumped: `blocks.1.mlp.2.weight` 13.5× (the others at most 1.2)" in first.message
    assert first.message.count("`") == 2  # no other tensor named
    # Adam's own state at the next sampled step: the update that carried the lag
    (state,) = [e for e in first.evidence if e.startswith("Adam's state")]
    assert "step 201: blocks.1.mlp.2.weight update RMS 1.21× the lr (median 0.09 before)" in state


def test_the_lead_is_in_the_log_s_last_line(ramp):
    doc, out = ramp
    lines = [json.loads(line) for line in (out / "steps.jsonl").read_text().splitlines()]
    assert "params" in lines[0] and all("step" in line for line in lines[1:-1])
    assert len(lines) == len(doc["steps"]) + 2  # the header, every step, the findings
    logged = {f["rule"]: f for f in lines[-1]["findings"]}
    assert [f["rule"] for f in lines[-1]["findings"]] == [f["rule"] for f in doc["findings"]]
    assert "lead" not in logged["GS452"]
    nan = logged["GS401"]
    assert nan["explained_by"] == "GS452:lr" and nan["lead"] == nan["steps"][0] - 124 >= 25
    reported = {f["rule"]: f for f in doc["findings"]}
    assert nan == reported["GS401"]  # as the JSON report has it
