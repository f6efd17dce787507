"""The per-run rules stay near-linear in modules and parameters (no torch).

Three shapes that once made them cubic: thousands of alike siblings all idle (a deep
Sequential whose gradient vanished to zeros), a wide ModuleList, many routed experts.
Each is judged at 10,000 modules within a bound hundreds of times what a linear pass takes
here and far below what the cubic one did (minutes at 1,000 modules)."""

from __future__ import annotations

import time

from fabricated import param, stats

from gradscope import rules
from gradscope.stats import ModuleStats, RunStats

BOUND_S = 5.0


def judged_within_bound(run: RunStats) -> list:
    start = time.perf_counter()
    found = rules.diagnose(run)
    elapsed = time.perf_counter() - start
    assert elapsed < BOUND_S, f"rules took {elapsed:.1f} s on {len(run.modules)} modules"
    return found


def test_ten_thousand_alike_siblings_with_zero_gradients():
    n = 10_000
    run = stats(*(param(f"{i}.weight", 0.0, shape=(2, 2), depth=i) for i in range(n)))
    found = judged_within_bound(run)
    assert sum(f.slug == "zero-grad" for f in found) == n  # no router: nothing excused


def test_a_wide_module_list_with_skipped_members():
    n = 10_000
    params = [param(f"branches.{i}.weight", None if i % 4 == 0 else 0.1) for i in range(n)]
    ran = tuple(f"branches.{i}" for i in range(n) if i % 4)
    found = judged_within_bound(stats(*params, ran=ran))
    assert sum(f.slug == "none-grad" for f in found) == n // 4


def test_many_experts_most_of_them_idle():
    n = 5_000  # two modules each: the expert and its Linear
    params = [param("router.weight", 0.1, shape=(n, 8))]
    modules = [ModuleStats("", "MoE", True, 0), ModuleStats("router", "Linear", True, 1)]
    modules.append(ModuleStats("experts", "ModuleList", False))
    for i in range(n):
        busy = i < 3
        params.append(param(f"experts.{i}.fc.weight", 0.1 if busy else None, shape=(8, 8)))
        modules.append(ModuleStats(f"experts.{i}", "Expert", busy, 2 * i + 2 if busy else None))
        modules.append(ModuleStats(f"experts.{i}.fc", "Linear", busy, 2 * i + 3 if busy else None))
    run = RunStats(**{**stats(*params).__dict__, "modules": tuple(modules)})
    found = judged_within_bound(run)
    idle = [f for f in found if f.slug == "idle-expert"]
    assert len(idle) == n - 3 and not [f for f in found if f.slug == "none-grad"]
    assert f"{n - 3} of {n} experts idle" in idle[0].message
