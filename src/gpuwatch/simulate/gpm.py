"""GPU Performance Monitoring (nvmlGpm*): sample buffers and metric values.

A sample is a real `pynvml.c_nvmlGpmSample_t` whose address identifies it here.
`nvmlGpmSampleGet` records (device, scenario time) in it; `nvmlGpmMetricsGet` fills
each requested metric with the device's jittered average activity between the two
samples' times. Like the driver, it computes `sample2 - sample1`: the two must be
different buffers of the same device, `sample2` taken after `sample1` (later in
scenario time); anything else is refused (InvalidArgument). Modelled metric ids:
1 graphics util, 2 SM util, 3 SM occupancy, 5 any-tensor util, 10 DRAM bandwidth util
(percent 0-100), 20/21 PCIe TX/RX and 60/61 NVLink RX/TX (MiB/s). Any other id gets
nvmlReturn NOT_SUPPORTED.
"""

from __future__ import annotations

import ctypes
import threading
from dataclasses import dataclass
from typing import Any, Protocol

import pynvml

from gpuwatch.simulate.timeline import Act


class GpmSource(Protocol):
    """A GPU or MIG device that can average its activity."""

    def average(self, t0: float, t1: float) -> Act:
        """Jittered mean activity over [t0, t1] (s)."""
        ...


@dataclass(frozen=True, slots=True)
class _Taken:
    source: GpmSource
    nvlink: bool
    t: float


_PERCENT = {
    pynvml.NVML_GPM_METRIC_GRAPHICS_UTIL: 0,
    pynvml.NVML_GPM_METRIC_SM_UTIL: 1,
    pynvml.NVML_GPM_METRIC_SM_OCCUPANCY: 2,
    pynvml.NVML_GPM_METRIC_ANY_TENSOR_UTIL: 3,
    pynvml.NVML_GPM_METRIC_DRAM_BW_UTIL: 4,
}
_RATE = {
    pynvml.NVML_GPM_METRIC_PCIE_TX_PER_SEC: 5,
    pynvml.NVML_GPM_METRIC_PCIE_RX_PER_SEC: 6,
}
_NVLINK_RATE = {
    pynvml.NVML_GPM_METRIC_NVLINK_TOTAL_TX_PER_SEC: 7,
    pynvml.NVML_GPM_METRIC_NVLINK_TOTAL_RX_PER_SEC: 8,
}
_INFO: dict[int, tuple[bytes, bytes, bytes]] = {
    1: (b"gr_util", b"Graphics utilization", b"%"),
    2: (b"sm_util", b"SM utilization", b"%"),
    3: (b"sm_occupancy", b"SM occupancy", b"%"),
    5: (b"any_tensor_util", b"Any tensor utilization", b"%"),
    10: (b"dram_bw_util", b"DRAM bandwidth utilization", b"%"),
    20: (b"pcie_tx", b"PCIe TX", b"MiB/sec"),
    21: (b"pcie_rx", b"PCIe RX", b"MiB/sec"),
    60: (b"nvlink_rx", b"NVLink total RX", b"MiB/sec"),
    61: (b"nvlink_tx", b"NVLink total TX", b"MiB/sec"),
}


def metric_value(metric_id: int, act: Act, nvlink: bool) -> float | None:
    """The value of one GPM metric for a mean activity; None when not modelled."""
    if metric_id in _PERCENT:
        return min(100.0 * act.metrics()[_PERCENT[metric_id]], 100.0)
    if metric_id in _RATE:
        return act.metrics()[_RATE[metric_id]]
    if metric_id in _NVLINK_RATE and nvlink:
        return act.metrics()[_NVLINK_RATE[metric_id]]
    return None


class InvalidSampleError(LookupError):
    """A sample pointer that was not allocated here (or is NULL, or was freed)."""


class GpmSamples:
    """The sample buffers allocated through the stand-in."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._buffers: dict[int, Any] = {}
        self._taken: dict[int, _Taken] = {}

    @staticmethod
    def _address(sample: Any) -> int:
        try:
            return ctypes.addressof(sample.contents)
        except (AttributeError, ValueError, TypeError) as exc:
            raise InvalidSampleError from exc

    def alloc(self) -> Any:
        """A fresh `c_nvmlGpmSample_t`."""
        buffer = pynvml.struct_c_nvmlGpmSample_t()
        with self._lock:
            self._buffers[ctypes.addressof(buffer)] = buffer
        return pynvml.c_nvmlGpmSample_t(buffer)

    def free(self, sample: Any) -> None:
        """Forget a sample; raises InvalidSampleError when it is not ours."""
        address = self._address(sample)
        with self._lock:
            if self._buffers.pop(address, None) is None:
                raise InvalidSampleError
            self._taken.pop(address, None)

    def record(self, sample: Any, source: GpmSource, nvlink: bool, t: float) -> None:
        """Remember that `sample` was taken from `source` at scenario time `t`."""
        address = self._address(sample)
        with self._lock:
            if address not in self._buffers:
                raise InvalidSampleError
            self._taken[address] = _Taken(source, nvlink, t)

    def fill(self, request: Any) -> str | None:
        """Fill `request.metrics`; why not when the two samples cannot be compared."""
        try:
            address1 = self._address(request.sample1)
            address2 = self._address(request.sample2)
        except InvalidSampleError:
            return "a sample is not a GPM sample buffer"
        first = self._taken.get(address1)
        second = self._taken.get(address2)
        if address1 == address2:
            return "sample1 and sample2 are the same buffer"
        if first is None or second is None:
            return "a sample buffer holds no sample"
        if first.source is not second.source:
            return "the samples come from different devices"
        if second.t < first.t:
            return "sample2 is older than sample1 (swapped)"
        if second.t == first.t:
            return "the samples were taken at the same time (zero interval)"
        act = first.source.average(first.t, second.t)
        for i in range(int(request.numMetrics)):
            metric = request.metrics[i]
            metric_id = int(metric.metricId)
            value = metric_value(metric_id, act, first.nvlink)
            if value is None:
                metric.nvmlReturn = pynvml.NVML_ERROR_NOT_SUPPORTED
                metric.value = 0.0
                continue
            metric.nvmlReturn = pynvml.NVML_SUCCESS
            metric.value = value
            short, long, unit = _INFO[metric_id]
            metric.metricInfo.shortName = short
            metric.metricInfo.longName = long
            metric.metricInfo.unit = unit
        return None
