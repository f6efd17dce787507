"""torchviz on Python 3.12+: it imports distutils, which 3.12 removed (pytorchviz#83).

A shim is installed only where `import distutils` fails.
"""

from __future__ import annotations

import functools
import re
import sys
import types

# torchviz is imported in functions: `gradscope --help` must not load it


@functools.total_ordering
class LooseVersion:
    """The part of distutils' LooseVersion torchviz uses: parse and compare "2.13.0+cpu"."""

    def __init__(self, text: str):
        self.vstring = str(text)
        parts = [p for p in re.split(r"(\d+|[a-z]+|\.)", self.vstring.lower()) if p and p != "."]
        self.version = [int(p) if p.isdigit() else p for p in parts]

    def _key(self) -> tuple[tuple[int, int, str], ...]:
        return tuple((0, p, "") if isinstance(p, int) else (1, 0, p) for p in self.version)

    def __eq__(self, other: object) -> bool:
        return self._key() == LooseVersion(str(other))._key()

    def __lt__(self, other: object) -> bool:
        return self._key() < LooseVersion(str(other))._key()

    def __str__(self) -> str:
        return self.vstring


def import_torchviz() -> types.ModuleType:
    """torchviz, with a distutils shim only where `import distutils` fails (Python 3.12+)."""
    if "torchviz" not in sys.modules:
        try:
            import distutils.version  # noqa: F401
        except ImportError:
            shim, version = types.ModuleType("distutils"), types.ModuleType("distutils.version")
            version.LooseVersion = LooseVersion  # type: ignore[attr-defined]
            shim.version = version  # type: ignore[attr-defined]
            shim.__path__ = []  # a package, so `from distutils.version import` resolves
            sys.modules["distutils"], sys.modules["distutils.version"] = shim, version
    import torchviz

    return torchviz
