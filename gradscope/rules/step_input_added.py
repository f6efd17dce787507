"""An input's backward calls applied to the weights (GS455): backward calls made for an
input's gradient (PGD's attack on `x + delta` by `loss.backward()`) whose parameter
gradients no reset cleared before the training backward, so the update applies them too.
The watcher sees it from the calls' graphs (`StepRecord.input_added`): no threshold
decides it. No torch."""

from __future__ import annotations

from gradscope.config import Thresholds
from gradscope.findings import Finding, Rule, Severity
from gradscope.rules.registry import DECLARED, Stage, rule
from gradscope.rules.step_common import about, by_optimizer, step_list
from gradscope.rules.symptoms import DIVERGENCE
from gradscope.steps.records import WatchRun
from gradscope.steps.step_record import input_checked


@rule(
    "GS455",
    "input-grads-applied",
    Severity.ERROR,
    "wiped",
    Stage.WATCH,
    "watch: backward calls made for an input's gradient (an adversarial attack) left their "
    "parameter gradients in .grad, and the step applied them with the training gradient",
    example="PGD: `for _ in range(K): loss(model(x + delta)).backward(); delta.data += "
    "a * delta.grad.sign()`, then `loss(model(x + delta)).backward(); opt.step()` with no "
    "model.zero_grad() between: the update sums K attack gradients and the training one",
    fix="clear the parameters' gradients after the attack (model.zero_grad() or "
    "optimizer.zero_grad() before the training forward), or take the input's gradient with "
    "torch.autograd.grad(loss, [delta]), which leaves .grad alone",
    objectives=(
        "any: which leaves each backward call reached and the order of the resets, a "
        "mechanism independent of what the loss means"
    ),
    explains=DIVERGENCE,  # the calls' parameter gradients pile into every update
)
def input_grads_applied(run: WatchRun, t: Thresholds, *, this: Rule = DECLARED) -> list[Finding]:
    """At more than half the steps with several backward calls (those walked: steps 1-3
    and every 16th), the first call gave a
    gradient to an input (a leaf tensor that is neither an nn.Parameter nor any optimizer's:
    `delta` of an attack), the last call did not (or the script reset that input's
    gradient between the first two calls, not the parameters': an EBM's Langevin sampler
    by backward, whose sample the training forward then reads, leaf and all), and no reset
    of the gradients came between them, and the first call reached weights the last
    reached too: the calls made for the input also added their parameter gradients, which
    the update applied with the training gradient (the attack's ascent direction at other
    points, K times the weight). Healthy scripts clear them (model.zero_grad()) or take the
    input's gradient by autograd.grad; those are silent (GS435 does not name that reset),
    as is a first call reaching its input through a gradient taken with create_graph (a
    gradient penalty's own backward, whose parameter gradients the step means to apply),
    and one whose weights no later call reaches (GradCache's loss on cached
    representations, then each chunk re-encoded with backward(rep.grad))."""
    out = []
    for s in by_optimizer(run):
        steps = [r for r in s.live() if r.backward_calls > 1 and input_checked(r.step)]
        added = [r for r in steps if r.input_added]
        if not added or len(added) * 2 <= len(steps):
            continue
        calls = max(r.backward_calls for r in added)
        out.append(
            about(
                this.finding(
                    s.subject("optimizer.zero_grad"),
                    s.say(
                        f"at {len(added)} of {len(steps)} steps the first of its {calls} "
                        "backward calls was made for an input's gradient (a tensor in no "
                        "optimizer that the last call did not reach, or whose gradient the "
                        "script reset between calls) and no reset of the parameters' came "
                        "before the training backward: the update applied the parameter "
                        "gradients of those calls too"
                    ),
                    "clear the gradients after the input's backward calls (model.zero_grad() "
                    "before the training forward), turn the parameters' requires_grad off "
                    "while sampling or attacking, or take the input's gradient with "
                    "torch.autograd.grad(loss, [x]), which leaves the parameters' .grad alone",
                    evidence=(f"steps that applied them: {step_list([r.step for r in added])}",),
                ),
                (r.step for r in added),
            )
        )
    return out
