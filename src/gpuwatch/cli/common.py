"""What the commands share: exit codes, the usage error, the NVML-not-found line."""

from __future__ import annotations

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2

NVML_NOT_FOUND = (
    "gpuwatch: NVML was not found ({reason}): is the NVIDIA driver installed? "
    "To try gpuwatch without a GPU, run: gpuwatch run --simulate demo"
)


class UsageError(Exception):
    """A mistake in the command line or config: one line, exit 2."""
