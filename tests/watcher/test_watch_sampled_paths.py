"""A one-shot NAS supernet draws one choice block per layer at each step: the others get no
gradient and the optimizer does not move them then, so their update ratio is 0 at most
sampled steps. Under a linear decay whose last scheduler.step() leaves the lr at 0, GS410
read that 0 as the learning rate of every step and warned on every choice block that
"its param group's learning rate is 0". The steps' own learning rates say it was not: a
block is judged over the steps it had a gradient. A choice never drawn is still named
(GS413), and a param group at lr 0 throughout still is (GS410)."""

from __future__ import annotations

from tests.watcher.watch_scripts import domain_watched


def _found(mode: str) -> dict[str, list[str]]:
    report = domain_watched("supernet_paths.py", mode)
    assert not report.faults, report.internal_error()
    found: dict[str, list[str]] = {}
    for f in report.findings:
        found.setdefault(f.rule, []).append(f.subject)
    return found


def test_blocks_drawn_at_some_steps_under_a_decay_to_zero_are_healthy():
    assert _found("spos") == {}


def test_a_choice_never_drawn_is_still_named():
    found = _found("never")
    assert set(found) == {"GS413"}
    never = [f"choices.{k}.2.{w}" for k in (0, 1) for w in ("bias", "weight")]
    assert sorted(found["GS413"]) == never


def test_a_group_at_lr_zero_throughout_still_warns():
    found = _found("lr0")
    assert "GS410" in found and all(s.startswith("choices.") for s in found["GS410"])
    assert "choices.0.0.weight" in found["GS410"]
