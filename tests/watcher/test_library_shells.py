"""torchsde's sdeint wraps the script's SDE in modules of its own (ForwardSDE, AdjointSDE)
that live while the solve's graph does: at the first backward they were the outermost
modules owning the parameters, and every name took their path (`_base_sde.g.0.weight`,
`forward_sde._base_sde.g.0.weight`), names the script never wrote. The model the script
holds names them; a wrapper of the script's own class keeps its path."""

from __future__ import annotations

from tests.watcher.watch_scripts import domain_watched


def _names(mode: str) -> tuple[list[str], dict[str, list[str]]]:
    report = domain_watched("sde_shell.py", mode)
    assert not report.faults, report.internal_error()
    found: dict[str, list[str]] = {}
    for f in report.findings:
        found.setdefault(f.rule, []).append(f.subject)
    return [p.name for p in report.run.params], found


def test_a_library_shell_around_the_model_does_not_name_its_parameters():
    names, found = _names("library")
    assert found == {}
    assert names[:2] == ["f.0.weight", "f.0.bias"]


def test_a_cut_diffusion_is_named_by_the_scripts_own_names():
    _, found = _names("cut")
    assert sorted(found["GS413"]) == ["g.0.bias", "g.0.weight", "g.2.bias", "g.2.weight"]


def test_a_wrapper_of_the_scripts_own_class_keeps_its_path():
    names, _ = _names("own")
    assert names[0] == "_base_sde.f.0.weight"
