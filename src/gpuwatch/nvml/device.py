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
from typing import Any, NamedTuple, TypeVar

from gpuwatch.clock import Clock
from gpuwatch.nvml import parse, processes
from gpuwatch.nvml.api import NvmlApi
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
GPM_MIG_METRIC_IDS = (GPM_SM_UTIL, GPM_SM_OCCUPANCY, GPM_ANY_TENSOR_UTIL, GPM_DRAM_BW_UTIL)
"""What a GPU instance exports (PCIe is the whole GPU's)."""
GPM_METRIC_IDS = (*GPM_MIG_METRIC_IDS, GPM_PCIE_TX, GPM_PCIE_RX)
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
    pcie_replay_errors_total: int | None = None
    mig_enabled: bool | None = None
    mig_devices: tuple[MigDevice, ...] = ()
    power_limit_watts: float | None = None  # re-read: `nvidia-smi -pl` changes it


class _Counters(NamedTuple):
    """What the per-tick field-values call read (None: absent or unsupported)."""

    energy_mj: int | None
    nvlink_tx_bytes: float | None
    nvlink_rx_bytes: float | None
    memory_temperature_c: float | None


@dataclass(frozen=True, slots=True)
class MigDevice:
    """A MIG device handle with its ids (re-read on the slow job)."""

    handle: Any
    uuid: str
    gpu_instance_id: int
    compute_instance_id: int


class _GpmBuffers:
    """Two rolling GPM sample buffers; each tick fills one and compares with the other.

    The metrics request is built once (its metric ids never change) and reused: each
    comparison only sets its two samples.
    """

    def __init__(self, nv: NvmlApi, metric_ids: tuple[int, ...]) -> None:
        self._nv = nv
        self.previous: Any = nv.nvmlGpmSampleAlloc()
        self.current: Any = nv.nvmlGpmSampleAlloc()
        self.previous_time: float | None = None
        self.metric_ids = metric_ids
        request = nv.c_nvmlGpmMetricsGet_t()
        request.version = nv.NVML_GPM_METRICS_GET_VERSION
        request.numMetrics = len(metric_ids)
        for i, metric_id in enumerate(metric_ids):
            request.metrics[i].metricId = metric_id
        self.request: Any = request

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

    def __init__(self, nv: NvmlApi, index: int, clock: Clock) -> None:
        self._nv = nv
        self._clock = clock
        self.index = index
        self.unsupported: set[str] = set()
        self.handle: Any = self._call("handle", nv.nvmlDeviceGetHandleByIndex, index)
        self.identity = self._read_identity()
        self._gpm: _GpmBuffers | None = None
        self._mig_gpm: dict[int, _GpmBuffers] = {}
        if self.identity.gpm_supported:
            self._gpm = self._guard("gpm", lambda: _GpmBuffers(nv, GPM_METRIC_IDS))
        self._process_util_last_us = 0
        self._process_util: dict[int, tuple[float, float]] = {}  # pid: (ratio, received at)
        self._process_names: dict[int, str] = {}
        self._mig_slots: int | None = None  # nvmlDeviceGetMaxMigDeviceCount while MIG is on
        self._mig_ids: dict[str, tuple[int, int]] = {}  # MIG UUID: (GPU, compute instance id)
        self._process_calls: processes.ProcessCalls | None = None
        self._process_calls_known = False
        self._nvlink_last: tuple[float, float] | None = None  # (monotonic s, TX + RX bytes)
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
                raise DriverError(describe(exc), error_name=type(exc).__name__) from exc
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
        minor = self._optional("minor_number", nv.nvmlDeviceGetMinorNumber, h)
        return GpuIdentity(
            index=self.index,
            uuid=uuid,
            name=name,
            serial=None if serial is None else parse.text(serial),
            pci_bus_id=parse.text(pci.busId) if pci is not None else "",
            memory_total_bytes=None if memory is None else memory.total_bytes,
            power_limit_watts=None if limit_mw is None else parse.milliwatts_to_watts(limit_mw),
            gpm_supported=bool(gpm is not None and gpm.isSupportedDevice),
            minor_number=None if minor is None else int(minor),
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
        counters = self._read_counters()
        nvlink_tx, nvlink_rx = counters.nvlink_tx_bytes, counters.nvlink_rx_bytes
        energy_mj = counters.energy_mj
        temperature = self._read_temperature()
        encoder = self._optional("encoder_utilization", nv.nvmlDeviceGetEncoderUtilization, h)
        decoder = self._optional("decoder_utilization", nv.nvmlDeviceGetDecoderUtilization, h)
        clock_sm = self._optional("clock_sm", nv.nvmlDeviceGetClockInfo, h, nv.NVML_CLOCK_SM)
        clock_mem = self._optional("clock_mem", nv.nvmlDeviceGetClockInfo, h, nv.NVML_CLOCK_MEM)
        reasons = self._first_answer(
            ("clock_event_reasons", nv.nvmlDeviceGetCurrentClocksEventReasons),
            ("clock_throttle_reasons", nv.nvmlDeviceGetCurrentClocksThrottleReasons),  # < R535
        )
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
            nvlink_bytes_per_second=self._nvlink_rate(now, nvlink_tx, nvlink_rx),
            ecc_uncorrected_errors_total=slow.ecc_uncorrected_errors_total,
            ecc_corrected_errors_total=slow.ecc_corrected_errors_total,
            remapped_rows_correctable=slow.remapped_rows_correctable,
            remapped_rows_uncorrectable=slow.remapped_rows_uncorrectable,
            remapped_rows_pending=slow.remapped_rows_pending,
            remapped_rows_failure=slow.remapped_rows_failure,
            encoder_utilization_ratio=(
                None if encoder is None else parse.percent_to_ratio(encoder[0])
            ),
            decoder_utilization_ratio=(
                None if decoder is None else parse.percent_to_ratio(decoder[0])
            ),
            memory_temperature_celsius=counters.memory_temperature_c,
            pcie_replay_errors_total=slow.pcie_replay_errors_total,
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

    def _read_counters(self) -> _Counters:
        """Energy (mJ), NVLink data TX/RX (bytes, all links) and the memory temperature
        (°C, `NVML_FI_DEV_MEMORY_TEMP`: HBM parts) in one field-values call.

        Each entry carries its own return code: NotSupported (or NoPermission) for the
        energy entry, the memory temperature, or both NVLink entries, is remembered and
        that field is no longer asked for. Without `nvmlDeviceGetFieldValues` at all,
        energy comes from `nvmlDeviceGetTotalEnergyConsumption`; NVLink and the memory
        temperature (no call of their own answers them) are absent.
        """
        nv = self._nv
        if "field_values" in self.unsupported:
            energy = self._optional("energy", nv.nvmlDeviceGetTotalEnergyConsumption, self.handle)
            return _Counters(energy, None, None, None)
        fields: list[tuple[str, int, int]] = []
        if "energy" not in self.unsupported:
            fields.append(("energy", nv.NVML_FI_DEV_TOTAL_ENERGY_CONSUMPTION, 0))
        if "nvlink" not in self.unsupported:
            # scopeId UINT_MAX: the sum over all links (no scope would be link 0 only)
            fields.append(("nvlink_tx", nv.NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX, ALL_LINKS))
            fields.append(("nvlink_rx", nv.NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX, ALL_LINKS))
        if "memory_temperature" not in self.unsupported:
            fields.append(("memory_temperature", nv.NVML_FI_DEV_MEMORY_TEMP, 0))
        got = self._read_fields(fields)
        if "field_values" in self.unsupported:  # just learnt: this tick's energy by its call
            return self._read_counters()
        if {"nvlink_tx", "nvlink_rx"} <= self.unsupported:
            self.unsupported.add("nvlink")
        energy_field = got.get("energy")
        tx, rx = got.get("nvlink_tx"), got.get("nvlink_rx")
        memory_temperature = got.get("memory_temperature")
        return _Counters(
            None if energy_field is None else int(energy_field),
            None if tx is None else parse.kibibytes_to_bytes(tx),
            None if rx is None else parse.kibibytes_to_bytes(rx),
            None if memory_temperature is None else float(memory_temperature),
        )

    def _nvlink_rate(self, now: float, tx: float | None, rx: float | None) -> float | None:
        """NVLink TX + RX data bytes per second since the previous tick's counters.

        None on the first reading, when either counter is missing, when no time passed,
        and when the sum went down (the driver was reloaded: the next tick has a rate).
        """
        if tx is None or rx is None:
            self._nvlink_last = None
            return None
        total = tx + rx
        last, self._nvlink_last = self._nvlink_last, (now, total)
        if last is None or now <= last[0] or total < last[1]:
            return None
        return (total - last[1]) / (now - last[0])

    def _read_fields(self, fields: Sequence[tuple[str, int, int]]) -> dict[str, float | None]:
        """One `nvmlDeviceGetFieldValues` call for (key, field id, scope id) entries.

        Returns {key: value or None}. A key whose entry answered NotSupported or
        NoPermission is remembered in `self.unsupported` (and its value is None).
        """
        if not fields:
            return {}
        nv = self._nv
        request = [(field_id, scope) for _, field_id, scope in fields]
        values = self._optional("field_values", nv.nvmlDeviceGetFieldValues, self.handle, request)
        if values is None:
            return {}
        unsupported = (nv.NVML_ERROR_NOT_SUPPORTED, nv.NVML_ERROR_NO_PERMISSION)
        got: dict[str, float | None] = {}
        for (key, _, _), (code, value) in zip(
            fields, parse.field_values(values, nv.NVML_SUCCESS), strict=True
        ):
            if code in unsupported and key not in self.unsupported:
                log.debug("GPU %d: field %s unsupported (NVML return %d)", self.index, key, code)
                self.unsupported.add(key)
            got[key] = value
        return got

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
            request = buffers.request
            request.sample1 = buffers.previous
            request.sample2 = buffers.current
            result = self._optional("gpm_metrics", nv.nvmlGpmMetricsGet, request)
            if result is not None:
                count = len(buffers.metric_ids)
                values = parse.gpm_values(result.metrics, count, nv.NVML_SUCCESS)
        buffers.swap(now)
        return values

    def _process_lists(self) -> tuple[Any, Any]:
        """(compute, graphics) running-process lists; None where the device cannot say."""
        nv = self._nv
        if not self._process_calls_known:  # probed once per device and NVML session
            self._process_calls = processes.detect(nv)
            self._process_calls_known = True
        calls = self._process_calls
        if calls is None:
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
            return compute, graphics
        h = self.handle
        compute = self._optional("processes_compute", calls.reader(nv, "Compute"), h)
        graphics = self._optional("processes_graphics", calls.reader(nv, "Graphics"), h)
        return compute, graphics

    def _process_name(self, pid: int) -> str:
        """The process's name; invalid UTF-8 bytes come back as `\\xNN` escapes, "" unknown.

        pynvml decodes names strictly (UnicodeDecodeError, not an NVML error): only this
        one name is affected, never the rest of the sample.
        """
        try:
            found = self._optional("process_name", self._nv.nvmlSystemGetProcessName, pid)
        except UnicodeDecodeError as exc:
            raw = exc.object if isinstance(exc.object, bytes) else bytes(exc.object)
            return parse.escaped_text(raw)
        return "" if found is None else parse.text(found)

    def _read_processes(self) -> tuple[ProcessSample, ...] | None:
        compute, graphics = self._process_lists()
        if compute is None and graphics is None:
            return None
        raw = parse.merge_processes(compute or (), graphics or ())
        utilization = self._read_process_utilization(raw)
        self._process_names = parse.pid_names(self._process_names, (p.pid for p in raw))
        samples = []
        for proc in raw:
            name = self._process_names.get(proc.pid)
            if name is None:
                name = self._process_name(proc.pid)
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
                    buffers = self._guard(
                        "gpm_mig_alloc", lambda: _GpmBuffers(self._nv, GPM_MIG_METRIC_IDS)
                    )
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
        """Refresh PCIe (a blocking call), its replay counter, ECC, remapped rows, MIG layout."""
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
        reliability = self._read_reliability()
        mig_mode = self._optional("mig_mode", nv.nvmlDeviceGetMigMode, h)
        limit_mw = self._optional("power_limit", nv.nvmlDeviceGetEnforcedPowerLimit, h)
        mig_enabled = None if mig_mode is None else bool(mig_mode[0])  # current, not pending
        was = self.slow.mig_enabled
        if mig_enabled is not None and was is not None and mig_enabled != was:
            self._mig_mode_changed(mig_enabled)
        if not mig_enabled:
            self._mig_slots = None
            self._mig_ids = {}
        self.slow = replace(
            reliability,
            pcie_tx_bytes_per_second=pcie_tx,
            pcie_rx_bytes_per_second=pcie_rx,
            mig_enabled=mig_enabled,
            mig_devices=self._read_mig_layout() if mig_enabled else (),
            power_limit_watts=None if limit_mw is None else parse.milliwatts_to_watts(limit_mw),
        )

    def _read_reliability(self) -> SlowReadings:
        """Volatile ECC totals, remapped rows and the PCIe replay counter in one
        field-values call.

        Falls back to `nvmlDeviceGetTotalEccErrors`, `nvmlDeviceGetRemappedRows` and
        `nvmlDeviceGetPcieReplayCounter` where `nvmlDeviceGetFieldValues` itself is
        unsupported.
        """
        nv = self._nv
        if "field_values" in self.unsupported:
            return self._read_reliability_by_calls()
        fields: list[tuple[str, int, int]] = []
        if "ecc" not in self.unsupported:
            fields.append(("ecc_uncorrected", nv.NVML_FI_DEV_ECC_DBE_VOL_TOTAL, 0))
            fields.append(("ecc_corrected", nv.NVML_FI_DEV_ECC_SBE_VOL_TOTAL, 0))
        if "remapped_rows" not in self.unsupported:
            fields.append(("remapped_correctable", nv.NVML_FI_DEV_REMAPPED_COR, 0))
            fields.append(("remapped_uncorrectable", nv.NVML_FI_DEV_REMAPPED_UNC, 0))
            fields.append(("remapped_pending", nv.NVML_FI_DEV_REMAPPED_PENDING, 0))
            fields.append(("remapped_failure", nv.NVML_FI_DEV_REMAPPED_FAILURE, 0))
        if "pcie_replay" not in self.unsupported:
            fields.append(("pcie_replay", nv.NVML_FI_DEV_PCIE_REPLAY_COUNTER, 0))
        got = self._read_fields(fields)
        if "field_values" in self.unsupported:
            return self._read_reliability_by_calls()
        if {"ecc_uncorrected", "ecc_corrected"} <= self.unsupported:
            self.unsupported.add("ecc")
        if "remapped_pending" in self.unsupported:
            self.unsupported.add("remapped_rows")

        def count(key: str) -> int | None:
            value = got.get(key)
            return None if value is None else int(value)

        def flag(key: str) -> bool | None:
            value = got.get(key)
            return None if value is None else bool(value)

        return SlowReadings(
            ecc_uncorrected_errors_total=count("ecc_uncorrected"),
            ecc_corrected_errors_total=count("ecc_corrected"),
            remapped_rows_correctable=count("remapped_correctable"),
            remapped_rows_uncorrectable=count("remapped_uncorrectable"),
            remapped_rows_pending=flag("remapped_pending"),
            remapped_rows_failure=flag("remapped_failure"),
            pcie_replay_errors_total=count("pcie_replay"),
        )

    def _read_reliability_by_calls(self) -> SlowReadings:
        nv, h = self._nv, self.handle
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
        replays = self._optional("pcie_replay", nv.nvmlDeviceGetPcieReplayCounter, h)
        return SlowReadings(
            ecc_uncorrected_errors_total=None if uncorrected is None else int(uncorrected),
            ecc_corrected_errors_total=None if corrected is None else int(corrected),
            remapped_rows_correctable=None if remapped is None else int(remapped[0]),
            remapped_rows_uncorrectable=None if remapped is None else int(remapped[1]),
            remapped_rows_pending=None if remapped is None else bool(remapped[2]),
            remapped_rows_failure=None if remapped is None else bool(remapped[3]),
            pcie_replay_errors_total=None if replays is None else int(replays),
        )

    def _mig_mode_changed(self, enabled: bool) -> None:
        """MIG went on or off: what this GPU cannot answer changes, so ask everything again."""
        log.info("GPU %d: MIG mode is now %s", self.index, "on" if enabled else "off")
        self.unsupported.clear()
        for buffers in self._mig_gpm.values():
            buffers.free()
        self._mig_gpm = {}

    def _read_mig_layout(self) -> tuple[MigDevice, ...]:
        """The MIG devices by slot: a handle and a UUID each pass (instances can be made
        and destroyed at runtime); the instance ids are read once per UUID (a recreated
        instance has a new UUID). The slot count is read once while MIG stays on."""
        nv, h = self._nv, self.handle
        if self._mig_slots is None:
            count = self._optional("mig_count", nv.nvmlDeviceGetMaxMigDeviceCount, h)
            self._mig_slots = None if count is None else int(count)
        devices = []
        for slot in range(self._mig_slots or 0):
            try:
                mig = self._call("mig_handle", nv.nvmlDeviceGetMigDeviceHandleByIndex, h, slot)
            except nv.NVMLError:
                continue  # NotFound: an empty slot
            found = self._optional("mig_uuid", nv.nvmlDeviceGetUUID, mig)
            if found is None:
                continue
            uuid = parse.text(found)
            ids = self._mig_ids.get(uuid)
            if ids is None:
                gi = self._optional("mig_gi", nv.nvmlDeviceGetGpuInstanceId, mig)
                ci = self._optional("mig_ci", nv.nvmlDeviceGetComputeInstanceId, mig)
                if gi is None or ci is None:
                    continue
                ids = (int(gi), int(ci))
            devices.append(MigDevice(mig, uuid, *ids))
        self._mig_ids = {d.uuid: (d.gpu_instance_id, d.compute_instance_id) for d in devices}
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
