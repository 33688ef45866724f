"""What a token counter may claim: an increase no GPU could have served is refused.

Pure, no clock and no I/O. A lying or broken server whose prompt counter jumps by 1e300
between two scrapes would push realized $/1M tokens towards 0 (a flattering figure),
so an increase whose rate over the span between two scrapes exceeds
`MAX_TOKENS_PER_SECOND_PER_GPU` times the GPUs the source serves is refused.
"""

from __future__ import annotations

from collections.abc import Mapping

MAX_TOKENS_PER_SECOND_PER_GPU = 1e8
"""The most tokens (of one kind: prompt or generation) one GPU may be said to process
per second. A transformer's forward pass costs at least 2 FLOPs per parameter per
token (Kaplan et al. 2020, "Scaling Laws for Neural Language Models", section 2.1);
even `facebook/opt-125m` (vLLM's quickstart model, 125M parameters) at the peak dense
FP4 rate of NVIDIA's Blackwell Ultra (B300: 15 PFLOPS) would be 15e15 / 2.5e8 = 6e7
tokens/s, below this ceiling, and no server runs at peak. Above it the counter is a lie,
not a fast server."""

MIN_SPAN_SECONDS = 1.0
"""The shortest span an increase is bounded over (s): sources are scraped at least 1 s
apart (`interval_seconds` >= 1), so clock jitter never refuses an honest increase."""


def ceiling(seconds: float, gpus: int) -> float:
    """The most tokens of one kind `gpus` GPUs (at least 1) may serve in `seconds`."""
    return max(seconds, MIN_SPAN_SECONDS) * max(gpus, 1) * MAX_TOKENS_PER_SECOND_PER_GPU


def implausible_increase(increases: Mapping[str, float], seconds: float, gpus: int) -> str | None:
    """Why one of `increases` (tokens, by counter) is more than `gpus` GPUs could serve in
    `seconds`, None when all are within `ceiling`; the reason is log-safe."""
    limit = ceiling(seconds, gpus)
    for name, increase in increases.items():
        if increase > limit:
            return (
                f"implausible: {name} rose by {increase:.3g} tokens in {seconds:.0f} s, above "
                f"{limit:.3g} ({max(gpus, 1)} GPU x {MAX_TOKENS_PER_SECOND_PER_GPU:g} tokens/s)"
            )
    return None
