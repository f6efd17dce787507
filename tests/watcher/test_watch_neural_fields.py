"""Neural fields watched (domain_scripts/neural_fields.py): a voxel grid fitted directly by
grid_sample at its method's high rate is not judged as a weight matrix stepped too hard,
while a matrix with the same ratios is, and a grid started at 0 under its ReLU is named as
that when it never learns; NeRF's fine network, the same class as the coarse
one but initialised on its own, left out of the optimizer is not called a target copy,
while a deep copy still is; a sigmoid before binary_cross_entropy_with_logits is named
through a loss summed over each shape's points and averaged over the shapes; Instant-NGP's
hash tables, started within ±1e-4 by design, are no scale to judge Adam's lr by, while an
MLP's Linear weights started as small still are."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from gradscope.config import Settings
from gradscope.findings import Severity
from gradscope.rules.step_setup import update_ratio_high
from gradscope.steps.records import ParamInfo, WatchRun
from gradscope.watcher.sampled_grids import SampledGrids
from tests.watcher.watch_scripts import domain_watched, step_record, watched


def _loud(report):
    assert not report.faults, report.internal_error()
    return [f for f in report.findings if f.severity >= Severity.WARNING]


def test_a_voxel_grid_fitted_at_a_high_rate_is_silent():
    assert _loud(domain_watched("neural_fields.py", "voxels")) == []


def test_a_matrix_with_a_grids_update_ratios_is_still_judged():
    grid = ParamInfo("density", (1, 1, 8, 8, 8), True, True, 1.0, sampled_grid=True)
    matrix = ParamInfo("head.weight", (8, 8), True, True, 1.0)
    steps = [step_record(k, param_norms=(1.0, 1.0), update_ratios=(0.5, 0.5)) for k in range(1, 61)]
    run = WatchRun("fit", (grid, matrix), steps, "completed", ("RMSprop",))
    found = update_ratio_high(run, Settings().thresholds)
    assert [f.subject for f in found] == ["head.weight"]


def test_only_grid_samples_input_is_a_grid():
    grid = torch.rand(1, 2, 4, 4, requires_grad=True)
    points = (torch.rand(1, 5, 1, 2) * 2 - 1).requires_grad_()
    weight = torch.randn(2, 3, requires_grad=True)
    feats = F.grid_sample(grid[:, :2], points, align_corners=True)
    loss = (feats.view(2, 5).T @ weight).sum()
    seen = SampledGrids()
    seen.observe([loss])
    assert seen.holds(grid) and not seen.holds(points) and not seen.holds(weight)
    assert not (seen.looks_up(grid) or seen.looks_up(weight))


def test_tables_read_by_index_are_looked_up():
    table = torch.nn.Embedding(10, 3)
    levels = torch.randn(4, 10, 3, requires_grad=True)
    weight = torch.randn(3, 2, requires_grad=True)
    index = torch.tensor([1, 2])
    loss = ((table(index) + levels[2][index]) @ weight).sum()
    seen = SampledGrids()
    seen.observe([loss])
    assert seen.looks_up(table.weight) and seen.looks_up(levels)
    assert not (seen.looks_up(weight) or seen.holds(table.weight))


def test_hash_tables_started_near_zero_are_no_scale_for_the_lr():
    assert _loud(domain_watched("neural_fields.py", "hash")) == []
    found = domain_watched("neural_fields.py", "hash-tiny-mlp").findings
    (lr,) = [f for f in found if f.rule == "GS419"]
    assert "one step can move every weight by more than its whole initial size" in lr.message


def test_a_grid_started_at_zero_under_its_relu_is_named_as_such():
    report = domain_watched("neural_fields.py", "voxels-zero")
    never = [f for f in report.findings if f.rule == "GS413"]
    assert sorted(f.subject for f in never) == ["tensor0", "tensor1"]
    for f in never:
        assert "every value of it was exactly 0 at the first step" in f.message, f.message
        assert f.advice.startswith("start it away from 0")
    unused = [f for f in watched("optimizer_bugs.py").findings if f.rule == "GS413"]
    assert unused and all("exactly 0" not in f.message for f in unused)  # started elsewhere
    assert all(f.advice.startswith("check that it takes part in the loss") for f in unused)


def test_coarse_and_fine_networks_trained_together_are_silent():
    assert _loud(domain_watched("neural_fields.py", "coarse-fine")) == []


def test_a_fine_network_left_out_is_not_called_a_copy():
    outside = [
        f for f in domain_watched("neural_fields.py", "fine-outside").findings if f.rule == "GS411"
    ]
    assert len(outside) == 4 and all(f.severity == Severity.ERROR for f in outside)
    for f in outside:
        assert "looks like a copy" not in f.advice, f.advice
        assert "add a param group for it" in f.advice


def test_a_deep_copy_outside_the_optimizer_is_still_a_copy():
    outside = [
        f for f in domain_watched("neural_fields.py", "copy-outside").findings if f.rule == "GS411"
    ]
    assert len(outside) == 4
    assert all("looks like a copy of Field." in f.advice for f in outside)


def test_a_sigmoid_before_bce_with_logits_summed_over_points_is_named():
    assert _loud(domain_watched("neural_fields.py", "occupancy")) == []
    (f,) = [
        f
        for f in domain_watched("neural_fields.py", "occupancy-sigmoid").findings
        if f.rule == "GS431"
    ]
    assert f.severity == Severity.ERROR and "(a double sigmoid)" in f.message
    assert "never fall below" not in f.message  # a sum over the points: no per-target floor


def test_a_per_target_loss_reduced_over_some_dims_keeps_its_kind():
    from gradscope.watcher import loss_graph

    x, y = torch.randn(4, 6, requires_grad=True), torch.rand(4, 6)
    bce = F.binary_cross_entropy_with_logits(x, y, reduction="none")
    mse = F.mse_loss(x, y, reduction="none")
    for loss, kind, reduction in (
        (bce.sum(-1).mean(), "binary_cross_entropy_with_logits", "sum"),
        (bce.mean(-1).mean(), "binary_cross_entropy_with_logits", "mean"),
        (mse.mean(1).sum(), "mse", "sum"),
    ):
        (term,) = loss_graph.read(loss).terms
        assert (term.kind, term.reduction) == (kind, reduction)
