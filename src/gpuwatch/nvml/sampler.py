"""The NVML sampler: initialise once, sample every device each tick, recover from driver errors.

`NvmlSampler.sample()` returns the GPU part of a snapshot. A lost GPU is reported
`up=False` while the others keep reporting; a driver-level failure (for example
`LibRmVersionMismatch` after a driver upgrade) marks every known GPU down and
re-initialises NVML with exponential backoff on the injected clock.

`LibRmVersionMismatch` is different: the library loaded in this process no longer
matches the kernel driver (a driver upgrade) and pynvml never unloads it, so no
re-initialisation in this process can work. After `VERSION_MISMATCH_ATTEMPTS` failed
attempts in a row the sampler sets `fatal`, and `gpuwatch run` exits 1 with that one
line so that its supervisor (the DaemonSet) starts a new process.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from gpuwatch.core.clock import Clock
from gpuwatch.core.health import Outage, backoff_seconds
from gpuwatch.core.snapshot import DriverInfo, GpuIdentity, GpuSample
from gpuwatch.nvml import parse
from gpuwatch.nvml.api import NvmlApi
from gpuwatch.nvml.binding import surface
from gpuwatch.nvml.device import NvmlDevice
from gpuwatch.nvml.errors import (
    VERSION_MISMATCH,
    DeviceLostError,
    DriverError,
    NvmlErrorKind,
    NvmlNotFoundError,
    classify,
    describe,
)
from gpuwatch.nvml.xid import XidCounts, XidWatcher

log = logging.getLogger(__name__)

_NOT_INSTALLED = ("NVMLError_LibraryNotFound", "NVMLError_DriverNotLoaded")
VERSION_MISMATCH_ATTEMPTS = 4
"""LibRmVersionMismatch this many times in a row (the first failure and 3 retries, about
7 s with the default backoff) and the sampler gives up: only a restart can recover."""


class NvmlSampler:
    """Owns NVML's lifetime for the agent and reads every GPU once per tick."""

    def __init__(
        self,
        nv: NvmlApi,
        clock: Clock,
        *,
        retry_initial_seconds: float = 1.0,
        retry_max_seconds: float = 60.0,
        watch_xid: bool = True,
    ) -> None:
        self._nv = surface(nv)  # a function the binding lacks answers FunctionNotFound
        self._clock = clock
        self._retry_initial = retry_initial_seconds
        self._retry_max = retry_max_seconds
        self._watch_xid = watch_xid
        self._lock = threading.Lock()
        self._devices: list[NvmlDevice] = []
        self._lost_at_open: list[int] = []  # indexes whose handle or identity could not be read
        self._known: dict[int, GpuIdentity] = {}
        self._xid: XidWatcher | None = None
        self._xid_unavailable = False  # no GPU here can deliver XID events
        self._xid_counts = XidCounts()
        self._initialized = False
        self._outage = Outage(settle=1)  # one ERROR line per outage, one INFO at its end
        self._failures = 0  # failed attempts in a row: the backoff's attempt
        self._next_retry = 0.0
        self.driver = DriverInfo(None, None, None)
        self.last_error: str | None = None
        self._mismatches = 0
        self.fatal: str | None = None
        """Set when NVML cannot recover in this process; the agent exits with it."""

    @property
    def identities(self) -> tuple[GpuIdentity, ...]:
        """Every GPU seen since NVML was first initialised, by index."""
        return tuple(self._known[i] for i in sorted(self._known))

    @property
    def initialized(self) -> bool:
        """True while NVML is initialised and the devices are enumerated."""
        return self._initialized

    def open(self) -> None:
        """Initialise NVML and enumerate the GPUs.

        Raises NvmlNotFoundError when there is no NVIDIA driver at all. Any other
        failure is remembered and retried with backoff by `sample()`.
        """
        try:
            self._init()
        except self._nv.NVMLError as exc:
            if type(exc).__name__ in _NOT_INSTALLED:
                raise NvmlNotFoundError(describe(exc)) from exc
            self._fail(describe(exc), type(exc).__name__)
        except DriverError as exc:
            self._fail(str(exc), exc.error_name)

    def _init(self) -> None:
        nv = self._nv
        nv.nvmlInit()
        try:
            self.driver = DriverInfo(
                driver_version=_optional_text(nv, nv.nvmlSystemGetDriverVersion),
                cuda_driver_version=_optional_cuda(nv),
                nvml_version=_optional_text(nv, nv.nvmlSystemGetNVMLVersion),
            )
            count = int(nv.nvmlDeviceGetCount())
            devices, lost = self._open_devices(list(range(count)))
        except BaseException:
            _shutdown_quietly(nv)
            raise
        self._devices = devices
        self._lost_at_open = lost
        self._known.update({d.index: d.identity for d in devices})
        for device in devices:
            self._sample_slow_device(device)
        if self._watch_xid:
            handles = {d.identity.uuid: d.handle for d in devices}
            self._xid = XidWatcher(nv, handles, self._xid_counts)
            self._xid_unavailable = not self._xid.start(keep_empty=bool(lost))
            if self._xid_unavailable:
                self._xid = None
        self._initialized = True
        self._failures = 0
        self._mismatches = 0
        if self._outage.succeed():
            log.info("NVML recovered")
        self.last_error = None
        log.info("NVML initialised: %d GPU(s), driver %s", len(devices), self.driver.driver_version)

    def _open_devices(self, indexes: list[int]) -> tuple[list[NvmlDevice], list[int]]:
        """Open GPUs by index; one that is lost is reported down instead of failing them all.

        Raises DriverError when NVML as a whole fails.
        """
        devices, lost = [], []
        for index in indexes:
            try:
                devices.append(NvmlDevice(self._nv, index, self._clock))
            except (DeviceLostError, self._nv.NVMLError) as exc:
                if index not in self._lost_at_open:  # one log line per loss, not per retry
                    log.error("GPU %d cannot be opened, reported down: %s", index, _why(exc))
                lost.append(index)
        return devices, lost

    def _fail(self, reason: str, error_name: str = "") -> None:
        """Drop NVML after a driver-level error and schedule a retry (or give up)."""
        delay = backoff_seconds(self._failures, self._retry_initial, self._retry_max)
        (log.error if self._outage.fail() else log.debug)(
            "NVML failed, retrying in %.0f s: %s", delay, reason
        )
        self.last_error = reason
        self._mismatches = self._mismatches + 1 if error_name == VERSION_MISMATCH else 0
        if self._mismatches >= VERSION_MISMATCH_ATTEMPTS and self.fatal is None:
            self.fatal = (
                f"NVML library and kernel driver differ ({reason}) after {self._mismatches} "
                "attempts: the driver was upgraded under this process, and only a restart "
                "loads the new library"
            )
            log.error("%s", self.fatal)
        self._teardown()
        self._next_retry = self._clock.monotonic() + delay
        self._failures += 1

    def _teardown(self) -> None:
        if self._xid is not None:
            self._xid.stop()
            self._xid = None
        for device in self._devices:
            device.close()
        self._devices = []
        if self._initialized:
            _shutdown_quietly(self._nv)
        self._initialized = False

    def sample(self) -> tuple[GpuSample, ...]:
        """Read every GPU; while NVML is down, every known GPU is `up=False`.

        Raises DriverError when NVML is unusable this tick (the caller records the
        collector failure); the GPUs are then reported down by `down_samples()`.
        """
        with self._lock:
            if not self._initialized:
                self._maybe_retry()
                if not self._initialized:
                    raise DriverError(self.last_error or "NVML is not initialised")
            try:
                samples = [self._sample_device(d) for d in self._devices]
            except DriverError as exc:
                self._fail(str(exc), exc.error_name)
                raise
            samples.extend(self._lost_sample(index) for index in self._lost_at_open)
            return tuple(sorted(samples, key=lambda s: s.identity.index))

    def _sample_device(self, device: NvmlDevice) -> GpuSample:
        uuid = device.identity.uuid
        return device.sample(self._xid_counts.for_gpu(uuid), self._xid_counts.last_for_gpu(uuid))

    def _lost_sample(self, index: int) -> GpuSample:
        identity = self._known.get(index) or GpuIdentity(
            index=index,
            uuid="",
            name="",
            serial=None,
            pci_bus_id="",
            memory_total_bytes=None,
            power_limit_watts=None,
            gpm_supported=False,
        )
        return self._down_sample(identity, "GPU lost")

    def down_samples(self) -> tuple[GpuSample, ...]:
        """Every GPU known from the last successful enumeration, reported down."""
        reason = self.last_error or "NVML unavailable"
        return tuple(self._down_sample(self._known[i], reason) for i in sorted(self._known))

    def _down_sample(self, identity: GpuIdentity, error: str) -> GpuSample:
        """A GPU reported down; it keeps its XID counts (a lost GPU's XID 79 is the news)."""
        uuid = identity.uuid
        return GpuSample(
            identity=identity,
            up=False,
            error=error,
            xid_errors_total=self._xid_counts.for_gpu(uuid) if uuid else (),
            last_xid=self._xid_counts.last_for_gpu(uuid) if uuid else None,
        )

    def _maybe_retry(self) -> None:
        if self.fatal is not None or self._clock.monotonic() < self._next_retry:
            return
        try:
            self._init()
        except self._nv.NVMLError as exc:
            self._fail(describe(exc), type(exc).__name__)
        except DriverError as exc:
            self._fail(str(exc), exc.error_name)

    def sample_slow(self) -> None:
        """Refresh the slow readings (PCIe, ECC, remapped rows, MIG) of every device.

        Also retries the GPUs that were already lost when NVML was initialised.
        """
        with self._lock:
            devices = list(self._devices) if self._initialized else []
            if self._initialized and self._lost_at_open:
                self._reopen_lost()
        for device in devices:
            self._sample_slow_device(device)

    def _reopen_lost(self) -> None:
        try:
            found, still_lost = self._open_devices(self._lost_at_open)
        except DriverError as exc:
            log.debug("re-opening lost GPUs failed: %s", exc)
            return
        for device in found:
            log.info("GPU %d is back", device.index)
            self._known[device.index] = device.identity
            if self._xid is not None:
                self._xid.add_device(device.identity.uuid, device.handle)
        self._devices = sorted([*self._devices, *found], key=lambda d: d.index)
        self._lost_at_open = still_lost

    def _sample_slow_device(self, device: NvmlDevice) -> None:
        try:
            device.sample_slow()
        except (DriverError, RuntimeError, self._nv.NVMLError) as exc:
            log.debug("GPU %d: slow readings failed: %s", device.index, exc)
            device.mark_slow_failed()

    @property
    def xid_healthy(self) -> bool:
        """True while XIDs are being counted, or when no GPU here can deliver them.

        False while NVML is down (no event set exists) and once the event wait itself
        has failed: XID counting has stopped, whatever the counters still show.
        """
        if not self._watch_xid or self._xid_unavailable:
            return True
        xid = self._xid
        return self._initialized and xid is not None and xid.alive

    def close(self) -> None:
        """Stop the XID thread and shut NVML down."""
        with self._lock:
            self._teardown()


def _optional_text(nv: NvmlApi, fn: Callable[[], str | bytes]) -> str | None:
    try:
        return parse.text(fn())
    except nv.NVMLError as exc:
        if classify(exc) is NvmlErrorKind.DRIVER:
            raise
        return None


def _optional_cuda(nv: NvmlApi) -> str | None:
    try:
        return parse.format_cuda_version(int(nv.nvmlSystemGetCudaDriverVersion()))
    except nv.NVMLError as exc:
        if classify(exc) is NvmlErrorKind.DRIVER:
            raise
        return None


def _why(exc: BaseException) -> str:
    return str(exc) if isinstance(exc, DeviceLostError) else describe(exc)


def _shutdown_quietly(nv: NvmlApi) -> None:
    try:
        nv.nvmlShutdown()
    except nv.NVMLError as exc:
        log.debug("nvmlShutdown failed: %s", describe(exc))
