"""The stand-in's MIG calls: mode, MIG device handles, GPU and compute instance ids.

A MIG device handle answers only the calls NVML answers for one (the `mig=True` calls of
`Checks._target`); a handle whose GPU has left MIG mode is stale (InvalidArgument).
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass
from typing import Any

import pynvml

from gpuwatch.simulate.device import GpuDevice, MigDevice
from gpuwatch.simulate.stand_in.checks import Checks, raise_nvml


@dataclass(frozen=True, slots=True)
class _GpuInstance:
    """A GPU instance handle (`nvmlDeviceGetGpuInstanceById`): the MIG device it holds."""

    mig: MigDevice


def _mig_flag(enabled: bool) -> int:
    return int(pynvml.NVML_DEVICE_MIG_ENABLE if enabled else pynvml.NVML_DEVICE_MIG_DISABLE)


class MigCalls(Checks):
    """nvmlDeviceGetMigMode, MIG device handles and their GPU/compute instances."""

    def _mig_capable(self, handle: Any, name: str) -> tuple[GpuDevice, float]:
        device, t = self._device(handle, name)
        if device.preset.mig_max == 0:
            raise_nvml(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return device, t

    def nvmlDeviceGetMigMode(self, device: Any) -> list[int]:
        """[current, pending] (NVML_DEVICE_MIG_ENABLE/DISABLE); NotSupported without MIG.

        They differ between `nvidia-smi -mig` and the GPU reset that applies it.
        """
        gpu, t = self._mig_capable(device, "nvmlDeviceGetMigMode")
        return [_mig_flag(gpu.mig_current(t)), _mig_flag(gpu.mig_pending(t))]

    def nvmlDeviceGetMaxMigDeviceCount(self, device: Any) -> int:
        """How many MIG devices the GPU can have (7); 0 while MIG is off, as in NVML."""
        gpu, t = self._mig_capable(device, "nvmlDeviceGetMaxMigDeviceCount")
        return gpu.preset.mig_max if gpu.mig_current(t) else 0

    def nvmlDeviceGetMigDeviceHandleByIndex(self, device: Any, index: int) -> Any:
        """The MIG device in slot `index`; NotFound for an empty slot or with MIG off."""
        name = "nvmlDeviceGetMigDeviceHandleByIndex"
        gpu, t = self._mig_capable(device, name)
        if not 0 <= int(index) < gpu.preset.mig_max:
            self._refuse(name, f"slot {index} of {gpu.preset.mig_max}")
        if not gpu.mig_current(t) or int(index) >= len(gpu.mig):
            raise_nvml(pynvml.NVML_ERROR_NOT_FOUND)
        return self._handle(gpu.mig[int(index)])

    def nvmlDeviceIsMigDeviceHandle(self, device: Any) -> Any:
        """A `ctypes.c_uint` (1 for a MIG device) — pynvml returns the c_uint, not .value."""
        target, _ = self._target(device, "nvmlDeviceIsMigDeviceHandle", mig=True)
        return ctypes.c_uint(1 if isinstance(target, MigDevice) else 0)

    def _mig_device(self, handle: Any, name: str) -> MigDevice:
        target, _ = self._target(handle, name, mig=True)
        if not isinstance(target, MigDevice):
            raise_nvml(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return target

    def nvmlDeviceGetGpuInstanceId(self, device: Any) -> int:
        """GPU instance id of a MIG device; NotSupported on a physical GPU."""
        return self._mig_device(device, "nvmlDeviceGetGpuInstanceId").gpu_instance_id

    def nvmlDeviceGetComputeInstanceId(self, device: Any) -> int:
        """Compute instance id of a MIG device; NotSupported on a physical GPU."""
        return self._mig_device(device, "nvmlDeviceGetComputeInstanceId").compute_instance_id

    def nvmlDeviceGetGpuInstanceById(self, device: Any, gpuInstanceId: int) -> Any:
        """The GPU instance `gpuInstanceId` of a MIG-enabled GPU (a handle for
        `nvmlGpuInstanceGetInfo`); NotFound when it has none by that id, NotSupported
        without MIG or with MIG off (as NVML's reference says)."""
        gpu, t = self._mig_capable(device, "nvmlDeviceGetGpuInstanceById")
        if not gpu.mig_current(t):
            raise_nvml(pynvml.NVML_ERROR_NOT_SUPPORTED)
        for mig in gpu.mig:
            if mig.gpu_instance_id == int(gpuInstanceId):
                return _GpuInstance(mig)
        raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_FOUND)

    def nvmlGpuInstanceGetInfo(self, gpuInstance: Any) -> Any:
        """A `c_nvmlGpuInstanceInfo_t`: the instance's id, profile ID and placement."""
        self._gate("nvmlGpuInstanceGetInfo")
        if not isinstance(gpuInstance, _GpuInstance):
            raise_nvml(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        mig = gpuInstance.mig
        info = pynvml.c_nvmlGpuInstanceInfo_t()
        info.id = mig.gpu_instance_id
        info.profileId = mig.gpu_instance_profile_id
        info.placement.start = mig.placement_start
        info.placement.size = mig.slices if mig.slices != 7 else 8
        return info

    def nvmlDeviceGetDeviceHandleFromMigDeviceHandle(self, migDevice: Any) -> Any:
        """The physical GPU of a MIG device; InvalidArgument for a physical handle."""
        target, _ = self._target(
            migDevice, "nvmlDeviceGetDeviceHandleFromMigDeviceHandle", mig=True
        )
        if not isinstance(target, MigDevice):
            raise_nvml(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        return self._handle(target.parent)
