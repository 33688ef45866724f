"""The NVML collector: every GPU's tick reading, and the slow readings on their own job."""

from __future__ import annotations

import logging

from gpuwatch.clock import Clock
from gpuwatch.collectors.base import CollectorFailedError, timed
from gpuwatch.nvml import DriverError, NvmlSampler
from gpuwatch.snapshot import CollectorResult, GpuSample

log = logging.getLogger(__name__)


class NvmlCollector:
    """Wraps `NvmlSampler` in the collector contract."""

    name = "nvml"

    def __init__(self, sampler: NvmlSampler, clock: Clock) -> None:
        self._sampler = sampler
        self._clock = clock
        self._slow_result = CollectorResult("nvml_slow", True, 0.0)

    def collect(self) -> tuple[tuple[GpuSample, ...], list[CollectorResult]]:
        """GPU samples plus the results of nvml, nvml_slow and xid."""
        gpus, result = timed(
            self.name, self._clock, self._sample, failed=self._sampler.down_samples
        )
        xid = CollectorResult("xid", self._sampler.xid_healthy, 0.0)
        return gpus, [result, self._slow_result, xid]

    def _sample(self) -> tuple[GpuSample, ...]:
        try:
            return self._sampler.sample()
        except DriverError as exc:
            raise CollectorFailedError(str(exc)) from exc

    def collect_slow(self) -> None:
        """Refresh PCIe, ECC, remapped rows and MIG layout (may block for tens of ms)."""
        _, self._slow_result = timed("nvml_slow", self._clock, self._slow, failed=lambda: None)

    def _slow(self) -> None:
        if not self._sampler.initialized:
            raise CollectorFailedError("NVML is not initialised")
        self._sampler.sample_slow()
