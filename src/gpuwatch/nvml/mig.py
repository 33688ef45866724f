"""MIG: the layout of a GPU's MIG devices (read on the slow job), what changes when MIG
mode does, and each instance's tick reading (memory and the GPU instance's GPM)."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from gpuwatch.core.snapshot import MigInstanceSample
from gpuwatch.nvml import parse
from gpuwatch.nvml.api import Handle
from gpuwatch.nvml.gpm import (
    GPM_ANY_TENSOR_UTIL,
    GPM_DRAM_BW_UTIL,
    GPM_MIG_METRIC_IDS,
    GPM_SM_OCCUPANCY,
    GPM_SM_UTIL,
    GpmBuffers,
    GpmReads,
)

log = logging.getLogger("gpuwatch.nvml.device")


@dataclass(frozen=True, slots=True)
class MigDevice:
    """A MIG device handle with its ids (re-read on the slow job)."""

    handle: Handle
    uuid: str
    gpu_instance_id: int
    compute_instance_id: int
    gpu_instance_profile_id: int | None = None  # nvmlGpuInstanceGetInfo's profileId
    placement_start: int | None = None  # and placement.start


class MigReads(GpmReads):
    """A device's MIG layout and the per-instance reading."""

    _mig_slots: int | None
    _mig_ids: dict[str, tuple[int, int, int | None, int | None]]

    def _read_mig(
        self, now: float, devices: tuple[MigDevice, ...]
    ) -> tuple[MigInstanceSample, ...]:
        """Each MIG device of the last slow pass (`devices`): memory and GPM."""
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
                        "gpm_mig_alloc", lambda: GpmBuffers(self._nv, GPM_MIG_METRIC_IDS)
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
                    gpu_instance_profile_id=mig.gpu_instance_profile_id,
                    placement_start=mig.placement_start,
                )
            )
        return tuple(instances)

    def _mig_mode_changed(self, enabled: bool) -> None:
        """MIG went on or off: what this GPU cannot answer changes, so ask everything again."""
        log.info("GPU %d: MIG mode is now %s", self.index, "on" if enabled else "off")
        self.unsupported.clear()
        for buffers in self._mig_gpm.values():
            buffers.free()
        self._mig_gpm = {}

    def _read_mig_layout(self) -> tuple[MigDevice, ...]:
        """The MIG devices by slot: a handle and a UUID each pass (instances can be made
        and destroyed at runtime); the instance ids, and the GPU instance's profile ID and
        placement, are read once per UUID (a recreated instance has a new UUID; the
        placement again until NVML gives it). The slot
        count is read once while MIG stays on."""
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
                ids = (int(gi), int(ci), *self._gpu_instance_placement(int(gi)))
            elif ids[2] is None:  # asked again until answered (None at once if unsupported)
                ids = (ids[0], ids[1], *self._gpu_instance_placement(ids[0]))
            devices.append(MigDevice(mig, uuid, *ids))
        self._mig_ids = {
            d.uuid: (
                d.gpu_instance_id,
                d.compute_instance_id,
                d.gpu_instance_profile_id,
                d.placement_start,
            )
            for d in devices
        }
        return tuple(devices)

    def _gpu_instance_placement(self, gpu_instance_id: int) -> tuple[int | None, int | None]:
        """(profile ID, placement start) of one GPU instance of this GPU; (None, None) when
        the driver cannot say."""
        nv, h = self._nv, self.handle
        instance = self._optional(
            "mig_gi_handle", nv.nvmlDeviceGetGpuInstanceById, h, gpu_instance_id
        )
        if instance is None:
            return None, None
        info = self._optional("mig_gi_info", nv.nvmlGpuInstanceGetInfo, instance)
        if info is None:
            return None, None
        return int(info.profileId), int(info.placement.start)
