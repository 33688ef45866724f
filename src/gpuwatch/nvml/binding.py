"""The installed `nvidia-ml-py` as the adapter sees it: every NVML function it calls exists.

`pyproject.toml` allows every binding from 12.535.77 on, but some functions the adapter
calls are younger than that (`nvmlDeviceGetTemperatureV` came with 12.570.86, the
`*RunningProcesses_v2` wrappers with 12.555.43). `BindingSurface` wraps the module and
answers a function the binding lacks with a stub that raises NVML's own
`FunctionNotFound`, which the device layer treats like NotSupported: asked once,
remembered, and the older call (or no value) is used instead.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, NoReturn

from gpuwatch.nvml.api import NvmlApi

log = logging.getLogger(__name__)

FUNCTIONS = (
    "nvmlDeviceGetMinorNumber",
    "nvmlInit",
    "nvmlShutdown",
    "nvmlSystemGetDriverVersion",
    "nvmlSystemGetNVMLVersion",
    "nvmlSystemGetCudaDriverVersion",
    "nvmlSystemGetProcessName",
    "nvmlDeviceGetCount",
    "nvmlDeviceGetHandleByIndex",
    "nvmlDeviceGetUUID",
    "nvmlDeviceGetName",
    "nvmlDeviceGetSerial",
    "nvmlDeviceGetPciInfo",
    "nvmlDeviceGetMemoryInfo",
    "nvmlDeviceGetEnforcedPowerLimit",
    "nvmlDeviceGetUtilizationRates",
    "nvmlDeviceGetPowerUsage",
    "nvmlDeviceGetTotalEnergyConsumption",
    "nvmlDeviceGetTemperatureV",
    "nvmlDeviceGetTemperature",
    "nvmlDeviceGetClockInfo",
    "nvmlDeviceGetCurrentClocksEventReasons",
    "nvmlDeviceGetCurrentClocksThrottleReasons",
    "nvmlDeviceGetFieldValues",
    "nvmlDeviceGetComputeRunningProcesses_v3",
    "nvmlDeviceGetComputeRunningProcesses_v2",
    "nvmlDeviceGetGraphicsRunningProcesses_v3",
    "nvmlDeviceGetGraphicsRunningProcesses_v2",
    "nvmlDeviceGetProcessUtilization",
    "nvmlDeviceGetPcieThroughput",
    "nvmlDeviceGetPcieReplayCounter",
    "nvmlDeviceGetEncoderUtilization",
    "nvmlDeviceGetDecoderUtilization",
    "nvmlDeviceGetTotalEccErrors",
    "nvmlDeviceGetRemappedRows",
    "nvmlDeviceGetMigMode",
    "nvmlDeviceGetMaxMigDeviceCount",
    "nvmlDeviceGetMigDeviceHandleByIndex",
    "nvmlDeviceGetGpuInstanceId",
    "nvmlDeviceGetComputeInstanceId",
    "nvmlDeviceGetGpuInstanceById",
    "nvmlGpuInstanceGetInfo",
    "nvmlDeviceRegisterEvents",
    "nvmlEventSetCreate",
    "nvmlEventSetWait",
    "nvmlEventSetFree",
    "nvmlGpmQueryDeviceSupport",
    "nvmlGpmSampleAlloc",
    "nvmlGpmSampleFree",
    "nvmlGpmSampleGet",
    "nvmlGpmMigSampleGet",
    "nvmlGpmMetricsGet",
)
"""Every NVML function of the binding that `gpuwatch.nvml` calls (a test keeps it complete)."""


def _function_not_found(nv: NvmlApi, name: str) -> Callable[..., NoReturn]:
    def missing(*_args: Any, **_kwargs: Any) -> NoReturn:
        raise nv.NVMLError(nv.NVML_ERROR_FUNCTION_NOT_FOUND)

    missing.__name__ = missing.__qualname__ = name
    return missing


def missing_functions(nv: NvmlApi) -> tuple[str, ...]:
    """The functions of `FUNCTIONS` that the binding `nv` does not have."""
    return tuple(name for name in FUNCTIONS if not hasattr(nv, name))


class BindingSurface:
    """`nv` with a FunctionNotFound stub for each function of `FUNCTIONS` it lacks.

    Everything else is `nv`'s own attribute (looked up once, then cached).
    """

    def __init__(self, nv: NvmlApi) -> None:
        self.binding = nv
        self.missing = missing_functions(nv)
        for name in self.missing:
            setattr(self, name, _function_not_found(nv, name))
        if self.missing:
            log.info(
                "the installed nvidia-ml-py lacks %s: older calls are used or the values are "
                "absent (nvidia-ml-py >= 12.570.86 has them all)",
                ", ".join(self.missing),
            )

    def __getattr__(self, name: str) -> Any:
        value = getattr(self.binding, name)
        if not name.startswith("__"):
            self.__dict__[name] = value
        return value


def surface(nv: NvmlApi) -> NvmlApi:
    """`nv` itself when it has every function the adapter calls, else a `BindingSurface`."""
    if isinstance(nv, BindingSurface) or not missing_functions(nv):
        return nv
    return BindingSurface(nv)
