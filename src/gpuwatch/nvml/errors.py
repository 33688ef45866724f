"""How gpuwatch treats each NVML error: the one error policy for every NVML call.

NVML raises a generated subclass of `pynvml.NVMLError` per return code. They are
classified by class name so that the real module and the stand-in behave alike.
"""

from __future__ import annotations

import enum


class NvmlErrorKind(enum.Enum):
    """What an NVML error means for the agent."""

    UNSUPPORTED = "unsupported"  # this device cannot give this value: remember, stop asking
    NOT_FOUND = "not_found"  # no data right now (no new samples, empty MIG slot)
    DEVICE_LOST = "device_lost"  # this GPU is down; the others keep reporting
    DRIVER = "driver"  # the whole library is unusable: re-initialise with backoff
    TRANSIENT = "transient"  # try again next tick


_KIND_BY_CLASS_NAME = {
    "NVMLError_NotSupported": NvmlErrorKind.UNSUPPORTED,
    "NVMLError_FunctionNotFound": NvmlErrorKind.UNSUPPORTED,
    "NVMLError_NoPermission": NvmlErrorKind.UNSUPPORTED,
    "NVMLError_ArgumentVersionMismatch": NvmlErrorKind.UNSUPPORTED,
    "NVMLError_NotFound": NvmlErrorKind.NOT_FOUND,
    "NVMLError_GpuIsLost": NvmlErrorKind.DEVICE_LOST,
    "NVMLError_Unknown": NvmlErrorKind.DEVICE_LOST,
    "NVMLError_ResetRequired": NvmlErrorKind.DEVICE_LOST,
    "NVMLError_LibRmVersionMismatch": NvmlErrorKind.DRIVER,
    "NVMLError_DriverNotLoaded": NvmlErrorKind.DRIVER,
    "NVMLError_LibraryNotFound": NvmlErrorKind.DRIVER,
    "NVMLError_Uninitialized": NvmlErrorKind.DRIVER,
}


def classify(error: BaseException) -> NvmlErrorKind:
    """Map an NVML exception to what the agent does about it."""
    return _KIND_BY_CLASS_NAME.get(type(error).__name__, NvmlErrorKind.TRANSIENT)


def describe(error: BaseException) -> str:
    """A short, log-safe description such as `GpuIsLost (GPU is lost)`."""
    name = type(error).__name__.removeprefix("NVMLError_")
    try:
        text = str(error)
    except Exception:  # noqa: BLE001 - NVMLError.__str__ itself calls into NVML
        text = ""
    return f"{name} ({text})" if text and text != name else name


class NvmlNotFoundError(RuntimeError):
    """NVML (the NVIDIA driver's library) is not on this machine."""


class DeviceLostError(RuntimeError):
    """A device call failed in a way that makes this GPU unusable for this tick."""


class DriverError(RuntimeError):
    """NVML as a whole failed; the sampler re-initialises it with backoff.

    `error_name` is the NVML error's class name (e.g. `NVMLError_LibRmVersionMismatch`).
    """

    def __init__(self, message: str, *, error_name: str = "") -> None:
        super().__init__(message)
        self.error_name = error_name


VERSION_MISMATCH = "NVMLError_LibRmVersionMismatch"
"""The library loaded in this process no longer matches the kernel driver (after a
driver upgrade). pynvml never unloads the library, so only a new process recovers."""
