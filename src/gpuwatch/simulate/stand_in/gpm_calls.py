"""The stand-in's GPM calls: device support, sample buffers, samples and metrics.

The samples and the metrics computed from two of them are `gpuwatch.simulate.gpm`'s;
a sample buffer that was never allocated, or a pair that cannot be compared, is refused.
"""

from __future__ import annotations

from typing import Any

import pynvml

from gpuwatch.simulate.device import GpuDevice, MigDevice
from gpuwatch.simulate.gpm import InvalidSampleError
from gpuwatch.simulate.stand_in.checks import Checks, raise_nvml


class GpmCalls(Checks):
    """nvmlGpmQuery*, nvmlGpmSample*, nvmlGpmMigSampleGet and nvmlGpmMetricsGet."""

    def nvmlGpmQueryDeviceSupport(self, device: Any) -> Any:
        """`c_nvmlGpmSupport_t`: isSupportedDevice 1 on Hopper and newer GPUs."""
        target, _ = self._target(device, "nvmlGpmQueryDeviceSupport", mig=True)
        support = pynvml.c_nvmlGpmSupport_t()
        support.version = pynvml.NVML_GPM_SUPPORT_VERSION
        support.isSupportedDevice = int(isinstance(target, GpuDevice) and target.preset.gpm)
        return support

    def nvmlGpmQueryIfStreamingEnabled(self, device: Any) -> int:
        """0: sample streaming is off."""
        gpu, _ = self._device(device, "nvmlGpmQueryIfStreamingEnabled")
        if not gpu.preset.gpm:
            raise_nvml(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return 0

    def nvmlGpmSampleAlloc(self) -> Any:
        """A new `c_nvmlGpmSample_t`."""
        self._system("nvmlGpmSampleAlloc")
        return self._gpm.alloc()

    def nvmlGpmSampleFree(self, gpmSample: Any) -> None:
        """Free a sample."""
        self._system("nvmlGpmSampleFree")
        try:
            self._gpm.free(gpmSample)
        except InvalidSampleError:
            raise_nvml(pynvml.NVML_ERROR_INVALID_ARGUMENT)

    def nvmlGpmSampleGet(self, device: Any, gpmSample: Any) -> Any:
        """Take a sample of the whole GPU now; NotSupported before Hopper."""
        gpu, t = self._device(device, "nvmlGpmSampleGet")
        if not gpu.preset.gpm:
            raise_nvml(pynvml.NVML_ERROR_NOT_SUPPORTED)
        self._record(gpmSample, gpu, gpu.preset.has_nvlink, t)
        return gpmSample

    def nvmlGpmMigSampleGet(self, device: Any, gpuInstanceId: int, gpmSample: Any) -> Any:
        """Take a sample of one GPU instance (by id) of a MIG-enabled GPU."""
        gpu, t = self._device(device, "nvmlGpmMigSampleGet")
        if not gpu.preset.gpm:
            raise_nvml(pynvml.NVML_ERROR_NOT_SUPPORTED)
        found = [m for m in gpu.mig if m.gpu_instance_id == int(gpuInstanceId)]
        if not gpu.mig_current(t) or not found:
            raise_nvml(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        self._record(gpmSample, found[0], False, t)
        return gpmSample

    def _record(self, sample: Any, source: GpuDevice | MigDevice, nvlink: bool, t: float) -> None:
        try:
            self._gpm.record(sample, source, nvlink, t)
        except InvalidSampleError:
            self._refuse("nvmlGpmSampleGet", "not an allocated GPM sample buffer")

    def nvmlGpmMetricsGet(self, metricsGet: Any) -> Any:
        """Fill `metricsGet.metrics[:numMetrics]` from its two samples; returns it."""
        self._system("nvmlGpmMetricsGet")
        name = "nvmlGpmMetricsGet"
        if metricsGet.version != pynvml.NVML_GPM_METRICS_GET_VERSION:
            self._refuse(name, "version", pynvml.NVML_ERROR_ARGUMENT_VERSION_MISMATCH)
        if not 0 < metricsGet.numMetrics <= pynvml.NVML_GPM_METRIC_MAX:
            self._refuse(name, f"numMetrics {metricsGet.numMetrics}")
        why = self._gpm.fill(metricsGet)
        if why is not None:
            self._refuse(name, why)
        return metricsGet
