"""Settings: built-in defaults < `[tool.gradscope]` in pyproject.toml, or `--config FILE`
instead of it (as with pytest's -c and ruff's --config) < flags.

Each layer is validated on its own so an error names the file, key and line.
No value is ever evaluated as code.
"""

from __future__ import annotations

import fnmatch
import math
import os
import re
import sys
from dataclasses import dataclass, field, fields, replace
from typing import Any

from gradscope.errors import ConfigError
from gradscope.findings import RULES, Finding, Severity, lookup

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


@dataclass(frozen=True)
class Thresholds:
    """Numbers the rules compare against; `configs/default.toml` lists the same defaults."""

    explode_norm: float = 1e3
    """GS104: the total gradient L2 norm over every parameter above this is exploding (a
    single tensor is judged by its per-element RMS instead: see explode-rms)."""
    explode_median_ratio: float = 1e3
    """GS104: a parameter's gradient RMS this many times the model's median is exploding..."""
    explode_min_norm: float = 1.0
    """...provided its norm is above this too (a large ratio over vanished neighbours is not
    an explosion)."""
    vanish_norm: float = 1e-7
    """GS105: a non-zero gradient L2 norm below this is vanishing."""
    vanish_depth_ratio: float = 1e-3
    """GS105: gradient RMS of the first layer run over that of the last, below this."""
    explode_rms: float = 1e2
    """GS104: a parameter's gradient RMS per element above this is exploding (independent of
    the tensor's size, unlike a norm)."""
    spike_window: float = 128.0
    """GS402/GS403 (watch): steps in the rolling median/MAD baseline."""
    spike_sigma: float = 6.0
    """GS402/GS403: a value this many robust sigmas (1.4826·MAD) above the rolling median..."""
    spike_min_ratio: float = 2.0
    """...and at least this many times the rolling median is a spike."""
    spike_min_history: float = 32.0
    """GS402/GS403: steps of history before the rolling window takes over; before it the
    first steps are judged against their own history with spike-early-ratio."""
    spike_early_ratio: float = 5.0
    """GS402/GS403: in the first spike-min-history steps a spike must also be this many
    times the median of the steps before it (a few steps make a rough median, and a fresh
    model's norm moves fast: 2× early is ordinary, 5× is not); 0 turns the early test off."""
    growth_window: float = 100.0
    """GS404 (watch): the last this many steps are tested for a steady rise of the norm."""
    growth_factor: float = 10.0
    """GS404: the norm rose this many times over that window (and steadily)."""
    vanish_time_factor: float = 1e-3
    """GS405 (watch): a layer's late gradient norm over its early one, below this."""
    clip_bind_fraction: float = 0.5
    """GS406 (watch): clipping bound on more than this fraction of the steps..."""
    clip_coef_warn: float = 0.5
    """...and the mean clip coefficient (max_norm/norm, 1 where it did not bind) below this
    is a warning: clipping halves the step or more, so it, not the learning rate, sets the
    step size. Stock configs clip lightly by design (nanoGPT: 0.73-0.87, word_language_model
    --clip 0.25: 0.88)."""
    clip_coef_info: float = 0.8
    """GS406: a mean clip coefficient from clip-coef-warn up to this is info (clipping trims
    a good share of most steps); at or above it, clipping that binds often is silent."""
    warmup_steps: float = 20.0
    """Watch rules GS406, GS407, GS409, GS410 ignore the first this many steps."""
    amp_skip_rate: float = 0.05
    """GS407 (watch): GradScaler skipped more than this fraction of the steps after warm-up..."""
    amp_skip_streak: float = 3.0
    """...or this many steps in a row."""
    update_ratio_high: float = 0.2
    """GS409 (watch): a weight matrix's median update/weight norm ratio above this."""
    update_ratio_warn: float = 0.02
    """GS419 (watch): the weight matrices' median update/weight ratio in the first 100 steps
    at or above this (20× the healthy 1e-3: weights replaced in 50 steps), with the loss
    stalled."""
    update_ratio_low: float = 1e-7
    """GS410 (watch): a parameter's median update/weight norm ratio below this (0: no update)."""
    not_reset_fraction: float = 0.5
    """GS412 (watch): gradients carried into more than this fraction of the steps."""
    blowup_window: float = 100.0
    """GS414 (watch): an optimizer's first this many steps are where an early blow-up (the
    warm-up's damage) is looked for; later ones are GS402/GS403's."""
    blowup_loss_ratio: float = 1.5
    """GS414: the loss, as a median of 3 consecutive steps (one noisy batch is not a
    blow-up), rose this many times above the median of its first 3 steps. A fresh model's
    loss is near chance and falls: 1.5× above it means the updates destroy (nanoGPT at
    100× its lr: 4.2 → 6.9; a tiny transformer at lr 0.3: 4.3 → 19.3)..."""
    blowup_norm_ratio: float = 5.0
    """...and the gradient norm reached this many times its first steps' median (or its
    median over the run, the lower) by the top of that rise: the loss is the main signal,
    the norm confirms it was the updates (nanoGPT at 100× its lr: 106; train_gpt.py at lr
    0.3: 10×); a loss without such a norm (a data shift) is not a blow-up."""
    blowup_rise_ratio: float = 1.2
    """GS414: a milder early rise of the loss (3-step median this many times where it
    started, beyond 3 robust sigmas of its step-to-step noise), without the norm's
    confirmation, is a blow-up only when the loss then never recovered (Adam at lr 0.3 on
    a tiny transformer: 4.16 → 5.95, ended 12% below its start)."""
    blowup_recover_fall: float = 0.25
    """GS414: after the blow-up, a loss whose last steps' median is not this fraction below
    where it started never recovered (error; else warning): nanoGPT at 100× its lr ended
    ~19% below its start, a healthy run 30% or more, a tiny transformer at lr 0.3 ~11%."""
    progress_min_fall: float = 0.05
    """GS415: a loss whose median over its last steps (a fifth of the run, 5-50) is less than
    this fraction below its median over its first steps ended no better than where it
    started (medians: small-batch noise of 20-30% per step averages out)."""
    progress_stall_fall: float = 0.25
    """GS415 (info): a loss that fell less than this fraction and has not improved over the
    second half of the run stalled near its start (a fresh model falls far more: the tiny
    transformer of the examples 4.2 → 1.1, char-level nanoGPT 4.2 → 1.5; at 100× lr with
    clipping it stalls 11% below its start)."""
    progress_min_steps: float = 50.0
    """GS415: steps an optimizer needs before its lack of progress is judged (a short run
    may stop before the loss moves)."""
    stop_min_steps: float = 20.0
    """GS417 (watch): a parameter that had gradients and then got none (None or zero) for
    at least this many of its optimizer's last steps, and 4× longer than any gap it had
    while learning (an MoE expert skips steps), stopped learning."""
    noise_scale_factor: float = 10.0
    """GS430 (watch, info): the run's batch this many times above or below the critical
    batch size B_simple, beyond the estimate's two standard errors. An order of magnitude:
    B_simple itself only estimates the critical batch to within several times, and in the
    paper's model a batch r times B_crit needs (1 + r)× the minimum samples and (1 + 1/r)×
    the minimum steps, so at 10× either way one of them is 11× its least."""

    @classmethod
    def keys(cls) -> list[str]:
        return [_kebab(f.name) for f in fields(cls)]


@dataclass(frozen=True)
class CheckEntry:
    """One `[[inspect]]`, `[[gradcheck]]` or `[[watch]]` table, kept as plain values (the
    command's options object reads its own: `from_entry`)."""

    target: str
    options: dict[str, Any]
    source: str


@dataclass(frozen=True)
class Settings:
    thresholds: Thresholds = Thresholds()
    fail_on: Severity | None = Severity.ERROR
    severities: dict[str, Severity] = field(default_factory=dict)
    """Rule id or slug → severity that replaces the rule's default."""
    ignores: tuple[tuple[str, str], ...] = ()
    """(rule id or slug, glob over subject names)."""
    inspect: tuple[CheckEntry, ...] = ()
    gradcheck: tuple[CheckEntry, ...] = ()
    baseline_factor: float = 10.0
    """With --baseline: a gradient norm that grew or shrank by more than this fails."""
    sources: dict[str, str] = field(default_factory=dict)
    """Setting name → where its value came from (default, a file, or a flag)."""
    watch: tuple[CheckEntry, ...] = ()
    """`[[watch]]` entries: training scripts `gradscope check` runs under `watch`."""

    def for_entry(self, entry: CheckEntry) -> Settings:
        """These settings with one [[inspect]] entry's own ignores and thresholds on top."""
        sources = dict(self.sources)
        thresholds = _thresholds(
            self.thresholds,
            entry.options.get("thresholds", {}),
            entry.source,
            "inspect.thresholds",
            sources,
        )
        ignores = self.ignores + _ignores(
            entry.options.get("ignore", []), entry.source, "inspect.ignore"
        )
        return replace(self, thresholds=thresholds, ignores=ignores, sources=sources)

    def judged(self, findings: list[Finding]) -> list[Finding]:
        """The one place settings act on findings, whichever stage made them: severity
        overrides by id or slug; a finding an `ignore` pattern matches is kept, marked
        with that pattern (`ignored_by`), so every report says what was silenced."""
        out = []
        for f in findings:
            sev = self.severities.get(f.rule) or self.severities.get(f.slug)
            if sev is not None:
                f = replace(f, severity=sev)
            pattern = next(
                (
                    f"{rule}:{glob}"
                    for rule, glob in self.ignores
                    if rule in (f.rule, f.slug) and fnmatch.fnmatchcase(f.subject, glob)
                ),
                None,
            )
            out.append(replace(f, ignored_by=pattern) if pattern else f)
        return out

    def threshold_dict(self) -> dict[str, float]:
        return {_kebab(f.name): getattr(self.thresholds, f.name) for f in fields(Thresholds)}


TOP_KEYS = {
    "fail-on",
    "thresholds",
    "severity",
    "ignore",
    "inspect",
    "gradcheck",
    "baseline-factor",
    "watch",
}
INSPECT_KEYS = {"target", "ignore", "thresholds", "script", "args", "step", "explain", "plot"}
INSPECT_KEYS |= {"top", "all-rows"}  # every InspectOptions field (tests/api/test_options.py)
GRADCHECK_KEYS = {
    "target",
    "shape",
    "args",
    "tensor",
    "domain",
    "dtype",
    "seed",
    "second-order",
    "forward-ad",
}
WATCH_KEYS = {"script", "args", "steps", "ignore", "thresholds", "log", "plot", "tensorboard"}
WATCH_KEYS |= {"update-every", "flush-every", "batch-size", "against", "hang-timeout", "label"}


def _kebab(name: str) -> str:
    return name.replace("_", "-")


def parse_fail_on(text: str) -> Severity | None:
    if text.strip().lower() == "never":
        return None
    try:
        return Severity.parse(text)
    except ValueError:
        raise ValueError(f"{text!r} is not one of info, warning, error, never") from None


def find_pyproject(start: str) -> tuple[str, dict[str, Any]] | None:
    """The nearest pyproject.toml at or above `start` with a [tool.gradscope] table, and it."""
    folder = os.path.abspath(start)
    while True:
        candidate = os.path.join(folder, "pyproject.toml")
        if os.path.isfile(candidate):
            table = _read_toml(candidate).get("tool", {}).get("gradscope")
            if table is not None:
                return candidate, table
        parent = os.path.dirname(folder)
        if parent == folder:
            return None
        folder = parent


def load(
    config: str | None = None, cwd: str | None = None, flags: dict[str, Any] | None = None
) -> Settings:
    settings = Settings(sources={k: "default" for k in [*Thresholds.keys(), "fail-on"]})
    found = None if config else find_pyproject(cwd or os.getcwd())
    if found:
        settings = _apply(settings, found[1], found[0])
    if config:
        if not os.path.isfile(config):
            raise ConfigError(f"{config}: no such config file")
        data = _read_toml(config)
        if os.path.basename(config) == "pyproject.toml":
            data = data.get("tool", {}).get("gradscope", {})
        settings = _apply(settings, data, config)
    return apply_flags(settings, flags or {})


def apply_flags(settings: Settings, flags: dict[str, Any]) -> Settings:
    """Flags (already typed by the CLI) win over every file; None means not given."""
    sources = dict(settings.sources)
    thresholds = settings.thresholds
    fail_on = settings.fail_on
    for key, value in flags.items():
        if value is None:
            continue
        if key == "fail-on":
            try:
                fail_on = parse_fail_on(value) if isinstance(value, str) else value
            except ValueError as exc:
                raise ConfigError(f"--fail-on: {exc}") from None
        else:
            try:
                number = threshold_value(value, key)
            except ValueError as exc:
                raise ConfigError(f"--{key}: {exc}") from None
            thresholds = replace(thresholds, **{key.replace("-", "_"): number})
        sources[key] = "command line"
    return replace(settings, thresholds=thresholds, fail_on=fail_on, sources=sources)


def _read_toml(path: str) -> dict[str, Any]:
    try:
        with open(path, "rb") as f:
            return tomllib.load(f)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: invalid TOML: {exc}") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: invalid TOML: not UTF-8 text") from None
    except RecursionError:
        raise ConfigError(f"{path}: invalid TOML: nested too deeply") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror}") from None


def _line_of(path: str, key: str) -> str:
    try:
        with open(path, encoding="utf-8") as f:
            for number, line in enumerate(f, 1):
                if re.match(rf'\s*\[*\s*(tool\.gradscope\.)?"?{re.escape(key)}"?\s*[=\]]', line):
                    return f":{number}"
    except OSError:
        pass
    return ""


def _fail(path: str, key: str, problem: str) -> ConfigError:
    return ConfigError(f"{path}{_line_of(path, key.rpartition('.')[2])}: {key}: {problem}")


def _check_keys(path: str, table: dict[str, Any], allowed: set[str], prefix: str) -> None:
    for key in table:
        if key not in allowed:
            raise _fail(
                path, f"{prefix}{key}", f"unknown key (known: {', '.join(sorted(allowed))})"
            )


def _apply(settings: Settings, data: dict[str, Any], path: str) -> Settings:
    _check_keys(path, data, TOP_KEYS, "")
    sources = dict(settings.sources)
    fail_on = settings.fail_on
    if "fail-on" in data:
        try:
            fail_on = parse_fail_on(str(data["fail-on"]))
        except ValueError as exc:
            raise _fail(path, "fail-on", str(exc)) from None
        sources["fail-on"] = path
    thresholds = _thresholds(
        settings.thresholds, data.get("thresholds", {}), path, "thresholds", sources
    )
    severities = dict(settings.severities)
    for rule, sev in _table(data, "severity", path).items():
        try:
            severities[known_rule(rule)] = Severity.parse(str(sev))
        except ValueError as exc:
            raise _fail(path, f"severity.{rule}", str(exc)) from None
    ignores = settings.ignores + _ignores(data.get("ignore", []), path, "ignore")
    inspect = settings.inspect + tuple(_entries(data, "inspect", INSPECT_KEYS, path))
    gradcheck = settings.gradcheck + tuple(_entries(data, "gradcheck", GRADCHECK_KEYS, path))
    factor = data.get("baseline-factor", settings.baseline_factor)
    if isinstance(factor, bool) or not isinstance(factor, (int, float)) or factor <= 1:
        raise _fail(path, "baseline-factor", f"expected a number above 1, got {factor!r}")
    watch = settings.watch + tuple(_watch_entries(data, path))
    return Settings(
        thresholds,
        fail_on,
        severities,
        ignores,
        inspect,
        gradcheck,
        float(factor),
        sources,
        watch,
    )


def _table(data: dict[str, Any], key: str, path: str) -> dict[str, Any]:
    value = data.get(key, {})
    if not isinstance(value, dict):
        raise _fail(path, key, f"expected a table, got {type(value).__name__}")
    return value


def _thresholds(
    base: Thresholds, table: Any, path: str, prefix: str, sources: dict[str, str]
) -> Thresholds:
    if not isinstance(table, dict):
        raise _fail(path, prefix, "expected a table of numbers")
    _check_keys(path, table, set(Thresholds.keys()), prefix + ".")
    changes = {}
    for key, value in table.items():
        try:
            changes[key.replace("-", "_")] = threshold_value(value, key)
        except ValueError as exc:
            raise _fail(path, f"{prefix}.{key}", str(exc)) from None
        sources[key] = path
    return replace(base, **changes)


ABOVE_ZERO = frozenset({"spike-min-ratio", "spike-sigma", "spike-window", "growth-factor"})
"""Thresholds that divide, take a logarithm or size a window: 0 has no meaning there."""


def threshold_value(value: Any, key: str | None = None) -> float:
    """The one check for a threshold, from a flag or a file: a finite, non-negative number
    (NaN would silently switch a rule off, a negative one flag everything), above 0 for
    the keys in ABOVE_ZERO; checked before anything runs."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"expected a non-negative number, got {value!r}")
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"expected a finite, non-negative number, got {value!r}")
    if key in ABOVE_ZERO and value == 0:
        raise ValueError(f"expected a number above 0, got {value!r}")
    return float(value)


def known_rule(rule: str) -> str:
    """A rule id or slug that exists; a typo names the known ones instead of doing nothing."""

    found = lookup(rule)
    if found is None:
        known = ", ".join(f"{r.id}/{r.slug}" for r in RULES.values())
        raise ValueError(f"unknown rule {rule!r} (known: {known})")
    return found.id if rule.upper() == found.id else rule


def parse_ignore(text: str) -> tuple[str, str]:
    rule, sep, glob = str(text).partition(":")
    if not sep or not rule or not glob:
        raise ValueError(f"{text!r} is not RULE:GLOB (e.g. 'none-grad:aux.*')")
    return known_rule(rule), glob


def _ignores(value: Any, path: str, key: str) -> tuple[tuple[str, str], ...]:
    if not isinstance(value, list):
        raise _fail(path, key, 'expected a list of "RULE:GLOB" strings')
    try:
        return tuple(parse_ignore(v) for v in value)
    except ValueError as exc:
        raise _fail(path, key, str(exc)) from None


def _entries(data: dict[str, Any], key: str, allowed: set[str], path: str) -> list[CheckEntry]:
    value = data.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
        raise _fail(path, key, f"expected an array of tables ([[{key}]])")
    out = []
    for entry in value:
        _check_keys(path, entry, allowed, f"{key}.")
        if not isinstance(entry.get("target"), str):
            raise _fail(path, f"{key}.target", "every entry needs a target string")
        if key == "inspect":  # checked now, so a typo fails before any model runs
            _thresholds(Thresholds(), entry.get("thresholds", {}), path, "inspect.thresholds", {})
            _ignores(entry.get("ignore", []), path, "inspect.ignore")
        checked = CheckEntry(
            entry["target"], {k: v for k, v in entry.items() if k != "target"}, path
        )
        out.append(checked)
    return out


def config_error(path: str, key: str, problem: str) -> ConfigError:
    """`path:line: key: problem`, for validating a config table outside this module."""
    return _fail(path, key, problem)


def _watch_entries(data: dict[str, Any], path: str) -> list[CheckEntry]:
    """`[[watch]]`: script (required), args (list of strings), steps (positive integer)."""
    value = data.get("watch", [])
    if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
        raise _fail(path, "watch", "expected an array of tables ([[watch]])")
    out = []
    for entry in value:
        _check_keys(path, entry, WATCH_KEYS, "watch.")
        if not isinstance(entry.get("script"), str):
            raise _fail(path, "watch.script", "every [[watch]] entry needs a script path")
        args = entry.get("args", [])
        if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
            raise _fail(path, "watch.args", "expected a list of strings")
        steps = entry.get("steps")
        if steps is not None and (
            isinstance(steps, bool) or not isinstance(steps, int) or steps < 1
        ):
            raise _fail(path, "watch.steps", f"expected a positive integer, got {steps!r}")
        _thresholds(Thresholds(), entry.get("thresholds", {}), path, "watch.thresholds", {})
        _ignores(entry.get("ignore", []), path, "watch.ignore")
        options = {k: v for k, v in entry.items() if k != "script"}
        out.append(CheckEntry(entry["script"], options, path))
    return out
