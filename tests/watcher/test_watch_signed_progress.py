"""GS415's evidence for a loss that reached 0 or below (GRPO's: 0 at its first steps by
construction, a clipped ratio times advantages of mean 0, then the KL to its reference grows):
its change from the start, not a percentage of a start near 0 (it read +1151713378.2%)."""

from __future__ import annotations

from test_watch_rules_series import found, rec, run_of

from gradscope.findings import Severity


def grpo_like(n=60):
    """GRPO's loss: 0 at its first steps by construction (ratio 1, advantages of mean 0 in
    each group), then the KL to the reference grows as the policy learns: signed, near 0."""
    out = []
    for s in range(1, n + 1):
        loss = -1e-8 if s <= 2 else (-0.05 + 0.15 * s / n) * (1 + 0.1 * (s % 3))
        out.append(rec(s, loss, 0.5))
    return out


def test_a_loss_that_starts_at_zero_gets_its_change_not_a_percentage():
    (f,) = found(run_of(grpo_like(), kind=None))["GS415"]
    assert f.severity == Severity.INFO
    assert "%" not in f.evidence[0] and "from the start)" in f.evidence[0], f.evidence[0]
    (healthy_worse,) = found(run_of([rec(s, 1.0 + s / 60, 0.5) for s in range(1, 61)]))["GS415"]
    assert "%)" in healthy_worse.evidence[0]  # a positive loss keeps its percentage
