"""`watch --tensorboard DIR`: the events read back hold what the JSON report says."""

from __future__ import annotations

import json
import math

import pytest
from watch_scripts import gradscope, script

from gradscope.api import watch_script

pytest.importorskip("tensorboard")


def _events(directory):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    every = {"scalars": 0, "tensors": 0, "images": 0}
    events = EventAccumulator(str(directory), size_guidance=every)
    events.Reload()
    return events


def _close(a: float, b: float) -> bool:
    return (math.isnan(a) and math.isnan(b)) or math.isclose(a, b, rel_tol=1e-6, abs_tol=1e-12)


@pytest.mark.slow
def test_scalars_per_step_a_layers_heatmap_and_findings_as_text(tmp_path):
    done = gradscope(
        "watch", script("no_zero_grad.py"), "-f", "json", "--tensorboard", str(tmp_path / "tb")
    )
    assert done.returncode == 1, done.stderr
    doc = json.loads(done.stdout)
    events = _events(tmp_path / "tb")
    tags = events.Tags()["scalars"]
    assert {"loss", "grad_norm/total", "lr"} <= set(tags)
    losses = {e.step: e.value for e in events.Scalars("loss")}
    assert sorted(losses) == [s["step"] for s in doc["steps"]]
    for s in doc["steps"]:
        assert _close(losses[s["step"]], s["loss"])
    norms = {e.step: e.value for e in events.Scalars("grad_norm/total")}
    assert all(_close(norms[s["step"]], s["grad_norm"]) for s in doc["steps"])
    # one heatmap image for the layers, never a scalar panel per parameter
    assert not [t for t in tags if t.startswith("grad_norm/layers")]
    assert events.Tags()["images"] == ["grad_norm/layers"]
    (image,) = events.Images("grad_norm/layers")
    assert image.encoded_image_string.startswith(b"\x89PNG") and image.width > 200
    texts = events.Tags()["tensors"]
    assert "findings/GS412/text_summary" in texts


def test_several_optimizers_get_their_own_series(tmp_path):
    report = watch_script(script("rule_gan.py"), tensorboard=str(tmp_path / "tb"))
    assert report.judged and not report.run.unwritten
    tags = set(_events(tmp_path / "tb").Tags()["scalars"])
    assert {"optimizer 0/loss", "optimizer 1/loss"} <= tags


def test_a_file_is_not_a_tensorboard_folder(tmp_path):
    taken = tmp_path / "taken"
    taken.write_text("mine")
    done = gradscope("watch", script("no_zero_grad.py"), "--tensorboard", str(taken))
    assert done.returncode == 2 and "not a folder" in done.stderr
    assert taken.read_text() == "mine"
