"""The NVML collector: every GPU's tick reading, and the slow readings on their own job.

Whatever goes wrong in a sample, NVML's errors or a bug the adapter has not met yet (an
exception that is not NVML's), the tick is reported as `gpuwatch_collector_success
{collector="nvml"} 0` with every GPU down: `/metrics` never freezes on the last good
sample while calling the collector healthy. An unexpected exception is logged once (with
its traceback) per exception type.
"""

from __future__ import annotations

import logging

from gpuwatch.collectors.base import timed
from gpuwatch.core.clock import Clock
from gpuwatch.core.failures import CollectorFailedError
from gpuwatch.core.snapshot import CollectorResult, GpuSample
from gpuwatch.nvml import DriverError, NvmlSampler

log = logging.getLogger(__name__)


class NvmlCollector:
    """Wraps `NvmlSampler` in the collector contract."""

    name = "nvml"

    def __init__(self, sampler: NvmlSampler, clock: Clock) -> None:
        self._sampler = sampler
        self._clock = clock
        self._slow_result = CollectorResult("nvml_slow", True, 0.0)
        self._logged: set[str] = set()

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
        except Exception as exc:
            raise CollectorFailedError(self._unexpected("sampling", exc)) from exc

    def _unexpected(self, what: str, exc: Exception) -> str:
        """Log an unexpected exception once per type; the reason for the failed result."""
        name = type(exc).__name__
        if name not in self._logged:
            self._logged.add(name)
            log.exception("NVML %s failed unexpectedly; reported as a collector failure", what)
        return f"{what} failed: {name}"

    def collect_slow(self) -> None:
        """Refresh PCIe, ECC, remapped rows and MIG layout (may block for tens of ms)."""
        _, self._slow_result = timed("nvml_slow", self._clock, self._slow, failed=lambda: None)

    def _slow(self) -> None:
        if not self._sampler.initialized:
            raise CollectorFailedError("NVML is not initialised")
        try:
            self._sampler.sample_slow()
        except Exception as exc:
            raise CollectorFailedError(self._unexpected("slow sampling", exc)) from exc
