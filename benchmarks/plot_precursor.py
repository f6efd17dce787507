"""The picture of docs/watch.md's Precursors section: one corpus run's precursor signal
against its loss, the warning and the divergence marked.

Runs tests/watcher/precursor/logit_gpt.py MODE under `watch` (the attention-logit run by
default, about a minute on a CPU), then draws its loss and the largest attention logit of
each attention module (every 16th step, as the watch sampled it), a line at the step
GS453 was first certain and one where the loss diverged (its next 16 steps 1.3× the
median of the 50 before).

    python benchmarks/plot_precursor.py [--mode attn] [--out docs/img/attention_precursor.png]
"""

from __future__ import annotations

import argparse
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "tests" / "watcher" / "precursor" / "logit_gpt.py"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mode", default="attn")
    parser.add_argument("--out", default=str(ROOT / "docs" / "img" / "attention_precursor.png"))
    args = parser.parse_args()

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from gradscope.watcher import watch_script
    from tests.watcher.precursor.test_logit_runs import diverged_at

    report = watch_script(str(SCRIPT), [args.mode])
    losses = [(r.step, r.loss) for r in report.run.steps if r.loss is not None]
    warned = next((f for f in report.findings if f.rule == "GS453"), None)
    broke = diverged_at(losses)

    fig, (top, bottom) = plt.subplots(2, 1, sharex=True, figsize=(8, 5.5), dpi=110)
    top.plot([s for s, _ in losses], [v for _, v in losses], lw=0.8, color="0.25")
    top.set_ylabel("loss")
    for s in report.run.state_facts.attention:
        bottom.plot(s.steps, s.maxima, marker=".", lw=1.2, label=s.module)
    bottom.set_yscale("log")
    bottom.set_ylabel("largest attention logit")
    bottom.set_xlabel("step")
    bottom.axhline(100, color="0.6", lw=0.8, ls=":")
    for ax in (top, bottom):
        if warned is not None:
            ax.axvline(warned.steps[0], color="tab:orange", lw=1.5)
        if broke is not None:
            ax.axvline(broke, color="tab:red", lw=1.5, ls="--")
    if warned is not None:
        top.annotate(
            f"GS453 warns (step {warned.steps[0]})",
            (warned.steps[0], top.get_ylim()[1]),
            xytext=(4, -14),
            textcoords="offset points",
            color="tab:orange",
        )
    if broke is not None:
        top.annotate(
            f"diverged (step {broke})",
            (broke, top.get_ylim()[1]),
            xytext=(-108, -14),
            textcoords="offset points",
            color="tab:red",
        )
    bottom.legend(loc="lower right", frameon=False)
    top.set_title(f"logit_gpt.py {args.mode}: attention logits against the loss")
    fig.tight_layout()
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(args.out)
    when = warned.steps[0] if warned is not None else None
    print(f"{args.out}: GS453 at {when}, diverged at {broke}")
    for f in report.findings:
        print(f"  {f.rule} steps {list(f.steps[:3])} lead {f.lead} explained_by {f.explained_by}")


if __name__ == "__main__":
    main()
