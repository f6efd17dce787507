"""Baselines: adopt gradscope on a model with known issues, and still catch regressions.

A baseline is a small JSON file: per target, the (rule, subject) pairs found
and every parameter's gradient norm. Compared against it, a run fails only on
findings that are new, or on a gradient norm that changed by more than the
configured factor.
"""

from __future__ import annotations

import json
import math
from dataclasses import replace
from typing import Any

from gradscope.config import Settings
from gradscope.errors import ConfigError
from gradscope.findings import RULES, Finding, Severity
from gradscope.outcome import CheckReport, Outcome
from gradscope.rules.registry import Stage, rule
from gradscope.troubleshooting import TABLE

BASELINE_VERSION = 1


def build(report: CheckReport) -> dict[str, Any]:
    targets = {}
    for r in report.results:
        if r.could_not_run is not None:
            continue
        params = (r.document or {}).get("parameters", [])
        targets[f"{r.kind}:{r.label}"] = {
            "findings": sorted({(f.rule, f.subject) for f in r.findings + r.known}),
            "norms": {
                p["name"]: p["grad_norm"] for p in params if isinstance(p.get("grad_norm"), float)
            },
        }
    return {
        "version": BASELINE_VERSION,
        "tool": "gradscope",
        "kind": "baseline",
        "targets": targets,
    }


def load(path: str) -> dict[str, Any]:
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read baseline: {exc.strerror}") from None
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{path}:{exc.lineno}: not a JSON baseline: {exc.msg}") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: not a JSON baseline: not UTF-8 text") from None
    except RecursionError:
        raise ConfigError(f"{path}: not a JSON baseline: nested too deeply") from None
    if not isinstance(doc, dict) or doc.get("kind") != "baseline":
        raise ConfigError(f"{path}: not a gradscope baseline (write one with --write-baseline)")
    if doc.get("version") != BASELINE_VERSION:
        raise ConfigError(
            f"{path}: baseline version {doc.get('version')} is not "
            f"{BASELINE_VERSION}; write it again with --write-baseline"
        )
    problem = _shape_problem(doc.get("targets"))
    if problem:
        raise ConfigError(
            f"{path}: malformed baseline: {problem}; write it again with --write-baseline"
        )
    return doc


def _shape_problem(targets: Any) -> str:
    """What is wrong with the `targets` table, or "" (a hand-edited file fails in one line)."""
    if not isinstance(targets, dict):
        return "`targets` is not an object"
    for name, entry in targets.items():
        if not isinstance(entry, dict):
            return f"target {name!r} is not an object"
        findings, norms = entry.get("findings"), entry.get("norms")
        if not isinstance(findings, list) or not all(
            isinstance(pair, list) and len(pair) == 2 and all(isinstance(x, str) for x in pair)
            for pair in findings
        ):
            return f"target {name!r}: `findings` is not a list of [rule, subject] pairs"
        if not isinstance(norms, dict) or not all(
            isinstance(v, (int, float)) and not isinstance(v, bool) for v in norms.values()
        ):
            return f"target {name!r}: `norms` is not an object of numbers"
    return ""


def compare(report: CheckReport, baseline: dict[str, Any], settings: Settings) -> CheckReport:
    """Known findings move to `known`; norm changes beyond `baseline_factor` become new
    findings, subject to the same severities and ignores as every other finding."""
    results = []
    for r in report.results:
        saved = baseline["targets"].get(f"{r.kind}:{r.label}")
        if saved is None or r.could_not_run is not None:
            results.append(r)  # a target new to the baseline is judged in full
            continue
        seen = {tuple(pair) for pair in saved["findings"]}
        new = [f for f in r.findings if (f.rule, f.subject) not in seen]
        known = r.known + [f for f in r.findings if (f.rule, f.subject) in seen]
        changes = norm_changes(r, saved["norms"], settings.baseline_factor)
        results.append(
            replace(r, findings=new + _settings_of(r, settings).judged(changes), known=known)
        )
    return replace(report, results=results)


def _settings_of(r: Outcome, settings: Settings) -> Settings:
    """The target's own settings: its [[inspect]] entry's ignores on top of the global ones."""
    entry = next((e for e in settings.inspect if e.target == r.label), None)
    return settings.for_entry(entry) if entry is not None and r.kind == "inspect" else settings


@rule(
    "GS110",
    "norm-change",
    Severity.ERROR,
    "exploding",
    Stage.BASELINE,
    "with --baseline: a gradient norm grew or shrank by more than baseline-factor",
    example="a change to the init or an activation after the baseline was written",
    fix=(
        "find the change since the baseline that moved this gradient; if it is meant, write the "
        "baseline again (gradscope check --write-baseline FILE)"
    ),
    thresholds=("baseline-factor",),
)
def norm_changes(r: Outcome, before: dict[str, float], factor: float) -> list[Finding]:
    """With --baseline: a parameter's gradient norm is more than baseline-factor times, or less
    than 1/baseline-factor of, the norm recorded by --write-baseline (its table row is vanishing
    gradients when it shrank)."""
    norm_change = RULES["GS110"]
    out = []
    for p in (r.document or {}).get("parameters", []):
        old, new = before.get(p["name"]), p.get("grad_norm")
        if not isinstance(old, float) or not isinstance(new, float) or old <= 0 or new <= 0:
            continue
        change = new / old
        if math.isfinite(change) and max(change, 1 / change) > factor:
            grew = change > 1
            out.append(
                Finding(
                    norm_change.id,
                    norm_change.slug,
                    norm_change.severity,
                    p["name"],
                    f"grad norm of {p['name']} went from {old:.3g} to {new:.3g} (x{change:.3g}), "
                    f"beyond the baseline factor {factor:g}",
                    "a change since the baseline made this gradient "
                    + (
                        "explode: check init, learning-rate-dependent scales and normalisation"
                        if grew
                        else "vanish: check new activations, masks or detached paths"
                    ),
                    TABLE["exploding" if grew else "vanishing"],
                    change,
                    factor,
                )
            )
    return out
