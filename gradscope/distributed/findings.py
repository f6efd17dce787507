"""The findings of a distributed run (GS501-GS507), each declared on the function that
makes it; the session (session.py) calls them with what a gathering or DDP's error showed.
No torch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gradscope.distributed import reduction
from gradscope.findings import RULES, Finding, Severity
from gradscope.rules.registry import Stage, rule

if TYPE_CHECKING:  # types only: gradscope/__init__ loads this module on every command
    from gradscope.distributed.fingerprint import Divergence

DDP_EXAMPLE = "gradscope watch gradscope/examples/ddp_train.py --nproc-per-node 2 -- "
"""The shipped DDP script under two ranks: its --bug flags make these rules fire."""


def _why(cause: str | None) -> str:
    return reduction.CAUSE_WORDS.get(cause or "", "it took no part in the loss")


@rule(
    "GS501",
    "ddp-unused-param",
    Severity.ERROR,
    "ddp-usage",
    Stage.DISTRIBUTED,
    "a DDP parameter got no gradient in a step (module never ran, output not in the loss, graph "
    "cut)",
    example="a module that never runs, under find_unused_parameters=True",
    fix=(
        "remove the module or freeze it, or put its output in the loss; then drop "
        "find_unused_parameters"
    ),
    command=DDP_EXAMPLE + "--find-unused --bug unused",
)
def unused_parameter(name: str, cause: str | None) -> Finding:
    """In every sampled step a DDP parameter got no gradient on any rank: its module never ran,
    its output is not in the loss, or the graph is cut. DDP tolerates this only with
    find_unused_parameters=True, at a cost every step."""
    return RULES["GS501"].finding(
        name,
        f"no gradient in the DDP step: {_why(cause)}",
        reduction.advice("unused", cause, False),
    )


@rule(
    "GS502",
    "ddp-rank-dependent",
    Severity.ERROR,
    "ddp-usage",
    Stage.DISTRIBUTED,
    "a DDP parameter was used on some ranks and not on others (rank-dependent control flow)",
    example="a module that only rank 1 runs",
    fix="run the same modules on every rank (no branch on dist.get_rank() in forward)",
    command=DDP_EXAMPLE + "--find-unused --bug rank-branch",
)
def rank_dependent(
    name: str, cause: str | None, ranks: tuple[int, ...], finds_unused: bool
) -> Finding:
    """A DDP parameter got its gradient on some ranks and not on others in every sampled step:
    control flow that depends on the rank or on its data."""
    where = f" on rank {', '.join(map(str, ranks))} only" if ranks else ""
    return RULES["GS502"].finding(
        name,
        f"no gradient{where}: {_why(cause)}; the other ranks used it",
        reduction.advice("unused", cause, True, finds_unused),
    )


@rule(
    "GS503",
    "ddp-ready-twice",
    Severity.ERROR,
    "ddp-usage",
    Stage.DISTRIBUTED,
    "a DDP parameter received its gradient twice in one backward (reentrant checkpoint)",
    example="one layer checkpointed twice with use_reentrant=True",
    fix="checkpoint with use_reentrant=False, or wrap with DDP(static_graph=True)",
)
def ready_twice(name: str) -> Finding:
    """A DDP parameter received its gradient twice in one backward, which DDP without
    static_graph rejects as marked ready twice."""
    return RULES["GS503"].finding(
        name,
        f"marked ready twice: {_why('used-twice')}",
        reduction.advice("unused", "used-twice", False),
    )


@rule(
    "GS504",
    "ddp-reduction-error",
    Severity.ERROR,
    "ddp-usage",
    Stage.DISTRIBUTED,
    "the script died with DDP's reduction error; its parameter indices, named and explained",
    example="a module that never runs, without find_unused_parameters",
    fix=(
        "the advice for the cause: use or remove the parameter, the same control flow on every "
        "rank, or find_unused_parameters=True for a set that truly varies"
    ),
    command=DDP_EXAMPLE + "--bug unused",
)
def reduction_error(
    name: str, cause: str | None, varies: bool, evidence: tuple[str, ...] = (), kind: str = "unused"
) -> Finding:
    """The script died with DDP's reduction error (Expected to have finished reduction in the
    prior iteration, or marked ready twice). Its parameter indices are turned into names, with
    the cause gradscope saw: never ran, not in the loss, cut by .detach(), used on another rank,
    used twice."""
    if varies:
        message = "no gradient on this rank, used on others: rank-dependent control flow"
    elif kind == "ready-twice":
        message = f"marked ready twice: {_why(cause)}"
    else:
        message = f"no gradient in the DDP step: {_why(cause)}"
    return RULES["GS504"].finding(
        name, message, reduction.advice(kind, cause, varies), evidence=evidence
    )


@rule(
    "GS505",
    "rank-divergence",
    Severity.ERROR,
    "replicas",
    Stage.DISTRIBUTED,
    "replicated weights, gradients or buffers differ between ranks",
    example="rank 1 nudges one weight element after step 3",
    fix=(
        "keep replicas bitwise equal: the same seed (or broadcast rank 0's state), no rank-local "
        "weight or buffer updates, SyncBatchNorm or broadcast_buffers=True"
    ),
    command=DDP_EXAMPLE + "--bug perturb",
)
def divergence(div: Divergence, steps: list[int]) -> Finding:
    """At a gathering (the first step, every 100 forwards, the end), the fingerprints (sum and L2
    norm) of replicated weights, gradients or buffers differ between ranks; the first such tensor
    is named."""
    evidence: tuple[str, ...] = (f"{div.count} tensor(s) differ in all",)
    if len(set(steps)) > 1:
        evidence += (f"optimizer steps per rank: {steps}",)
    return RULES["GS505"].finding(
        div.name,
        div.sentence(),
        "replicas must stay bitwise equal: initialise from the same seed (or broadcast "
        "rank 0's state), never update weights or buffers on one rank only, and sync "
        "BatchNorm statistics (SyncBatchNorm or broadcast_buffers=True)",
        evidence=evidence,
    )


@rule(
    "GS506",
    "rank-outlier-grad",
    Severity.WARNING,
    "replicas",
    Stage.DISTRIBUTED,
    "a rank's local (pre-all-reduce) gradient norm is an outlier or non-finite",
    example="rank 1's data shard has its targets in other units, x100",
    fix=(
        "check that rank's data shard (corrupt, mislabelled or scaled samples) and any code that "
        "runs on that rank only"
    ),
    command=DDP_EXAMPLE + "--bug bad-shard",
)
def outlier_rank(rank: int, norms: list[float], hits: int, sampled: int) -> Finding:
    """A rank's local gradient norm before the all-reduce is non-finite, or more than 10 times
    the median of the other ranks', in two sampled steps (or the only one)."""
    per = ", ".join(f"rank {r}: {v:.4g}" for r, v in enumerate(norms))
    return RULES["GS506"].finding(
        f"rank {rank}",
        f"rank {rank}'s local gradient norm before the all-reduce stands out ({per})",
        f"check rank {rank}'s data shard (corrupt, mislabelled or differently scaled "
        "samples) and any code that runs on that rank only",
        evidence=(f"an outlier in {hits} of {sampled} sampled step(s)",),
        value=norms[rank],
    )


@rule(
    "GS507",
    "rank-skipped-step",
    Severity.ERROR,
    "replicas",
    Stage.DISTRIBUTED,
    "a rank took fewer optimizer steps than the others",
    example="rank 1 skips its third optimizer step",
    fix=(
        "step every rank together: no rank-local continue, NaN check or GradScaler state that "
        "differs"
    ),
    command=DDP_EXAMPLE + "--bug skip",
)
def skipped_step(rank: int, steps: list[int]) -> Finding:
    """A rank took fewer optimizer steps than the others (counted at each gathering)."""
    return RULES["GS507"].finding(
        f"rank {rank}",
        f"rank {rank} took {steps[rank]} optimizer steps, others up to {max(steps)}",
        "look for a step skipped on one rank only (a rank-local `continue`, a NaN check or "
        "GradScaler state that differs): every rank must step together",
        value=float(steps[rank]),
        threshold=float(max(steps)),
    )
