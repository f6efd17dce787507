"""Cause first (rules/causes.py): a symptom in the same optimizer's steps points to its
cause, its advice no longer contradicts it, causes lead; unrelated findings are left be."""

from __future__ import annotations

from gradscope.findings import RULES
from gradscope.rules import causes
from gradscope.steps.records import ParamInfo, WatchRun
from tests.watcher.watch_scripts import step_record


def _run(optimizers: tuple[str, ...] = ("Adam",), members=((0,),)) -> WatchRun:
    params = tuple(ParamInfo(f"m{i}.weight", (4, 4), True, True, 0.1) for i in range(len(members)))
    return WatchRun(
        "t",
        params,
        [step_record(1)],
        "completed",
        1.0,
        optimizers=optimizers,
        members=members,
    )


def _finding(rule: str, subject: str = "loss"):
    return RULES[rule].finding(subject, f"{rule} message", "lower the learning rate")


def test_symptoms_point_to_their_cause_which_leads():
    spike, reset, other = _finding("GS403"), _finding("GS412", "gradients"), _finding("GS411")
    out = causes.link(_run(), [spike, other, reset])
    assert [f.rule for f in out] == ["GS412", "GS411", "GS403"]
    assert out[2].explained_by == "GS412:gradients"
    assert "grads-not-reset (GS412): fix that first" in out[2].advice
    assert out[1].explained_by is None and out[1].advice == "lower the learning rate"


def test_a_deeper_cause_drops_the_shallower_and_explains_its_symptoms():
    lr, maxed, stall = _finding("GS419"), _finding("GS418"), _finding("GS414")
    from dataclasses import replace

    out = causes.link(_run(), [lr, stall, replace(maxed, subject="objective")])
    assert [f.rule for f in out] == ["GS418", "GS414"]  # GS419 dropped, GS414 to GS418
    assert out[1].explained_by == "GS418:objective"


def test_a_finding_the_cause_makes_untrue_is_dropped():
    lr, decay, stall = _finding("GS419"), _finding("GS420", "param group 0"), _finding("GS415")
    out = causes.link(_run(), [lr, decay, stall])
    assert [(f.rule, f.explained_by) for f in out] == [
        ("GS420", None),
        ("GS415", "GS420:param group 0"),
    ]


def test_an_ignored_cause_explains_nothing():
    from dataclasses import replace

    reset = replace(_finding("GS412", "gradients"), ignored_by="GS412:*")
    out = causes.link(_run(), [reset, _finding("GS403")])
    assert all(f.explained_by is None for f in out)


def test_with_several_optimizers_only_the_causes_own_optimizer_is_explained():
    run = _run(("Adam", "Adam"), ((0,), (1,)))
    d, g = run.optimizer_label(0), run.optimizer_label(1)
    reset = _finding("GS412", f"gradients ({d})")
    own, theirs = _finding("GS403", f"total-grad-norm ({d})"), _finding("GS403", f"loss ({g})")
    param = _finding("GS409", "m0.weight")
    out = {f.subject: f for f in causes.link(run, [reset, own, theirs, param])}
    assert out[own.subject].explained_by == reset.rule + ":" + reset.subject
    assert out["m0.weight"].explained_by is not None
    assert out[theirs.subject].explained_by is None


def test_a_cause_about_a_parameter_supersedes_only_that_parameters_findings():
    """GS417 (frozen midway) drops GS410 (not updated) of the same parameter, not another's;
    an ignored GS417 drops nothing."""
    from dataclasses import replace

    one = _run()
    run = replace(one, params=(*one.params, replace(one.params[0], name="m1.weight")))
    stopped = _finding("GS417", "m0.weight")
    low = [_finding("GS410", "m0.weight"), _finding("GS410", "m1.weight")]
    assert [f.subject for f in causes.superseded(run, [stopped, *low]) if f.rule == "GS410"] == [
        "m1.weight"
    ]
    ignored = replace(stopped, ignored_by="GS417:*")
    assert len(causes.superseded(run, [ignored, *low])) == 3


def _losses_run(losses: list[float], optimizers=("Adam",)) -> WatchRun:
    return WatchRun(
        "t",
        (ParamInfo("m0.weight", (4, 4), True, True, 0.1),),
        [step_record(k + 1, loss=v) for k, v in enumerate(losses)],
        "completed",
        1.0,
        optimizers=optimizers,
        members=tuple((0,) for _ in optimizers),
    )


def _precursor(step: int):
    from dataclasses import replace

    return replace(_finding("GS453", "h.1.attn"), steps=(step,))


def test_a_verdict_on_the_whole_run_gets_the_lead_to_the_step_the_loss_diverged():
    # healthy at 2.2, a spike at 220 the loss comes back from, then from 520 at ln 27 for good
    losses = [2.2 + 0.02 * (k % 3) for k in range(600)]
    losses[220:236] = [2.9] * 16
    losses[520:] = [3.3] * 80
    stall = _finding("GS415")
    (_, symptom) = causes.link(_losses_run(losses), [stall, _precursor(144)])
    assert symptom.explained_by == "GS453:h.1.attn" and symptom.lead == 521 - 144
    assert "warned 377 steps before" in symptom.advice
    # a loss that came back, several optimizers, or a warning after the blow-up: no lead
    recovered = _losses_run(losses[:500])
    several = _losses_run(losses, ("Adam", "Adam"))
    late = causes.link(_losses_run(losses), [stall, _precursor(560)])
    assert [f.lead for f in causes.link(recovered, [stall, _precursor(144)])] == [None, None]
    assert all(f.lead is None for f in causes.link(several, [stall, _precursor(144)]))
    assert all(f.lead is None for f in late)


def test_the_divergence_step_is_the_loss_s_own_blow_up_or_its_first_non_finite_value():
    from gradscope.rules.loss_diverged import diverged_at

    flat = [(k, 2.0) for k in range(1, 301)]
    assert diverged_at(flat) is None and diverged_at([]) is None
    assert diverged_at([*flat[:100], (101, float("nan"))]) == 101
    up = flat[:200] + [(k, 4.0) for k in range(201, 301)]
    assert diverged_at(up) == 201
    assert diverged_at(up[:250] + flat[250:]) is None  # came back: no divergence
