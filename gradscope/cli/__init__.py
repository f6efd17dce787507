"""The command line: one module per command, sharing common's exit-code boundary.

Importing this package must stay cheap (no torch): `gradscope --help` and
`--version` run it.
"""

from gradscope.cli.root import app, main

__all__ = ["app", "main"]
