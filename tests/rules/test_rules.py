"""Each rule on fabricated stats: it fires, it stays silent, and its threshold edge. No torch."""

from __future__ import annotations

import sys

from fabricated import param, stats

from gradscope import findings, rules
from gradscope.config import Settings, Thresholds
from gradscope.findings import Severity
from gradscope.troubleshooting import TABLE


def fired(run, slug, settings=None):
    return [f.subject for f in rules.diagnose(run, settings) if f.slug == slug]


def test_rules_module_does_not_import_torch():
    import subprocess

    code = "import sys, gradscope.rules; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_none_grad_names_parameter_and_says_module_never_ran():
    run = stats(
        param("body.weight"), param("aux.weight", None), param("aux.bias", None), ran=("body",)
    )
    found = [f for f in rules.diagnose(run) if f.slug == "none-grad"]
    assert [f.subject for f in found] == ["aux.weight", "aux.bias"]
    assert all(f.severity is Severity.ERROR and f.rule == "GS101" for f in found)
    assert "never ran" in found[0].message
    assert found[0].row.symptom == "grad is None"


def test_none_grad_when_module_ran_says_graph_is_cut():
    run = stats(param("enc.weight", None), param("dec.weight"), ran=("enc", "dec"))
    (f,) = [f for f in rules.diagnose(run) if f.slug == "none-grad"]
    assert f.subject == "enc.weight" and "cut" in f.message


def test_none_grad_when_loss_has_no_graph():
    run = stats(param("a.weight", None), loss_requires_grad=False)
    (f,) = [f for f in rules.diagnose(run) if f.slug == "none-grad"]
    assert "loss itself does not require grad" in f.message


def test_none_grad_silent_on_healthy_and_frozen():
    run = stats(param("a.weight"), param("b.weight", None, requires_grad=False))
    assert fired(run, "none-grad") == []
    assert fired(run, "frozen") == ["b"]


def test_frozen_counts_per_top_module():
    run = stats(
        param("backbone.0.weight", requires_grad=False),
        param("backbone.1.weight", requires_grad=False),
        param("head.weight"),
    )
    (f,) = [f for f in rules.diagnose(run) if f.slug == "frozen"]
    assert f.severity is Severity.INFO and f.value == 2 and f.subject == "backbone"


def test_zero_grad():
    run = stats(param("a.weight", 0.0, grad_max=0.0, zero_fraction=1.0), param("b.weight"))
    assert fired(run, "zero-grad") == ["a.weight"]
    assert fired(stats(param("b.weight")), "zero-grad") == []


def test_non_finite_loss_and_grad():
    run = stats(
        param("a.weight", float("nan"), finite=False),
        param("b.weight"),
        loss=float("nan"),
        loss_finite=False,
    )
    assert fired(run, "non-finite-loss") == ["loss"]
    assert fired(run, "non-finite-grad") == ["a.weight"]
    assert fired(stats(param("b.weight")), "non-finite-grad") == []


def test_exploding_per_element_rms_edge():
    t = Thresholds(explode_norm=1e9)
    settings = Settings(thresholds=t)
    at = stats(param("a.weight", t.explode_rms * 10, shape=(100,)), param("b.weight", 1.0))
    above = stats(param("a.weight", t.explode_rms * 10.1, shape=(100,)), param("b.weight", 1.0))
    assert fired(at, "exploding", settings) == []
    assert fired(above, "exploding", settings) == ["a.weight"]


def test_a_large_tensor_with_a_normal_per_element_gradient_is_not_exploding():
    """inception_v3's fc: norm 2e3 over 2M elements is an RMS of 1.4, not an explosion."""
    big = param("fc.weight", 2e3, shape=(2048, 1000), weight_norm=30.0)
    settings = Settings(thresholds=Thresholds(explode_norm=1e4))
    assert fired(stats(big, param("conv.weight", 1.0)), "exploding", settings) == []


def test_total_norm_keeps_the_absolute_bound():
    t = Thresholds()
    many = [param(f"l{i}.weight", t.explode_norm / 9.9, shape=(10**6,)) for i in range(100)]
    assert fired(stats(*many), "exploding") == ["total"]
    few = [param(f"l{i}.weight", t.explode_norm / 10.1, shape=(10**6,)) for i in range(100)]
    assert fired(stats(*few), "exploding") == []


def test_exploding_median_ratio_needs_min_norm():
    small = [param(f"l{i}.weight", 1e-4, depth=i) for i in range(1, 6)]
    big = param("first.weight", 2.0, depth=0)  # 2e4 x the median, norm above 1.0
    tiny_big = param("first.weight", 0.5, depth=0)  # 5e3 x the median, norm below 1.0
    assert fired(stats(*small, big), "exploding") == ["first.weight"]
    assert fired(stats(*small, tiny_big), "exploding") == []


def test_a_late_head_far_above_a_small_body_is_not_an_explosion():
    """HF BEiT: the classifier 1.4e3x the body's median RMS. An explosion grows on its way
    back to the input; a head that runs last is the body's gradient being small."""
    body = [param(f"l{i}.weight", 1e-4, depth=i) for i in range(5)]
    head = param("head.weight", 2.0, depth=9)
    assert fired(stats(*body, head), "exploding") == []


def test_lookup_tables_are_judged_among_lookup_tables():
    """HF BART: embedding tables 1e3x the median RMS of its dense weights, by design."""
    from dataclasses import replace

    dense = [param(f"l{i}.weight", 1e-4, depth=i + 1) for i in range(5)]
    table = replace(param("emb.weight", 2.0, depth=0), lookup=True)
    assert fired(stats(*dense, table), "exploding") == []
    as_dense = param("emb.weight", 2.0, depth=0)
    assert fired(stats(*dense, as_dense), "exploding") == ["emb.weight"]
    tables = [replace(param(f"t{i}.weight", 1e-4, depth=i + 1), lookup=True) for i in range(5)]
    assert fired(stats(*dense, *tables, table), "exploding") == ["emb.weight"]


def test_total_norm_leaves_out_scale_invariant_weights():
    """A conv feeding BatchNorm has a gradient ∝ 1/||w|| (HF MobileNetV2, inception_v3)."""
    from dataclasses import replace

    from gradscope.stats import ModuleStats

    conv = param("conv.weight", 2e3, shape=(10**6,), depth=1)
    run = stats(conv, param("bn.weight", 1.0, depth=2), param("fc.weight", 1.0, depth=3))
    assert fired(run, "exploding") == ["total"]
    modules = (
        ModuleStats("", "Sequential", True, 0),
        ModuleStats("conv", "Conv2d", True, 1),
        ModuleStats("bn", "BatchNorm2d", True, 2),
        ModuleStats("fc", "Linear", True, 3),
    )
    assert fired(replace(run, modules=modules), "exploding") == []
    into_linear = (*modules[:2], ModuleStats("bn", "Linear", True, 2), modules[3])
    assert fired(replace(run, modules=into_linear), "exploding") == ["total"]


def test_vanishing_absolute_and_depth_ratio():
    t = Thresholds()
    run = stats(param("first.weight", 1e-8, depth=0), param("last.weight", 1.0, depth=3))
    assert fired(run, "vanishing") == ["first.weight"]  # absolute fires, depth ratio folded in
    run = stats(
        param("first.weight", 1e-5, depth=0),
        param("mid.weight", 1e-2, depth=1),
        param("last.weight", 1.0, depth=2),
    )
    (f,) = [f for f in rules.diagnose(run) if f.slug == "vanishing"]
    assert f.subject == "first" and f.value == 1e-5 and f.threshold == t.vanish_depth_ratio


def test_vanishing_depth_ratio_edge_and_healthy():
    t = Thresholds()
    edge = stats(
        param("first.weight", t.vanish_depth_ratio, depth=0), param("last.weight", 1.0, depth=1)
    )
    assert fired(edge, "vanishing") == []
    assert (
        fired(stats(param("a.weight", 0.3, depth=0), param("b.weight", 0.1, depth=1)), "vanishing")
        == []
    )


def lora_pair(layer: int, a_norm: float, b_norm: float, b_weight: float, depth: int):
    """peft's names and shapes: A (r x in) then B (out x r), B run right after A."""
    at = f"layers.{layer}.q_proj"
    return (
        param(f"{at}.lora_A.default.weight", a_norm, shape=(4, 32), depth=depth),
        param(
            f"{at}.lora_B.default.weight",
            b_norm,
            shape=(32, 4),
            depth=depth + 1,
            weight_norm=b_weight,
        ),
    )


def test_lora_a_gated_by_a_near_zero_b_is_not_vanishing():
    """A's gradient is B.T @ dL/dW: after one step from B = 0 it is as small as B."""
    run = stats(*lora_pair(0, 1e-9, 0.2, 1e-4, depth=0), param("head.weight", 0.3, depth=5))
    assert fired(run, "vanishing") == []
    assert fired(
        stats(param("x.weight", 1e-9, depth=0), param("head.weight", 0.3, depth=5)), "vanishing"
    ) == ["x.weight"]  # the same number without a partner
    # the signal itself vanishing shows on B, whose gradient does not pass through B
    run = stats(*lora_pair(0, 1e-9, 1e-9, 1e-4, depth=0), param("head.weight", 0.3, depth=5))
    assert fired(run, "vanishing") == ["layers.0.q_proj.lora_B.default.weight"]


def test_vanishing_by_depth_compares_a_block_with_its_own_kind():
    """A query's gradient is small at init in every block alike: no shrink with depth."""
    t = Thresholds()
    queries = [param(f"layer.{i}.query.weight", 1e-5, depth=2 * i) for i in range(4)]
    values = [param(f"layer.{i}.value.weight", 1e-2, depth=2 * i + 1) for i in range(4)]
    head = param("classifier.weight", 1.0, depth=9)
    assert fired(stats(*queries, *values, head), "vanishing") == []
    shrinking = [param(f"layer.{i}.query.weight", 1e-6 * 20**i, depth=2 * i) for i in range(4)]
    (f,) = [f for f in rules.diagnose(stats(*shrinking, *values, head)) if f.slug == "vanishing"]
    assert f.subject == "layer.0.query" and f.threshold == t.vanish_depth_ratio


def test_dense_rms_ignores_zero_rows_of_sparse_gradients():
    sparse = param("emb.weight", 1.0, shape=(100, 10), zero_fraction=0.99)
    assert abs(rules.dense_rms(sparse) - 1.0 / 10**0.5) < 1e-12


def test_settings_override_severity_and_ignore_by_glob():
    run = stats(param("aux.weight", None), param("aux.bias", None), param("x.weight", None), ran=())
    settings = Settings(severities={"none-grad": Severity.WARNING}, ignores=(("GS101", "aux.*"),))
    marked = [f for f in rules.diagnose(run, settings) if f.slug == "none-grad"]
    found = [f for f in marked if f.ignored_by is None]
    assert [f.subject for f in found] == ["x.weight"]
    assert found[0].severity is Severity.WARNING
    ignored = {f.subject: f.ignored_by for f in marked if f.ignored_by}
    assert ignored == {"aux.weight": "GS101:aux.*", "aux.bias": "GS101:aux.*"}


def test_every_rule_has_a_table_row_and_unique_ids():
    assert len({r.slug for r in findings.RULES.values()}) == len(findings.RULES)
    for r in findings.RULES.values():
        assert r.row in TABLE and r.id[:3] in ("GS1", "GS2", "GS3", "GS4", "GS5", "GS6")
    assert findings.lookup("gs101").slug == "none-grad"
    assert findings.lookup("vanishing").id == "GS105"
    assert findings.lookup("nope") is None


def test_graph_retained():
    from dataclasses import replace

    run = replace(stats(param("a.weight")), retained=("cache.outputs",), saved_bytes=3 * 2**20)
    (f,) = [f for f in rules.diagnose(run) if f.slug == "graph-retained"]
    assert f.subject == "cache.outputs" and f.severity is Severity.WARNING and f.row.key == "oom"
    assert "3.0 MiB" in f.message
    assert fired(stats(param("a.weight")), "graph-retained") == []


def test_explode_rms_judges_a_scale_invariant_weight_at_unit_weight_rms():
    """inception_v3's first conv (std 0.1, into BatchNorm): RMS 105 per element is 10.5 at
    unit weight RMS; the same gradient on a weight that feeds a Linear is an explosion."""
    from dataclasses import replace

    from gradscope.stats import ModuleStats

    conv = param("conv.weight", 105.0 * 100, shape=(100, 100), depth=1, weight_norm=10.0)
    run = stats(conv, param("bn.weight", 1.0, depth=2))
    norm = (ModuleStats("conv", "Conv2d", True, 1), ModuleStats("bn", "BatchNorm2d", True, 2))
    linear = (norm[0], ModuleStats("bn", "Linear", True, 2))
    assert fired(replace(run, modules=norm), "exploding") == []
    assert fired(replace(run, modules=linear), "exploding") == ["conv.weight"]
