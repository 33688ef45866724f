"""One GPU behind NVML: identity, remembered capabilities, and one tick's reading.

`NvmlDevice` owns everything per device that must survive between ticks: the handle,
the set of calls this device cannot answer (probed once: NotSupported, FunctionNotFound
and NoPermission are remembered), the two GPM sample buffers, the last process-
utilization timestamp and per-process samples (held up to 10 s), the process-name cache
and the slow readings (PCIe, ECC, remapped rows, MIG layout) that a separate job
refreshes.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any, TypeVar

from gpuwatch.clock import Clock
from gpuwatch.nvml import parse
from gpuwatch.nvml.errors import (
    DeviceLostError,
    DriverError,
    NvmlErrorKind,
    classify,
    describe,
)
from gpuwatch.snapshot import GpuIdentity, GpuSample, MigInstanceSample, ProcessSample

log = logging.getLogger(__name__)

T = TypeVar("T")

GPM_SM_UTIL = 2
GPM_SM_OCCUPANCY = 3
GPM_ANY_TENSOR_UTIL = 5
GPM_DRAM_BW_UTIL = 10
GPM_PCIE_TX = 20
GPM_PCIE_RX = 21
GPM_METRIC_IDS = (
    GPM_SM_UTIL,
    GPM_SM_OCCUPANCY,
    GPM_ANY_TENSOR_UTIL,
    GPM_DRAM_BW_UTIL,
    GPM_PCIE_TX,
    GPM_PCIE_RX,
)
ALL_LINKS = 0xFFFFFFFF
"""NVML field-value scopeId that sums a per-link field over every NVLink."""
GPM_MIN_INTERVAL_SECONDS = 0.1
"""GPM needs its two samples at least 100 ms apart."""


@dataclass(frozen=True, slots=True)
class SlowReadings:
    """Values read on the slow job: calls that block or change rarely."""

    pcie_tx_bytes_per_second: float | None = None
    pcie_rx_bytes_per_second: float | None = None
    ecc_uncorrected_errors_total: int | None = None
    ecc_corrected_errors_total: int | None = None
    remapped_rows_correctable: int | None = None
    remapped_rows_uncorrectable: int | None = None
    remapped_rows_pending: bool | None = None
    remapped_rows_failure: bool | None = None
    mig_enabled: bool | None = None
    mig_devices: tuple[MigDevice, ...] = ()
    power_limit_watts: float | None = None  # re-read: `nvidia-smi -pl` changes it


@dataclass(frozen=True, slots=True)
class MigDevice:
    """A MIG device handle with its ids (re-read on the slow job)."""

    handle: Any
    uuid: str
    gpu_instance_id: int
    compute_instance_id: int


class _GpmBuffers:
    """Two rolling GPM sample buffers; each tick fills one and compares with the other."""

    def __init__(self, nv: Any) -> None:
        self._nv = nv
        self.previous: Any = nv.nvmlGpmSampleAlloc()
        self.current: Any = nv.nvmlGpmSampleAlloc()
        self.previous_time: float | None = None

    def free(self) -> None:
        for sample in (self.previous, self.current):
            try:
                self._nv.nvmlGpmSampleFree(sample)
            except self._nv.NVMLError as exc:
                log.debug("GPM sample free failed: %s", describe(exc))

    def swap(self, now: float) -> None:
        self.previous, self.current = self.current, self.previous
        self.previous_time = now


class NvmlDevice:
    """A GPU (by index) and its per-device sampling state."""

    def __init__(self, nv: Any, index: int, clock: Clock) -> None:
        self._nv = nv
        self._clock = clock
        self.index = index
        self.unsupported: set[str] = set()
        self.handle: Any = self._call("handle", nv.nvmlDeviceGetHandleByIndex, index)
        self.identity = self._read_identity()
        self._gpm: _GpmBuffers | None = None
        self._mig_gpm: dict[int, _GpmBuffers] = {}
        if self.identity.gpm_supported:
            self._gpm = self._guard("gpm", lambda: _GpmBuffers(nv))
        self._process_util_last_us = 0
        self._process_util: dict[int, tuple[float, float]] = {}  # pid: (ratio, received at)
        self._process_names: dict[int, str] = {}
        self.slow = SlowReadings()

    # -- the one call helper -------------------------------------------------------

    def _call(self, key: str, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Call NVML; raise DeviceLostError/DriverError, or the error for the caller.

        Unsupported errors are remembered under `key` and re-raised once.
        """
        try:
            return fn(*args, **kwargs)
        except self._nv.NVMLError as exc:
            kind = classify(exc)
            if kind is NvmlErrorKind.UNSUPPORTED:
                if key not in self.unsupported:
                    log.debug("GPU %d: %s unsupported: %s", self.index, key, describe(exc))
                    self.unsupported.add(key)
                raise
            if kind is NvmlErrorKind.DEVICE_LOST:
                raise DeviceLostError(describe(exc)) from exc
            if kind is NvmlErrorKind.DRIVER:
                raise DriverError(describe(exc)) from exc
            raise

    def _optional(self, key: str, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T | None:
        """A value the device may not have: None when unsupported (asked once) or absent."""
        if key in self.unsupported:
            return None
        try:
            return self._call(key, fn, *args, **kwargs)
        except self._nv.NVMLError as exc:
            if classify(exc) is NvmlErrorKind.TRANSIENT:
                log.debug("GPU %d: %s failed: %s", self.index, key, describe(exc))
            return None

    def _first_answer(self, *calls: tuple[str, Callable[[Any], T]]) -> T | None:
        """The first of several versions of a call that this device supports."""
        for key, fn in calls:
            value = self._optional(key, fn, self.handle)
            if value is not None or key not in self.unsupported:
                return value
        return None

    def _guard(self, key: str, fn: Callable[[], T]) -> T | None:
        return self._optional(key, fn)

    # -- identity --------------------------------------------------------------------

    def _read_identity(self) -> GpuIdentity:
        nv, h = self._nv, self.handle
        uuid = parse.text(self._call("uuid", nv.nvmlDeviceGetUUID, h))
        name = parse.text(self._call("name", nv.nvmlDeviceGetName, h))
        serial = self._optional("serial", nv.nvmlDeviceGetSerial, h)
        pci = self._optional("pci", nv.nvmlDeviceGetPciInfo, h)
        memory = self._read_memory()
        limit_mw = self._optional("power_limit", nv.nvmlDeviceGetEnforcedPowerLimit, h)
        gpm = self._optional("gpm_support", nv.nvmlGpmQueryDeviceSupport, h)
        return GpuIdentity(
            index=self.index,
            uuid=uuid,
            name=name,
            serial=None if serial is None else parse.text(serial),
            pci_bus_id=parse.text(pci.busId) if pci is not None else "",
            memory_total_bytes=None if memory is None else memory.total_bytes,
            power_limit_watts=None if limit_mw is None else parse.milliwatts_to_watts(limit_mw),
            gpm_supported=bool(gpm is not None and gpm.isSupportedDevice),
        )

    # -- per tick --------------------------------------------------------------------

    def _read_memory(self, handle: Any = None, key_prefix: str = "") -> parse.MemoryReading | None:
        nv = self._nv
        h = self.handle if handle is None else handle
        info = self._optional(
            key_prefix + "memory_v2", nv.nvmlDeviceGetMemoryInfo, h, version=nv.nvmlMemory_v2
        )
        if info is None:
            info = self._optional(key_prefix + "memory_v1", nv.nvmlDeviceGetMemoryInfo, h)
        return None if info is None else parse.parse_memory(info)

    def sample(
        self, xid_counts: tuple[tuple[int, int], ...] = (), last_xid: int | None = None
    ) -> GpuSample:
        """Read one tick; a lost GPU gives `up=False` and the others are unaffected.

        Raises DriverError when NVML as a whole has failed.
        """
        try:
            return self._sample(xid_counts, last_xid)
        except DeviceLostError as exc:
            return GpuSample(
                identity=self.identity,
                up=False,
                error=str(exc),
                xid_errors_total=xid_counts,
                last_xid=last_xid,
            )

    def _sample(self, xid_counts: tuple[tuple[int, int], ...], last_xid: int | None) -> GpuSample:
        nv, h = self._nv, self.handle
        now = self._clock.monotonic()
        memory = self._read_memory()
        rates = self._optional("utilization", nv.nvmlDeviceGetUtilizationRates, h)
        power_mw = self._optional("power", nv.nvmlDeviceGetPowerUsage, h)
        energy_mj = self._optional("energy", nv.nvmlDeviceGetTotalEnergyConsumption, h)
        temperature = self._read_temperature()
        clock_sm = self._optional("clock_sm", nv.nvmlDeviceGetClockInfo, h, nv.NVML_CLOCK_SM)
        clock_mem = self._optional("clock_mem", nv.nvmlDeviceGetClockInfo, h, nv.NVML_CLOCK_MEM)
        reasons = self._first_answer(
            ("clock_event_reasons", nv.nvmlDeviceGetCurrentClocksEventReasons),
            ("clock_throttle_reasons", nv.nvmlDeviceGetCurrentClocksThrottleReasons),  # < R535
        )
        nvlink_tx, nvlink_rx = self._read_nvlink()
        gpm = self._read_gpm(self._gpm, now, None)
        processes = self._read_processes()
        slow = self.slow
        pcie_tx, pcie_rx = slow.pcie_tx_bytes_per_second, slow.pcie_rx_bytes_per_second
        if GPM_PCIE_TX in gpm:
            pcie_tx = parse.mebibytes_per_second_to_bytes(gpm[GPM_PCIE_TX])
        if GPM_PCIE_RX in gpm:
            pcie_rx = parse.mebibytes_per_second_to_bytes(gpm[GPM_PCIE_RX])
        return GpuSample(
            identity=self.identity,
            up=True,
            memory_used_bytes=None if memory is None else memory.used_bytes,
            memory_free_bytes=None if memory is None else memory.free_bytes,
            memory_reserved_bytes=None if memory is None else memory.reserved_bytes,
            utilization_ratio=None if rates is None else parse.percent_to_ratio(rates.gpu),
            memory_busy_ratio=None if rates is None else parse.percent_to_ratio(rates.memory),
            sm_active_ratio=parse.percent_to_ratio(gpm.get(GPM_SM_UTIL)),
            sm_occupancy_ratio=parse.percent_to_ratio(gpm.get(GPM_SM_OCCUPANCY)),
            dram_bandwidth_ratio=parse.percent_to_ratio(gpm.get(GPM_DRAM_BW_UTIL)),
            tensor_active_ratio=parse.percent_to_ratio(gpm.get(GPM_ANY_TENSOR_UTIL)),
            power_watts=None if power_mw is None else parse.milliwatts_to_watts(power_mw),
            energy_joules_total=(
                None if energy_mj is None else parse.millijoules_to_joules(energy_mj)
            ),
            temperature_celsius=None if temperature is None else float(temperature),
            clock_sm_hertz=None if clock_sm is None else parse.megahertz_to_hertz(clock_sm),
            clock_memory_hertz=None if clock_mem is None else parse.megahertz_to_hertz(clock_mem),
            throttle_reasons=(
                None if reasons is None else parse.decode_clock_event_reasons(int(reasons))
            ),
            pcie_tx_bytes_per_second=pcie_tx,
            pcie_rx_bytes_per_second=pcie_rx,
            nvlink_tx_bytes_total=nvlink_tx,
            nvlink_rx_bytes_total=nvlink_rx,
            ecc_uncorrected_errors_total=slow.ecc_uncorrected_errors_total,
            ecc_corrected_errors_total=slow.ecc_corrected_errors_total,
            remapped_rows_correctable=slow.remapped_rows_correctable,
            remapped_rows_uncorrectable=slow.remapped_rows_uncorrectable,
            remapped_rows_pending=slow.remapped_rows_pending,
            remapped_rows_failure=slow.remapped_rows_failure,
            mig_enabled=slow.mig_enabled,
            power_limit_watts=slow.power_limit_watts,
            mig_instances=self._read_mig(now),
            processes=processes,
            xid_errors_total=xid_counts,
            last_xid=last_xid,
        )

    def _read_temperature(self) -> int | None:
        nv, h = self._nv, self.handle
        value = self._optional(
            "temperature_v", nv.nvmlDeviceGetTemperatureV, h, nv.NVML_TEMPERATURE_GPU
        )
        if value is None and "temperature_v" in self.unsupported:
            value = self._optional(
                "temperature", nv.nvmlDeviceGetTemperature, h, nv.NVML_TEMPERATURE_GPU
            )
        return None if value is None else int(value)

    def _read_nvlink(self) -> tuple[float | None, float | None]:
        nv = self._nv
        # scopeId UINT_MAX: the sum over all links (no scope would be link 0 only)
        fields = [
            (nv.NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX, ALL_LINKS),
            (nv.NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX, ALL_LINKS),
        ]
        values = self._optional("nvlink", nv.nvmlDeviceGetFieldValues, self.handle, fields)
        if values is None:
            return None, None
        tx, rx = parse.field_values_kib_to_bytes(values, nv.NVML_SUCCESS)
        if tx is None and rx is None:
            self.unsupported.add("nvlink")
        return tx, rx

    def _read_gpm(
        self, buffers: _GpmBuffers | None, now: float, gpu_instance_id: int | None
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
            request = nv.c_nvmlGpmMetricsGet_t()
            request.version = nv.NVML_GPM_METRICS_GET_VERSION
            request.numMetrics = len(GPM_METRIC_IDS)
            request.sample1 = buffers.previous
            request.sample2 = buffers.current
            for i, metric_id in enumerate(GPM_METRIC_IDS):
                request.metrics[i].metricId = metric_id
            result = self._optional("gpm_metrics", nv.nvmlGpmMetricsGet, request)
            if result is not None:
                values = parse.gpm_values(result.metrics, len(GPM_METRIC_IDS), nv.NVML_SUCCESS)
        buffers.swap(now)
        return values

    def _read_processes(self) -> tuple[ProcessSample, ...] | None:
        nv = self._nv
        # the versioned calls: pynvml's unversioned ones raise a non-NVML exception on
        # drivers without the _v3 symbol (before R510); fall back to _v2 there
        compute = self._first_answer(
            ("processes_compute_v3", nv.nvmlDeviceGetComputeRunningProcesses_v3),
            ("processes_compute_v2", nv.nvmlDeviceGetComputeRunningProcesses_v2),
        )
        graphics = self._first_answer(
            ("processes_graphics_v3", nv.nvmlDeviceGetGraphicsRunningProcesses_v3),
            ("processes_graphics_v2", nv.nvmlDeviceGetGraphicsRunningProcesses_v2),
        )
        if compute is None and graphics is None:
            return None
        raw = parse.merge_processes(compute or (), graphics or ())
        utilization = self._read_process_utilization(raw)
        self._process_names = parse.pid_names(self._process_names, (p.pid for p in raw))
        samples = []
        for proc in raw:
            name = self._process_names.get(proc.pid)
            if name is None:
                found = self._optional("process_name", nv.nvmlSystemGetProcessName, proc.pid)
                name = "" if found is None else parse.text(found)
                self._process_names[proc.pid] = name
            samples.append(
                ProcessSample(
                    pid=proc.pid,
                    name=name,
                    kind=proc.kind,
                    memory_used_bytes=proc.memory_used_bytes,
                    sm_utilization_ratio=None if utilization is None else utilization.get(proc.pid),
                    gpu_instance_id=proc.gpu_instance_id,
                    compute_instance_id=proc.compute_instance_id,
                )
            )
        return tuple(samples)

    def _read_process_utilization(
        self, processes: Sequence[parse.RawProcess]
    ) -> dict[int, float] | None:
        """Per-pid SM utilization ratio; None when the device cannot say at all.

        A pid without a sample newer than `parse.PROCESS_UTILIZATION_HOLD_SECONDS` is
        left out (its value is unknown, not 0): NotFound only means that NVML has no
        sample newer than the last one read.
        """
        nv = self._nv
        key = "process_utilization"
        if key in self.unsupported:
            return None
        fresh: dict[int, float] = {}
        try:
            samples = self._call(
                key, nv.nvmlDeviceGetProcessUtilization, self.handle, self._process_util_last_us
            )
        except nv.NVMLError as exc:
            if classify(exc) not in (NvmlErrorKind.NOT_FOUND, NvmlErrorKind.TRANSIENT):
                return None
        else:
            fresh, self._process_util_last_us = parse.latest_process_utilization(
                samples, self._process_util_last_us
            )
        running = {p.pid for p in processes}
        held = parse.held_process_utilization(self._process_util, fresh, self._clock.monotonic())
        self._process_util = {pid: entry for pid, entry in held.items() if pid in running}
        return {pid: ratio for pid, (ratio, _) in self._process_util.items()}

    def _read_mig(self, now: float) -> tuple[MigInstanceSample, ...]:
        devices = self.slow.mig_devices
        if not devices:
            return ()
        instances = []
        gpm_by_instance: dict[int, dict[int, float]] = {}  # GPM is per GPU instance
        for mig in devices:
            memory = self._read_memory(mig.handle, key_prefix="mig_")
            gi = mig.gpu_instance_id
            if gi not in gpm_by_instance:  # compute instances of one GPU instance share it
                buffers = self._mig_gpm.get(gi)
                if buffers is None and self._gpm is not None:
                    buffers = self._guard("gpm_mig_alloc", lambda: _GpmBuffers(self._nv))
                    if buffers is not None:
                        self._mig_gpm[gi] = buffers
                gpm_by_instance[gi] = self._read_gpm(buffers, now, gi)
            gpm = gpm_by_instance[gi]
            instances.append(
                MigInstanceSample(
                    uuid=mig.uuid,
                    gpu_instance_id=mig.gpu_instance_id,
                    compute_instance_id=mig.compute_instance_id,
                    memory_total_bytes=None if memory is None else memory.total_bytes,
                    memory_used_bytes=None if memory is None else memory.used_bytes,
                    sm_active_ratio=parse.percent_to_ratio(gpm.get(GPM_SM_UTIL)),
                    sm_occupancy_ratio=parse.percent_to_ratio(gpm.get(GPM_SM_OCCUPANCY)),
                    dram_bandwidth_ratio=parse.percent_to_ratio(gpm.get(GPM_DRAM_BW_UTIL)),
                    tensor_active_ratio=parse.percent_to_ratio(gpm.get(GPM_ANY_TENSOR_UTIL)),
                )
            )
        return tuple(instances)

    # -- the slow job ------------------------------------------------------------------

    def sample_slow(self) -> None:
        """Refresh PCIe (a blocking call), ECC, remapped rows and the MIG layout."""
        nv, h = self._nv, self.handle
        pcie_tx = pcie_rx = None
        if not self.identity.gpm_supported or "gpm" in self.unsupported:  # no GPM 20/21
            tx = self._optional(
                "pcie", nv.nvmlDeviceGetPcieThroughput, h, nv.NVML_PCIE_UTIL_TX_BYTES
            )
            rx = self._optional(
                "pcie", nv.nvmlDeviceGetPcieThroughput, h, nv.NVML_PCIE_UTIL_RX_BYTES
            )
            pcie_tx = None if tx is None else parse.kilobytes_per_second_to_bytes(tx)
            pcie_rx = None if rx is None else parse.kilobytes_per_second_to_bytes(rx)
        uncorrected = self._optional(
            "ecc",
            nv.nvmlDeviceGetTotalEccErrors,
            h,
            nv.NVML_MEMORY_ERROR_TYPE_UNCORRECTED,
            nv.NVML_VOLATILE_ECC,
        )
        corrected = self._optional(
            "ecc",
            nv.nvmlDeviceGetTotalEccErrors,
            h,
            nv.NVML_MEMORY_ERROR_TYPE_CORRECTED,
            nv.NVML_VOLATILE_ECC,
        )
        remapped = self._optional("remapped_rows", nv.nvmlDeviceGetRemappedRows, h)
        mig_mode = self._optional("mig_mode", nv.nvmlDeviceGetMigMode, h)
        limit_mw = self._optional("power_limit", nv.nvmlDeviceGetEnforcedPowerLimit, h)
        mig_enabled = None if mig_mode is None else bool(mig_mode[0])  # current, not pending
        was = self.slow.mig_enabled
        if mig_enabled is not None and was is not None and mig_enabled != was:
            self._mig_mode_changed(mig_enabled)
        self.slow = SlowReadings(
            pcie_tx_bytes_per_second=pcie_tx,
            pcie_rx_bytes_per_second=pcie_rx,
            ecc_uncorrected_errors_total=None if uncorrected is None else int(uncorrected),
            ecc_corrected_errors_total=None if corrected is None else int(corrected),
            remapped_rows_correctable=None if remapped is None else int(remapped[0]),
            remapped_rows_uncorrectable=None if remapped is None else int(remapped[1]),
            remapped_rows_pending=None if remapped is None else bool(remapped[2]),
            remapped_rows_failure=None if remapped is None else bool(remapped[3]),
            mig_enabled=mig_enabled,
            mig_devices=self._read_mig_layout() if mig_enabled else (),
            power_limit_watts=None if limit_mw is None else parse.milliwatts_to_watts(limit_mw),
        )

    def _mig_mode_changed(self, enabled: bool) -> None:
        """MIG went on or off: what this GPU cannot answer changes, so ask everything again."""
        log.info("GPU %d: MIG mode is now %s", self.index, "on" if enabled else "off")
        self.unsupported.clear()
        for buffers in self._mig_gpm.values():
            buffers.free()
        self._mig_gpm = {}

    def _read_mig_layout(self) -> tuple[MigDevice, ...]:
        nv, h = self._nv, self.handle
        count = self._optional("mig_count", nv.nvmlDeviceGetMaxMigDeviceCount, h)
        devices = []
        for slot in range(count or 0):
            try:
                mig = self._call("mig_handle", nv.nvmlDeviceGetMigDeviceHandleByIndex, h, slot)
            except nv.NVMLError:
                continue  # NotFound: an empty slot
            gi = self._optional("mig_gi", nv.nvmlDeviceGetGpuInstanceId, mig)
            ci = self._optional("mig_ci", nv.nvmlDeviceGetComputeInstanceId, mig)
            uuid = self._optional("mig_uuid", nv.nvmlDeviceGetUUID, mig)
            if gi is None or ci is None or uuid is None:
                continue
            devices.append(MigDevice(mig, parse.text(uuid), int(gi), int(ci)))
        return tuple(devices)

    def mark_slow_failed(self) -> None:
        """Forget slow readings after a failure so no stale value is exported."""
        self.slow = replace(SlowReadings(), mig_enabled=self.slow.mig_enabled)

    def close(self) -> None:
        """Free the GPM buffers."""
        for buffers in [self._gpm, *self._mig_gpm.values()]:
            if buffers is not None:
                buffers.free()
        self._gpm = None
        self._mig_gpm = {}
