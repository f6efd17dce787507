"""The recorded numbers against what plain PyTorch gave the script itself."""

from __future__ import annotations

import json

import pytest
from watch_scripts import script

from gradscope.watcher import watch_script


def test_loss_and_norm_equal_what_the_script_saw(tmp_path):
    out = tmp_path / "seen.json"
    report = watch_script(script("recorded.py"), [str(out)])
    seen = json.loads(out.read_text())
    steps = report.run.steps
    assert len(steps) == len(seen) == 40
    for r, s in zip(steps, seen, strict=True):
        assert r.loss == pytest.approx(s["loss"], rel=1e-6)
        assert r.grad_norm == pytest.approx(s["norm"], rel=1e-6)
        assert r.max_norm == 0.5 and r.clipped == (s["norm"] > 0.5)
        assert r.backward_calls == 1 and r.lrs == (1e-3,)
    assert report.run.names() == ["0.weight", "0.bias", "2.weight", "2.bias"]


MATRIX = [
    (fused, unscale, disabled)
    for fused in (False, True)
    for unscale in (False, True)
    for disabled in (False, True)
]


@pytest.mark.parametrize(("fused", "unscale", "disabled"), MATRIX)
def test_amp_matrix_skips_and_unscaled_norms(tmp_path, fused, unscale, disabled):
    out = tmp_path / "seen.json"
    argv = ["--out", str(out)]
    argv += ["--fused"] * fused + ["--unscale"] * unscale + ["--disabled"] * disabled
    report = watch_script(script("amp_matrix.py"), argv)
    seen = json.loads(out.read_text())
    steps = report.run.steps
    assert len(steps) == len(seen) == 20
    expected = [] if disabled else [5, 12]
    assert [r.step for r in steps if r.skipped] == expected
    assert [i + 1 for i, s in enumerate(seen) if s["skipped"]] == expected
    for r, s in zip(steps, seen, strict=True):
        assert r.loss == pytest.approx(s["loss"], rel=1e-6, nan_ok=True)  # unscaled
        if not s["skipped"] and r.step not in (5, 12):
            assert r.grad_norm == pytest.approx(s["norm"], rel=1e-5, nan_ok=True)
        assert (r.scale is None) == disabled
    if not disabled:
        assert steps[0].scale == 1024.0 and steps[5].scale == 512.0
