"""The rule registry (gradscope/rules/registry.py): every rule, of every family, is declared
with `@rule` and has a stage, a why (its check's docstring), an example, a fix and a test
that makes it fire; RULES, the docs, diagnose and the watch judge read the declarations.
Cheap: no run, no torch."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from gradscope import rule_docs
from gradscope import rules as per_run
from gradscope.findings import RULES, Severity
from gradscope.rules import registry, watch
from gradscope.rules.registry import Stage, rule

ROOT = Path(__file__).resolve().parent.parent.parent

RUN = "tests/rules/test_rules.py"
SINGLE = "tests/verdicts/test_single_step.py"
BASELINE = "tests/test_baseline.py"
GRADCHECK = "tests/gradcheck/test_gradcheck_findings.py"
TORCHRUN = "tests/distributed/test_dist_watch.py"
GATHERED = "tests/distributed/test_dist_findings.py"
DIFF = "tests/diff/test_diff_api.py"
PORTS = "tests/diff/test_ports.py"
SHAPES = "tests/diff/test_diff_findings.py"
RUNS = "tests/diff/test_runs_units.py"
VERDICTS = "tests/watcher/test_watch_verdicts.py"
SERIES = "tests/watcher/test_watch_rules_series.py"
MEANING = "tests/watcher/test_watch_meaning.py"
NOISE = "tests/watcher/test_noise_scale.py"
ORDER = "tests/watcher/test_watch_silent_order.py"
NAN = "tests/watcher/test_watch_nan_origin.py"
STATE = "tests/watcher/test_watch_state.py"

FIRES = {
    "GS101": (RUN, "test_none_grad_names_parameter_and_says_module_never_ran"),
    "GS102": (RUN, "test_non_finite_loss_and_grad"),
    "GS103": (RUN, "test_non_finite_loss_and_grad"),
    "GS104": (RUN, "test_exploding_per_element_rms_edge"),
    "GS105": (RUN, "test_vanishing_absolute_and_depth_ratio"),
    "GS106": (RUN, "test_zero_grad"),
    "GS107": (RUN, "test_frozen_counts_per_top_module"),
    "GS108": (SINGLE, "test_standard_lora_init_is_info_that_one_step_resolves"),
    "GS109": (SINGLE, "test_hand_written_top_k_moe_idle_experts_are_info"),
    "GS110": (BASELINE, "test_norm_changes_beyond_the_factor"),
    "GS201": (GRADCHECK, "test_a_wrong_backward_is_a_jacobian_mismatch"),
    "GS202": (GRADCHECK, "test_a_backward_that_raises_is_named_as_raised"),
    "GS203": (GRADCHECK, "test_a_tensor_saved_then_changed_in_place_is_a_caveat"),
    "GS301": (RUN, "test_graph_retained"),
    "GS432": (
        "tests/rules/test_logits.py",
        "test_inspect_names_the_op_that_fed_probabilities_to_the_loss",
    ),
    "GS501": (TORCHRUN, "test_find_unused_run_names_unused_rank_dependent_and_skipped"),
    "GS502": (TORCHRUN, "test_find_unused_run_names_unused_rank_dependent_and_skipped"),
    "GS503": (GATHERED, "test_a_gathering_names_each_distributed_rule_that_two_ranks_show"),
    "GS504": (TORCHRUN, "test_ddp_reduction_error_is_named_and_explained"),
    "GS505": (TORCHRUN, "test_bad_shard_and_perturbed_rank_are_named_through_nproc_per_node"),
    "GS506": (TORCHRUN, "test_bad_shard_and_perturbed_rank_are_named_through_nproc_per_node"),
    "GS507": (TORCHRUN, "test_find_unused_run_names_unused_rank_dependent_and_skipped"),
    "GS601": (DIFF, "test_the_seeded_module_is_found_and_located"),
    "GS602": (DIFF, "test_grad_only_difference_names_the_parameter"),
    "GS603": (PORTS, "test_dropout_left_on_is_named_as_randomness"),
    "GS604": (DIFF, "test_transposed_weight_is_reported_not_copied_unless_allowed"),
    "GS605": (
        "tests/diff/test_diff_findings.py",
        "test_a_port_built_with_another_hidden_size_is_a_shape_mismatch",
    ),
    "GS606": (DIFF, "test_unpaired_parameters_are_listed"),
    "GS607": (RUNS, "test_the_first_differing_step_and_parameter"),
    "GS608": (RUNS, "test_two_flat_runs_that_agree_are_still_flagged"),
    "GS609": (RUNS, "test_runs_of_different_lengths_compare_their_common_steps"),
    "GS401": (VERDICTS, "test_non_finite_names_the_step_and_the_first_parameters"),
    "GS402": (VERDICTS, "test_spike_at_the_outlier_batch_with_its_drivers"),
    "GS403": (VERDICTS, "test_spike_at_the_outlier_batch_with_its_drivers"),
    "GS404": (VERDICTS, "test_exploding_trend"),
    "GS405": (VERDICTS, "test_vanishing_over_time_names_the_dead_layer"),
    "GS406": (VERDICTS, "test_clipping_binds"),
    "GS407": (VERDICTS, "test_amp_skips_at_the_injected_steps_only"),
    "GS408": (VERDICTS, "test_amp_scale_collapse"),
    "GS409": (VERDICTS, "test_update_ratio_high_on_the_weight_matrix"),
    "GS410": (VERDICTS, "test_optimizer_setup_bugs_are_named_as_such"),
    "GS411": (VERDICTS, "test_optimizer_setup_bugs_are_named_as_such"),
    "GS412": (VERDICTS, "test_missing_zero_grad_but_not_deliberate_accumulation"),
    "GS413": (VERDICTS, "test_optimizer_setup_bugs_are_named_as_such"),
    "GS414": (SERIES, "test_blowup_that_recovered_is_a_warning"),
    "GS415": (SERIES, "test_no_progress_fires_on_a_flat_run_and_says_clipping_is_on"),
    "GS416": (SERIES, "test_amp_clip_before_unscale"),
    "GS417": (SERIES, "test_frozen_midway_is_a_warning_naming_the_step"),
    "GS418": (MEANING, "test_a_negated_cross_entropy_is_a_maximised_loss_and_leads"),
    "GS419": (MEANING, "test_a_learning_rate_100x_too_high_in_warm_up_is_named_with_its_numbers"),
    "GS420": (MEANING, "test_a_weight_decay_of_100_is_named_as_the_cause_of_the_vanishing"),
    "GS421": (MEANING, "test_a_frozen_layer_left_in_the_optimizer_is_information"),
    "GS422": (
        MEANING,
        "test_zero_grad_between_backward_and_step_is_named_and_step_one_has_its_loss",
    ),
    "GS423": (
        "tests/watcher/test_watch_unbounded_loss.py",
        "test_a_subtracted_kl_is_a_loss_that_falls_without_bound",
    ),
    "GS424": (
        "tests/watcher/test_watch_changed_after_clip.py",
        "test_noise_growing_after_the_clip_is_named_not_the_lr",
    ),
    "GS433": (NAN, "test_a_nan_made_in_the_backward_while_the_weights_stay_finite_names_its_op"),
    "GS434": (NAN, "test_weights_gone_nan_under_a_finite_loss_are_named_with_the_step_to_replay"),
    "GS435": (ORDER, "test_gradients_wiped_inside_a_step_are_named_first_at_step_two"),
    "GS436": (
        ORDER,
        "test_an_epoch_schedule_stepped_per_batch_is_named_with_the_step_of_its_collapse",
    ),
    "GS437": (ORDER, "test_a_parameter_replaced_after_the_optimizer_is_named_at_step_one"),
    "GS438": (ORDER, "test_a_summed_loss_under_sgd_is_the_cause_of_its_blow_up"),
    "GS439": (
        "tests/watcher/test_watch_update_nan.py",
        "test_float16_weights_under_adam_are_named_at_step_1_as_the_nans_cause",
    ),
    "GS430": (
        NOISE,
        "test_a_batch_far_above_the_critical_batch_is_information_and_a_near_one_is_not",
    ),
    "GS431": (
        "tests/watcher/test_watch_probabilities.py",
        "test_a_loss_fed_probabilities_is_named_at_step_1_and_leads",
    ),
    "GS440": (
        STATE,
        "test_a_model_left_in_eval_mode_is_named_at_its_first_step_with_the_eval_line",
    ),
    "GS441": (STATE, "test_batchnorm_statistics_that_never_moved_are_named"),
    "GS448": (
        "tests/watcher/test_frozen_stats_drift.py",
        "test_a_frozen_network_in_train_mode_is_named_with_its_batchnorms",
    ),
    "GS442": (STATE, "test_adam_eps_above_root_v_is_named_within_two_steps"),
    "GS443": (STATE, "test_the_same_batch_every_step_is_information"),
    "GS444": (STATE, "test_an_evaluation_in_train_mode_is_named_with_its_line"),
    "GS446": (
        "tests/watcher/test_teacher_trained.py",
        "test_an_attached_byol_teacher_in_the_optimizer_is_named",
    ),
    "GS447": (
        "tests/watcher/test_watch_reference.py",
        "test_a_reference_trained_with_the_policy_is_named",
    ),
    "GS445": (
        "tests/watcher/test_target_leak.py",
        "test_an_unshifted_captioning_decoder_is_named_at_its_reads",
    ),
    "GS450": (
        "tests/watcher/precursor/test_layer_spike_runs.py",
        "test_a_filled_input_column_names_the_input_layer_and_the_step",
    ),
    "GS451": (
        "tests/watcher/precursor/test_lr_runs.py",
        "test_a_large_gradient_batch_under_adamw_is_named_at_its_step",
    ),
    "GS452": (
        "tests/watcher/precursor/test_lr_runs.py",
        "test_a_sudden_jump_is_named_at_the_step_that_applied_it",
    ),
    "GS453": (
        "tests/watcher/precursor/test_logit_runs.py",
        "test_attention_logit_growth_is_named_before_the_run_diverges",
    ),
    "GS454": (
        "tests/watcher/test_logit_precursors.py",
        "test_a_log_partition_that_drifts_while_the_loss_stays_warns",
    ),
    "GS455": (
        "tests/watcher/test_watch_input_gradients.py",
        "test_an_attacks_parameter_gradients_left_for_the_step_are_named",
    ),
    "GS456": (
        "tests/watcher/test_watch_stepped_twice.py",
        "test_darts_alpha_in_the_weights_optimizer_is_named",
    ),
    "GS457": (
        "tests/watcher/test_watch_clip_order.py",
        "test_a_clip_no_step_applies_is_named_at_its_line",
    ),
    "GS458": (
        "tests/watcher/test_watch_lr_compounded.py",
        "test_a_per_batch_lr_rescale_never_restored_is_named",
    ),
    "GS459": (
        "tests/watcher/test_watch_carried_graph.py",
        "test_a_hidden_state_carried_with_its_graph_is_named",
    ),
    "GS476": (
        "tests/watcher/test_buffer_graph_grows.py",
        "test_a_buffer_accumulated_with_autograd_on_is_named",
    ),
    "GS460": (
        "tests/watcher/test_watch_range_test.py",
        "test_only_training_that_starts_above_the_tests_first_losses_is_named",
    ),
    "GS461": (
        "tests/watcher/test_watch_grad_mode_off.py",
        "test_grad_mode_left_off_after_an_evaluation_is_named",
    ),
    "GS467": (
        "tests/watcher/test_watch_derivative_cut.py",
        "test_forces_taken_without_create_graph_in_training_are_named",
    ),
    "GS468": (
        "tests/watcher/test_watch_loss_without_graph.py",
        "test_an_action_taken_out_of_the_graph_is_named",
    ),
    "GS474": (
        "tests/watcher/test_watch_hvp_graph.py",
        "test_a_hessian_vector_product_without_create_graph_is_named",
    ),
    "GS469": (
        "tests/watcher/test_watch_zero_weight.py",
        "test_a_weight_that_never_ramps_up_is_named",
    ),
    "GS470": (
        "tests/watcher/test_watch_hook_again.py",
        "test_an_implicit_hook_registered_twice_is_named_at_its_line",
    ),
    "GS471": (
        "tests/watcher/test_future_attention.py",
        "test_a_gpt_whose_attention_sees_later_tokens_is_named",
    ),
    "GS472": (
        "tests/watcher/test_watch_reapplied.py",
        "test_an_estimate_written_only_once_is_applied_again_at_every_step",
    ),
    "GS473": (
        "tests/watcher/test_watch_same_grads.py",
        "test_gradients_copied_back_from_a_buffer_made_once_are_named",
    ),
    "GS475": (
        "tests/watcher/test_ema_reversed.py",
        "test_an_ema_update_with_its_arguments_swapped_is_named",
    ),
    "GS477": (
        "tests/watcher/test_watch_upstream_target.py",
        "test_a_target_the_prediction_is_computed_from_is_named",
    ),
    "GS478": (
        "tests/watcher/test_worse_than_chance.py",
        "test_an_s4d_kernel_without_the_minus_is_named_at_its_first_step",
    ),
    "GS479": (
        "tests/watcher/test_self_normalised.py",
        "test_td3_bc_normaliser_left_attached_is_named",
    ),
    "GS463": (
        "tests/watcher/test_watch_schedule_pace.py",
        "test_a_schedule_sized_in_steps_stepped_per_epoch_is_named",
    ),
    "GS462": (
        "tests/watcher/test_watch_adam_betas.py",
        "test_swapped_betas_are_named_with_the_order_that_fixes_them",
    ),
    "GS464": (
        "tests/watcher/test_watch_ensemble_copies.py",
        "test_members_copied_and_fed_one_order_are_named_once",
    ),
    "GS465": (
        "tests/watcher/test_watch_padding_in_loss.py",
        "test_padding_kept_in_the_labels_is_named",
    ),
    "GS466": (
        "tests/watcher/test_watch_trials.py",
        "test_an_optimizer_built_from_an_earlier_trials_parameters_is_named",
    ),
    "GS489": (
        "tests/watcher/test_ste_without_detach.py",
        "test_ternary_weights_without_detach_are_named_though_they_get_a_gradient",
    ),
    "GS488": (
        "tests/watcher/test_lr_negative.py",
        "test_a_linear_decay_stepped_past_its_end_is_named_with_its_scheduler",
    ),
}
"""Rule id → a test that makes it fire (on a real model or script, or on the data of one) and
looks for it by id or slug."""


def _test_source(path: str, name: str) -> str | None:
    """The source of the test function `name` in `path`, None if there is no such test."""
    source = (ROOT / path).read_text(encoding="utf-8")
    for node in ast.parse(source).body:
        if isinstance(node, ast.FunctionDef) and node.name == name:
            return ast.get_source_segment(source, node)
    return None


def test_every_rule_is_declared_with_its_stage_docs_and_a_test_that_makes_it_fire():
    declared = [rid for stage in Stage for rid in registry.declared(stage)]
    assert set(declared) == set(RULES), "every rule of every family is declared with @rule"
    assert set(FIRES) == set(declared), "add the test that makes the new rule fire to FIRES"
    for rid in declared:
        r, doc = RULES[rid], registry.DOCS[rid]
        assert r.source in rule_docs.STAGES, rid
        assert doc.why and doc.example and doc.fix, rid
        assert rule_docs.DOCS[rid] is doc, rid
        test = _test_source(*FIRES[rid])
        assert test is not None, f"{rid}: no test {'::'.join(FIRES[rid])}"
        looks = f'"{rid}"' in test or f'"{r.slug}"' in test
        assert looks, f"{rid}: {'::'.join(FIRES[rid])} does not look for it"


def test_every_watch_rule_is_declared_on_its_check():
    """A GS4xx rule added to findings.RULES by hand would have no check that the judge runs."""
    assert {r.id for r in RULES.values() if r.source == "watch"} == set(
        registry.declared(Stage.WATCH)
    )
    assert watch.CHECKS == registry.checks(Stage.WATCH)
    assert len(set(watch.CHECKS)) == len(watch.CHECKS)  # one check, one rule


def test_the_per_run_checks_run_in_the_order_their_modules_declare_them():
    """One registration path for the per-run rules too; a report lists their findings in
    this order."""
    assert list(per_run.CHECKS) == [
        *("GS109", "GS101", "GS102", "GS103", "GS104", "GS105", "GS106", "GS108", "GS107"),
        *("GS301", "GS432"),
    ]
    assert set(per_run.CHECKS) == set(registry.declared(Stage.RUN))


def test_the_why_is_the_checks_docstring():
    (check,) = [c for c in watch.CHECKS if c.__name__ == "update_ratio_low"]
    assert registry.DOCS["GS410"].why == registry.why_of(check)
    assert registry.DOCS["GS410"].why.startswith("After warmup-steps, a parameter's median")


def test_every_rules_why_is_its_functions_docstring():
    for stage in Stage:
        for rid, check in registry.in_declared_order(stage).items():
            assert registry.DOCS[rid].why == registry.why_of(check), rid
    assert registry.DOCS["GS301"].why.startswith("After the backward a module attribute")


OBJECTIVE_MATTERS = ("GS104", "GS105", "GS432")
"""The inspect rules whose verdict depends on the loss: its reduction (GS104's bounds are
per summed term), its scale (GS105's absolute bound), its kind (GS432 judges what feeds
a cross-entropy)."""


def test_every_watch_rule_says_which_objectives_it_judges_and_why():
    """Issue 39: the rule pages say, per rule, which objectives it judges and why; the diff's
    rules too (GS6xx: two models or runs compared, and GS608, a run's loss that did not
    fall), as `watch --against` reports GS607-GS609 beside the watch rules."""
    diff = registry.declared(Stage.DIFF)
    assert len(diff) == 9
    for rid in (*registry.declared(Stage.WATCH), *OBJECTIVE_MATTERS, *diff):
        which, colon, why = registry.DOCS[rid].objectives.partition(": ")
        assert which and colon and len(why) > 20, f"{rid}: objectives='which: why' is missing"
    page = rule_docs.markdown()
    judged = page.count("\n**Objectives judged.** ")
    assert judged == sum(bool(d.objectives) for d in registry.DOCS.values())
    assert judged >= len(registry.declared(Stage.WATCH)) + len(OBJECTIVE_MATTERS)


@pytest.mark.parametrize(
    ("rid", "says"),
    [
        ("GS414", "A single recognised objective"),  # trend_doubt: the rest get info
        ("GS415", "A single recognised objective"),
        ("GS402", "regression term"),  # spikes by design are information
        ("GS418", "maximize=True"),
        ("GS419", "only for a single recognised objective"),
        ("GS403", "Any: the total gradient norm"),
        ("GS412", "Any: whether .grad is reset between steps"),
        ("GS432", "cross-entropy or binary_cross_entropy_with_logits"),
        ("GS601", "what the loss means does not enter"),
        ("GS607", "two runs compared with each other"),
        ("GS608", "Any whose loss should fall"),
    ],
)
def test_the_objectives_line_is_on_the_rule_s_page(rid, says):
    section = rule_docs.markdown().split(f"### {rid} ")[1].split("\n### ")[0]
    (line,) = [ln for ln in section.splitlines() if ln.startswith("**Objectives judged.** ")]
    assert says in line and line.endswith(".")
    assert section.index("**Why it fires.**") < section.index(line) < section.index("**Fix.**")


def test_what_a_rule_supersedes_is_declared_and_known():
    assert registry.SUPERSEDES == {
        "GS412": ("GS419",),
        "GS417": ("GS410",),
        "GS418": ("GS419",),
        "GS420": ("GS419",),
        "GS423": ("GS419",),
        "GS424": ("GS419",),
        "GS435": ("GS430",),
        "GS436": ("GS419",),
        "GS438": ("GS419",),
        "GS452": ("GS419",),
        "GS488": ("GS436",),
    }
    assert all(set(v) <= set(RULES) for v in registry.SUPERSEDES.values())


def _declare(rule_id: str, row: str = "spike"):
    return rule(
        rule_id,
        "made-up",
        Severity.INFO,
        row,
        Stage.WATCH,
        "a rule for the test",
        example="none",
        fix="none",
    )


def test_a_declaration_without_a_why_a_row_or_a_new_id_is_refused():
    def no_docstring(run, t):
        return []

    with pytest.raises(ValueError, match="needs a docstring"):
        _declare("GS499")(no_docstring)
    with pytest.raises(ValueError, match="declared twice"):
        _declare("GS401")
    with pytest.raises(ValueError, match="no troubleshooting row"):
        _declare("GS499", row="no-such-row")
    assert "GS499" not in RULES and "GS499" not in registry.DOCS
