"""GPM (GPU performance monitoring): the metric ids, the two rolling sample buffers of a
GPU or GPU instance, and the reading that compares them (`GpmReads._read_gpm`)."""

from __future__ import annotations

import logging

from gpuwatch.nvml import parse
from gpuwatch.nvml.api import Handle, NvmlApi, NvmlStruct
from gpuwatch.nvml.calls import DeviceCalls
from gpuwatch.nvml.errors import NvmlErrorKind, classify, describe

log = logging.getLogger("gpuwatch.nvml.device")

GPM_SM_UTIL = 2
GPM_SM_OCCUPANCY = 3
GPM_ANY_TENSOR_UTIL = 5
GPM_DRAM_BW_UTIL = 10
GPM_PCIE_TX = 20
GPM_PCIE_RX = 21
GPM_MIG_METRIC_IDS = (GPM_SM_UTIL, GPM_SM_OCCUPANCY, GPM_ANY_TENSOR_UTIL, GPM_DRAM_BW_UTIL)
"""What a GPU instance exports (PCIe is the whole GPU's)."""
GPM_METRIC_IDS = (*GPM_MIG_METRIC_IDS, GPM_PCIE_TX, GPM_PCIE_RX)
GPM_MIN_INTERVAL_SECONDS = 0.1
"""GPM needs its two samples at least 100 ms apart."""


class GpmBuffers:
    """Two rolling GPM sample buffers; each tick fills one and compares with the other.

    The metrics request is built once (its metric ids never change) and reused: each
    comparison only sets its two samples.
    """

    def __init__(self, nv: NvmlApi, metric_ids: tuple[int, ...]) -> None:
        self._nv = nv
        self.previous: Handle = nv.nvmlGpmSampleAlloc()
        self.current: Handle = nv.nvmlGpmSampleAlloc()
        self.previous_time: float | None = None
        self.metric_ids = metric_ids
        request = nv.c_nvmlGpmMetricsGet_t()
        request.version = nv.NVML_GPM_METRICS_GET_VERSION
        request.numMetrics = len(metric_ids)
        for i, metric_id in enumerate(metric_ids):
            request.metrics[i].metricId = metric_id
        self.request: NvmlStruct = request

    def free(self) -> None:
        for sample in (self.previous, self.current):
            try:
                self._nv.nvmlGpmSampleFree(sample)
            except self._nv.NVMLError as exc:
                log.debug("GPM sample free failed: %s", describe(exc))

    def swap(self, now: float) -> None:
        self.previous, self.current = self.current, self.previous
        self.previous_time = now


class GpmReads(DeviceCalls):
    """A device's GPM buffers (the GPU's, and one per GPU instance under MIG)."""

    _gpm: GpmBuffers | None
    _mig_gpm: dict[int, GpmBuffers]

    def _read_gpm(
        self, buffers: GpmBuffers | None, now: float, gpu_instance_id: int | None
    ) -> dict[int, float]:
        """Fill the current GPM buffer and compare it with the previous one."""
        if buffers is None or "gpm" in self.unsupported:
            return {}
        nv = self._nv
        if (
            buffers.previous_time is not None
            and now - buffers.previous_time < GPM_MIN_INTERVAL_SECONDS
        ):
            return {}
        try:
            if gpu_instance_id is None:
                self._call("gpm", nv.nvmlGpmSampleGet, self.handle, buffers.current)
            else:
                self._call(
                    "gpm_mig", nv.nvmlGpmMigSampleGet, self.handle, gpu_instance_id, buffers.current
                )
        except nv.NVMLError as exc:
            if classify(exc) is NvmlErrorKind.TRANSIENT:
                log.debug("GPU %d: GPM sample failed: %s", self.index, describe(exc))
            return {}
        values: dict[int, float] = {}
        if buffers.previous_time is not None:
            request = buffers.request
            request.sample1 = buffers.previous
            request.sample2 = buffers.current
            result = self._optional("gpm_metrics", nv.nvmlGpmMetricsGet, request)
            if result is not None:
                count = len(buffers.metric_ids)
                values = parse.gpm_values(result.metrics, count, nv.NVML_SUCCESS)
        buffers.swap(now)
        return values
