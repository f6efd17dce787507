"""The precursors' sampled signals in the watch JSON (`precursors`): Adam's state per
tensor at its sampled steps by name, the largest attention logit per module, the output
logits' log-partition, as the rules read them; the output head's and the norm gains'
weight norms beside it."""

from __future__ import annotations

import json

from watch_scripts import watched

from gradscope.safe_json import dumps


def test_the_json_holds_adams_per_tensor_samples_and_the_logits():
    report = watched("logit_heads.py", "50")
    doc = json.loads(dumps(report.to_dict()))
    facts = report.run.state_facts
    adam = doc["precursors"]["adam"]
    assert facts.adam and len(adam) == len(facts.adam)
    names = [p.name for p in report.run.params]
    for sample, entry in zip(facts.adam, adam, strict=True):
        assert entry["step"] == sample.step and entry["optimizer"] == sample.optimizer
        assert [t["name"] for t in entry["tensors"]] == [names[i] for i, *_ in sample.tensors]
        assert [
            (t["rms_t"], t["update_rms_over_lr"], t["eps_share"]) for t in entry["tensors"]
        ] == [tuple(rest) for _, *rest in sample.tensors]
    assert all(0 < t["update_rms_over_lr"] < 2 for e in adam for t in e["tensors"])
    attention = {a["module"]: (a["steps"], a["max_logit"]) for a in doc["precursors"]["attention"]}
    assert attention == {a.module: (list(a.steps), list(a.maxima)) for a in facts.attention}
    out = doc["precursors"]["output_logits"]
    assert out["classes"] == 11 and out["steps"] == [16, 32, 48]
    assert out["mean_log_z"] == list(facts.output_logits.mean)
    weights = doc["precursors"]["weights"]
    assert [(w["name"], w["kind"]) for w in weights] == [
        ("head.weight", "head"),
        ("fused.q_norm.weight", "norm gain"),
        ("fused.k_norm.weight", "norm gain"),
    ]
    assert all(w["steps"] == [16, 32, 48] and min(w["norm"]) > 0 for w in weights)
