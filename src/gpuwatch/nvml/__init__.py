"""The NVML layer: the only package that talks to NVML.

`load_nvml()` returns the real `pynvml` module; everything else takes the module as
an argument (typed `api.NvmlApi`), so the simulated stand-in (`gpuwatch.simulate`) runs
the same code path.

Here: `api.py` (the protocol), `binding.py` (what an older binding lacks), `errors.py`
(the error policy's classes), `calls.py` (the one call helper per device), `device.py`
(one GPU: identity, tick, slow job) with its readers `gpm.py`, `mig.py`, `processes.py`,
`reliability.py`, `parse.py` (pure parsing of NVML's structs), `xid.py` (XID events),
`sampler.py` (NVML's lifetime and every GPU per tick). Not here: metrics, analysis, or
anything that does not talk to NVML.

Layer: a source (beside kube, tokens, billing, promapi, slack), above core; it imports
core only.
"""

from __future__ import annotations

from typing import cast

from gpuwatch.nvml.api import NvmlApi
from gpuwatch.nvml.errors import DriverError, NvmlNotFoundError
from gpuwatch.nvml.sampler import NvmlSampler


def load_nvml() -> NvmlApi:
    """The real NVML binding (`nvidia-ml-py`, imported as `pynvml`)."""
    # lazy: the real driver binding only when no stand-in is injected (simulate, tests)
    import pynvml  # noqa: PLC0415

    return cast("NvmlApi", pynvml)  # the binding ships no types: the one cast


__all__ = ["DriverError", "NvmlApi", "NvmlNotFoundError", "NvmlSampler", "load_nvml"]
