"""XID critical-error events, read by a thread that waits on an NVML event set.

NVML delivers XIDs only through `nvmlEventSetWait`, which blocks; so one thread waits
with a timeout and counts events per (GPU uuid, xid code). The sampler copies the
counts into each snapshot. Devices that cannot register for XID events are skipped.
"""

from __future__ import annotations

import ctypes
import logging
import threading
from collections import Counter

from gpuwatch.nvml.api import Handle, NvmlApi
from gpuwatch.nvml.errors import NvmlErrorKind, classify, describe

log = logging.getLogger(__name__)

WAIT_TIMEOUT_MS = 500


class XidCounts:
    """XID events per (GPU uuid, xid code); thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: Counter[tuple[str, int]] = Counter()
        self._last: dict[str, int] = {}

    def add(self, uuid: str, xid: int) -> None:
        """Count one event."""
        with self._lock:
            self._counts[(uuid, xid)] += 1
            self._last[uuid] = xid

    def last_for_gpu(self, uuid: str) -> int | None:
        """The most recent XID code seen on this GPU."""
        with self._lock:
            return self._last.get(uuid)

    def for_gpu(self, uuid: str) -> tuple[tuple[int, int], ...]:
        """(xid code, count) pairs seen on this GPU, sorted by code."""
        with self._lock:
            return tuple(sorted((xid, n) for (u, xid), n in self._counts.items() if u == uuid))


def handle_address(handle: Handle) -> int | None:
    """The address a `c_nvmlDevice_t` points to: stable for the life of the NVML session."""
    return ctypes.cast(handle, ctypes.c_void_p).value


class XidWatcher:
    """Counts XID critical errors per GPU uuid in a background thread."""

    def __init__(
        self, nv: NvmlApi, handles_by_uuid: dict[str, Handle], counts: XidCounts | None = None
    ) -> None:
        """`counts` outlives the watcher, so counters survive an NVML re-initialisation."""
        self._nv = nv
        self._counts = counts if counts is not None else XidCounts()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._event_set: Handle = None
        self.healthy = True
        self._handles_by_uuid = handles_by_uuid
        # by handle address: asking NVML for the uuid fails once the GPU is lost (XID 79)
        self._uuid_by_address = {handle_address(h): u for u, h in handles_by_uuid.items()}

    def start(self, *, keep_empty: bool = False) -> bool:
        """Register every device that supports XID events; False when none does.

        `keep_empty` keeps watching with no device registered yet (GPUs lost at start
        may come back and be added with `add_device`).
        """
        nv = self._nv
        try:
            self._event_set = nv.nvmlEventSetCreate()
        except nv.NVMLError as exc:
            log.info("XID events unavailable: %s", describe(exc))
            return False
        registered = 0
        for uuid, handle in self._handles_by_uuid.items():
            try:
                nv.nvmlDeviceRegisterEvents(
                    handle, nv.nvmlEventTypeXidCriticalError, self._event_set
                )
                registered += 1
            except nv.NVMLError as exc:
                log.debug("GPU %s: XID events not registered: %s", uuid, describe(exc))
        if not registered and not keep_empty:
            self._free()
            return False
        self._thread = threading.Thread(target=self._run, name="gpuwatch-xid", daemon=True)
        self._thread.start()
        return True

    def add_device(self, uuid: str, handle: Handle) -> None:
        """Watch a GPU that came back after NVML was initialised (best effort)."""
        nv = self._nv
        if self._event_set is None:
            return
        try:
            nv.nvmlDeviceRegisterEvents(handle, nv.nvmlEventTypeXidCriticalError, self._event_set)
        except nv.NVMLError as exc:
            log.debug("GPU %s: XID events not registered: %s", uuid, describe(exc))
            return
        self._uuid_by_address = {**self._uuid_by_address, handle_address(handle): uuid}

    def _run(self) -> None:
        nv = self._nv
        while not self._stop.is_set():
            try:
                data = nv.nvmlEventSetWait(self._event_set, WAIT_TIMEOUT_MS)
            except nv.NVMLError as exc:
                name = type(exc).__name__
                if name == "NVMLError_Timeout":
                    continue
                if classify(exc) is NvmlErrorKind.DRIVER or name == "NVMLError_Unknown":
                    log.error("XID event wait failed, XID counting stops: %s", describe(exc))
                    self.healthy = False
                    return
                self._stop.wait(WAIT_TIMEOUT_MS / 1000)  # never spin on a failing wait
                continue
            if int(data.eventType) != int(nv.nvmlEventTypeXidCriticalError):
                continue
            uuid = self._uuid_by_address.get(handle_address(data.device), "")
            xid = int(data.eventData)
            log.warning("GPU %s: XID %d", uuid, xid)
            self._counts.add(uuid, xid)

    @property
    def alive(self) -> bool:
        """True while the waiting thread runs and its wait has not failed."""
        thread = self._thread
        return self.healthy and thread is not None and thread.is_alive()

    def stop(self) -> None:
        """Stop the thread (within one wait timeout) and free the event set."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=WAIT_TIMEOUT_MS / 1000 * 4)
        self._free()

    def _free(self) -> None:
        if self._event_set is None:
            return
        try:
            self._nv.nvmlEventSetFree(self._event_set)
        except self._nv.NVMLError as exc:
            log.debug("event set free failed: %s", describe(exc))
        self._event_set = None
