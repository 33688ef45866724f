"""The NVML layer: the only package that talks to NVML.

`load_nvml()` returns the real `pynvml` module; everything else takes the module as
an argument, so the simulated stand-in (`gpuwatch.simulate`) runs the same code path.
"""

from __future__ import annotations

from typing import cast

from gpuwatch.nvml.api import NvmlApi
from gpuwatch.nvml.errors import DriverError, NvmlNotFoundError
from gpuwatch.nvml.sampler import NvmlSampler


def load_nvml() -> NvmlApi:
    """The real NVML binding (`nvidia-ml-py`, imported as `pynvml`)."""
    import pynvml  # noqa: PLC0415 - imported only when the real GPU path is taken

    return cast("NvmlApi", pynvml)  # the binding ships no types: the one cast


__all__ = ["DriverError", "NvmlApi", "NvmlNotFoundError", "NvmlSampler", "load_nvml"]
