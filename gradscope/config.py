"""Settings: built-in defaults < `[tool.gradscope]` in pyproject.toml, or `--config FILE`
instead of it (as with pytest's -c and ruff's --config) < flags.

Each layer is validated on its own so an error names the file, key and line.
No value is ever evaluated as code.
"""

from __future__ import annotations

import fnmatch
import os
import re
import sys
from dataclasses import dataclass, field, replace
from typing import Any

from gradscope.errors import ConfigError
from gradscope.findings import RULES, Finding, Severity, lookup
from gradscope.thresholds import Thresholds, threshold_value

__all__ = ["Thresholds"]  # read as gradscope.config.Thresholds, beside the Settings that hold them

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


@dataclass(frozen=True)
class CheckEntry:
    """One `[[inspect]]`, `[[gradcheck]]` or `[[watch]]` table, kept as plain values (the
    command's options object reads its own: `from_entry`)."""

    target: str
    options: dict[str, Any]
    source: str


@dataclass(frozen=True)
class Settings:
    thresholds: Thresholds = field(default_factory=Thresholds)
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
        return self.thresholds.values()


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
WATCH_KEYS = {
    "script",
    "args",
    "steps",
    "ignore",
    "thresholds",
    "log",
    "plot",
    "tensorboard",
    "wandb",
    "mlflow",
}
WATCH_KEYS |= {"update-every", "flush-every", "batch-size", "against", "hang-timeout", "label"}


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
            thresholds = thresholds.with_values(**{key: number})
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
            changes[key] = threshold_value(value, key)
        except ValueError as exc:
            raise _fail(path, f"{prefix}.{key}", str(exc)) from None
        sources[key] = path
    return base.with_values(**changes)


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
