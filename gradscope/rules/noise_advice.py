"""What a learning rate does under differential privacy's noise, for GS419's advice. No torch."""

from __future__ import annotations

from gradscope.fmt import num


def noise_advice(noise: tuple[float, float, float], lr: float) -> str:
    """DP-SGD: the gradient applied is mostly noise of a known std an element; the step
    (`lr`, over 1 - momentum for SGD) moves every weight by about that much of it, signal
    or not. A larger batch divides the noise."""
    sigma, clip, per_element = noise
    return (
        f"the optimizer adds noise of std {num(per_element)} to each gradient element "
        f"(noise multiplier {num(sigma)} × max grad norm {num(clip)} / expected batch), "
        f"which this lr turns into a random walk of about {num(lr * per_element)} per "
        "element and step: lower the lr, or grow the expected batch (a logical batch split "
        "by BatchMemoryManager), which divides the noise and not the signal"
    )
