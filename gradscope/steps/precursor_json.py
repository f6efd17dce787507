"""The precursors' sampled signals in the JSON report (`precursors`): Adam's state per
tensor at its sampled steps, the largest attention logit per module, the output logits'
log-partition. What GS451, GS453 and GS454 judged, so a reader can plot or re-judge it.
No torch."""

from __future__ import annotations

from typing import Any

from gradscope.steps.records import WatchRun


def precursors(run: WatchRun) -> dict[str, Any]:
    """{adam: [...], attention: [...], output_logits: {...} | None, weights: [...]}."""
    facts = run.state_facts
    names = run.names()
    out = facts.output_logits
    return {
        "adam": [
            {
                "optimizer": s.optimizer,
                "step": s.step,
                "tensors": [
                    {
                        "name": names[i] if i < len(names) else str(i),
                        "rms_t": rms_t,
                        "update_rms_over_lr": update,
                        "eps_share": eps,
                    }
                    for i, rms_t, update, eps in s.tensors
                ],
            }
            for s in facts.adam
        ],
        "attention": [
            {"module": a.module, "steps": list(a.steps), "max_logit": list(a.maxima)}
            for a in facts.attention
        ],
        "output_logits": None
        if out is None
        else {
            "classes": out.classes,
            "steps": list(out.steps),
            "mean_log_z": list(out.mean),
            "max_log_z": list(out.max),
        },
        "weights": []
        if out is None
        else [
            {"name": w.name, "kind": w.kind, "steps": list(out.steps), "norm": list(w.norms)}
            for w in out.weights
        ],
    }
