"""Pairing two models' parameters and modules by name (no torch here).

In this order, each name paired at most once:

1. the name map (`--name-map FILE`): exact names, and prefixes (a key ending in "."
   renames every name that starts with it);
2. the same name;
3. the same name once wrapper segments are removed anywhere (`module.` of DDP,
   `_orig_mod.` of torch.compile, `_fsdp_wrapped_module.`, `_checkpoint_wrapped_module.`);
4. the same name once one leading prefix is removed on each side (`model.`,
   `transformer.`, ...): the pair of prefixes that pairs the most names is found from
   the names themselves, not from a list.

A pair is copied when the shapes are equal; a 2-D pair whose shape is reversed
(GPT-2's Conv1D against nn.Linear) is reported as transposed and copied transposed
only when asked; other shapes are reported and left alone.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from gradscope.errors import ConfigError
from gradscope.fmt import clip

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

WRAPPERS = ("module", "_orig_mod", "_fsdp_wrapped_module", "_checkpoint_wrapped_module")
"""Segments wrappers insert into names (DDP, torch.compile, FSDP1, checkpoint_wrapper)."""

Shape = tuple[int, ...]


@dataclass(frozen=True)
class NameMap:
    """`ref name = new name` entries; keys ending in "." rename prefixes."""

    exact: Mapping[str, str]
    prefixes: tuple[tuple[str, str], ...]

    def translate(self, name: str) -> str | None:
        if name in self.exact:
            return self.exact[name]
        for old, new in self.prefixes:
            if name.startswith(old):
                return new + name[len(old) :]
        return None


EMPTY_MAP = NameMap({}, ())


def load_name_map(path: str) -> NameMap:
    """A TOML or JSON file of `"ref_name" = "new_name"` (TOML: top level or a [names] table)."""
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except OSError as exc:
        raise ConfigError(f"--name-map {path}: {exc.strerror}") from None
    data = _parse(path, raw)
    if isinstance(data, dict) and isinstance(data.get("names"), dict):
        data = data["names"]
    if not isinstance(data, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in data.items()
    ):
        raise ConfigError(
            f'--name-map {path}: expected a table of "ref_name" = "new_name" strings '
            '(prefixes end in ".")'
        )
    return name_map(data)


def name_map(entries: Mapping[str, str]) -> NameMap:
    exact = {k: v for k, v in entries.items() if not k.endswith(".")}
    prefixes = sorted(
        ((k, v) for k, v in entries.items() if k.endswith(".")), key=lambda kv: -len(kv[0])
    )
    return NameMap(exact, tuple(prefixes))


def _parse(path: str, raw: bytes) -> object:
    if os.path.splitext(path)[1].lower() == ".json":
        try:
            return json.loads(raw)
        except ValueError as exc:
            raise ConfigError(f"--name-map {path}: not valid JSON ({exc})") from None
    try:
        return tomllib.loads(raw.decode("utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        raise ConfigError(f"--name-map {path}: not valid TOML ({clip(str(exc))})") from None


def unwrapped(name: str) -> str:
    """`module._orig_mod.h.0._checkpoint_wrapped_module.attn` → `h.0.attn`."""
    return ".".join(s for s in name.split(".") if s not in WRAPPERS)


def _leading(names: Sequence[str], most: int = 2) -> set[str]:
    """Candidate prefixes: "" and the first one or two non-numeric segments of each name."""
    out = {""}
    for n in names:
        parts = n.split(".")
        for k in range(1, min(most, len(parts) - 1) + 1):
            if parts[k - 1].isdigit():
                break
            out.add(".".join(parts[:k]) + ".")
    return out


def best_prefixes(ref: Sequence[str], new: Sequence[str]) -> tuple[str, str]:
    """The (ref prefix, new prefix) whose removal pairs the most names; ("", "") if none helps."""

    def strip(names: Sequence[str], prefix: str) -> set[str]:
        return {n[len(prefix) :] for n in names if n.startswith(prefix)}

    best, count = ("", ""), len(set(ref) & set(new))
    for pr in sorted(_leading(ref)):
        stripped_ref = strip(ref, pr)
        for pn in sorted(_leading(new)):
            k = len(stripped_ref & strip(new, pn))
            if k > count:
                best, count = (pr, pn), k
    return best


@dataclass(frozen=True)
class Pairing:
    """Names paired (ref → (new, how)), the prefixes removed, and what was left over."""

    pairs: dict[str, tuple[str, str]]
    prefixes: tuple[str, str]
    ref_only: tuple[str, ...]
    new_only: tuple[str, ...]


def pair_names(ref: Sequence[str], new: Sequence[str], names: NameMap = EMPTY_MAP) -> Pairing:
    """Pair names in the order of the module docstring; each name is used at most once."""
    pairs: dict[str, tuple[str, str]] = {}
    free = {n: True for n in new}

    def take(r: str, n: str | None, how: str) -> None:
        if r not in pairs and n is not None and free.get(n):
            pairs[r] = (n, how)
            free[n] = False

    for r in ref:
        take(r, names.translate(r), "map")
    for r in ref:
        take(r, r if r in free else None, "name")
    by_unwrapped: dict[str, str] = {}
    for n in new:
        if free[n]:
            by_unwrapped.setdefault(unwrapped(n), n)
    for r in ref:
        take(r, by_unwrapped.get(unwrapped(r)), "stripped")
    left_ref = [unwrapped(r) for r in ref if r not in pairs]
    left_new = [unwrapped(n) for n in new if free[n]]
    prefixes = best_prefixes(left_ref, left_new) if left_ref and left_new else ("", "")
    if prefixes != ("", ""):
        pr, pn = prefixes
        by_rest = {u[len(pn) :]: n for n in new if free[n] and (u := unwrapped(n)).startswith(pn)}
        for r in ref:
            u = unwrapped(r)
            if r not in pairs and u.startswith(pr):
                take(r, by_rest.get(u[len(pr) :]), "prefix")
    return Pairing(
        pairs,
        prefixes,
        tuple(r for r in ref if r not in pairs),
        tuple(n for n in new if free[n]),
    )


def shape_text(a: Shape, b: Shape) -> str:
    return f"{'×'.join(map(str, a)) or 'scalar'} vs {'×'.join(map(str, b)) or 'scalar'}"


def classify(ref_shape: Shape, new_shape: Shape) -> str:
    """ "same", "transposed" (2-D, reversed) or "shape"."""
    if ref_shape == new_shape:
        return "same"
    if len(ref_shape) == 2 and tuple(reversed(ref_shape)) == new_shape:
        return "transposed"
    return "shape"


def owner(name: str) -> str:
    """The module that holds parameter `name` ("" for the model itself)."""
    return name.rpartition(".")[0]
