"""Why the backward of an eigen or singular value decomposition makes NaN/Inf from finite
gradients: the eigenvector's derivative divides by the gaps between eigenvalues (and an
SVD's also by the singular values), so a matrix with a repeated eigenvalue (isotropic, or
rank-deficient: a covariance of fewer samples than features, a weight with rows at 0) makes
it infinite, even where the loss uses only some of the vectors (0 × ∞). A clamp or an
epsilon on the input does not help there, which is what the generic advice would say: the
words for these nodes are their own. Plain data; no torch."""

from __future__ import annotations

DECOMPOSITIONS = {
    "LinalgEighBackward0": "eigenvalues",
    "LinalgEigBackward0": "eigenvalues",
    "LinalgSvdBackward0": "singular values",
    "SvdBackward0": "singular values",
    "SymeigBackward0": "eigenvalues",
}
"""Backward nodes of decompositions whose vectors' derivative divides by spectral gaps."""


def gap_division(node: str) -> tuple[str, str] | None:
    """(why, fix) for a decomposition's backward node that made NaN/Inf; None for any
    other node."""
    values = DECOMPOSITIONS.get(node)
    if values is None:
        return None
    why = (
        f"the derivative of its vectors divides by the gaps between {values} (1/(λi - λj)"
        + (", and by the singular values" if values == "singular values" else "")
        + f"): repeated {values} (an isotropic or rank-deficient matrix, such as a covariance "
        "of fewer samples than features) make it infinite, also where the loss uses only "
        "some of the vectors (0 × ∞)"
    )
    fix = (
        "make the loss depend on the decomposition only through what a tie leaves defined "
        f"({'eigvalsh' if values == 'eigenvalues' else 'svdvals'} when only the values are "
        "needed, the projector onto a subspace separated from the rest by a gap, a matrix "
        "root or inverse root by Newton-Schulz iterations), or back-propagate through a "
        "custom Function whose 1/(λi - λj) is kept finite where the gap is 0; an epsilon "
        "on the diagonal (A + eps·I) moves every value alike and leaves the ties"
    )
    return why, fix
