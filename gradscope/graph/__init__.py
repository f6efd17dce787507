"""`gradscope graph`: the autograd graph of a loss, named and coloured by gradient health.

walk (the graph as tables) → build (full picture) or collapse (one node per module),
drawn with style's vocabulary; compat makes torchviz import on Python 3.12+.
"""

from gradscope.graph.build import (
    COLLAPSE_ABOVE,
    FORMATS,
    Drawing,
    DrawOptions,
    check_dot,
    draw,
    format_for,
    graph_of,
    render,
    statuses_of,
)

__all__ = [
    "COLLAPSE_ABOVE",
    "FORMATS",
    "DrawOptions",
    "Drawing",
    "check_dot",
    "draw",
    "format_for",
    "graph_of",
    "render",
    "statuses_of",
]
