"""torch.compile around more than the model: a whole training step, the compiled-optimizer
recipe, a clip in a fullgraph=True function. The run must be the one it is without the
watch (no recompilation, dynamo's warnings not the watch's, nothing stopped), and the
watch must read it as it reads the same code uncompiled."""

from __future__ import annotations

import math

import pytest
from watch_scripts import script

from gradscope.watcher import watch_script

pytestmark = pytest.mark.slow  # compiles (aot_eager: no C++ compiler)

FIELDS = ("loss", "grad_norm", "clipped_norm", "max_norm", "clip_total", "update_norm")


def _compiled(mode: str, capfd):
    import torch._dynamo
    from torch._dynamo.utils import counters

    torch._dynamo.reset()
    counters.clear()
    capfd.readouterr()
    report = watch_script(script("compiled_step.py"), ["--mode", mode])
    recompiles = dict(counters.get("recompiles", {}))
    torch._dynamo.reset()
    return report, recompiles, capfd.readouterr().err


def _same(a: float | None, b: float | None) -> bool:
    if a is None or b is None:
        return a is b
    return math.isclose(a, b, rel_tol=1e-4, abs_tol=1e-7)  # a compiled update rounds otherwise


@pytest.mark.parametrize("mode", ["whole", "optimizer", "fullgraph"])
def test_a_compiled_step_is_watched_as_its_eager_twin(mode, capfd):
    report, recompiles, err = _compiled(mode, capfd)
    assert report.run.status == "completed" and not report.faults
    assert recompiles == {}
    # dynamo warns when it traces what it cannot (gradscope's bookkeeping) or recompiles
    assert "recompile" not in err and "does not know how to trace" not in err, err
    eager = watch_script(script("compiled_step.py"), ["--mode", mode, "--eager"])
    assert [s.optimizer for s in report.run.steps] == [0] * 6  # no step by hand
    for got, want in zip(report.run.steps, eager.run.steps, strict=True):
        for field in FIELDS:
            assert _same(getattr(got, field), getattr(want, field)), (got.step, field)
        assert all(map(_same, got.param_norms, want.param_norms)), got.step
    assert all(s.clipped_norm is not None for s in report.run.steps)  # the clip was seen
    assert [f.rule for f in report.findings] == [f.rule for f in eager.findings]
