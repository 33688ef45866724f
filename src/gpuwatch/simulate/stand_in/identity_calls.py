"""The stand-in's system and identity calls: driver versions, device count and handles,
names, UUIDs, PCI, brand and architecture.

A GPU is found by index, UUID (a MIG device by its MIG- UUID too) or PCI bus id; its
static facts come from its preset (`gpuwatch.simulate.presets`).
"""

from __future__ import annotations

from typing import Any

import pynvml

from gpuwatch.simulate.device import MigDevice
from gpuwatch.simulate.stand_in.checks import Checks, raise_nvml

_ARCHITECTURES = {
    "volta": pynvml.NVML_DEVICE_ARCH_VOLTA,
    "turing": pynvml.NVML_DEVICE_ARCH_TURING,
    "ampere": pynvml.NVML_DEVICE_ARCH_AMPERE,
    "ada": pynvml.NVML_DEVICE_ARCH_ADA,
    "hopper": pynvml.NVML_DEVICE_ARCH_HOPPER,
    "blackwell": pynvml.NVML_DEVICE_ARCH_BLACKWELL,
}
_BRANDS = {
    "nvidia": pynvml.NVML_BRAND_NVIDIA,
    "tesla": pynvml.NVML_BRAND_TESLA,
    "geforce": pynvml.NVML_BRAND_GEFORCE,
    "quadro": pynvml.NVML_BRAND_QUADRO,
}


def _text(value: str | bytes) -> str:
    return value.decode() if isinstance(value, bytes) else value


class IdentityCalls(Checks):
    """nvmlSystemGet*Version, nvmlDeviceGetCount/HandleBy*, and a device's identity."""

    # -- system ----------------------------------------------------------------------------

    def nvmlSystemGetDriverVersion(self) -> str:
        """Driver version, e.g. '570.133.20'."""
        self._system("nvmlSystemGetDriverVersion")
        return self.scenario.driver.version

    def nvmlSystemGetNVMLVersion(self) -> str:
        """NVML version, e.g. '12.570.133.20'."""
        self._system("nvmlSystemGetNVMLVersion")
        return self.scenario.driver.nvml_version

    def nvmlSystemGetCudaDriverVersion(self) -> int:
        """CUDA driver version as 1000 * major + 10 * minor (12080 = 12.8)."""
        self._system("nvmlSystemGetCudaDriverVersion")
        return self.scenario.driver.cuda_version

    def nvmlSystemGetCudaDriverVersion_v2(self) -> int:
        """Same as nvmlSystemGetCudaDriverVersion."""
        self._system("nvmlSystemGetCudaDriverVersion_v2")
        return self.scenario.driver.cuda_version

    # -- enumeration and identity --------------------------------------------------------------

    def nvmlDeviceGetCount(self) -> int:
        """Number of GPUs."""
        self._system("nvmlDeviceGetCount", "nvmlDeviceGetCount_v2")
        return len(self._devices)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> Any:
        """A `c_nvmlDevice_t`; InvalidArgument out of range, the GPU's error if it is lost."""
        t = self._system("nvmlDeviceGetHandleByIndex", "nvmlDeviceGetHandleByIndex_v2")
        if not 0 <= int(index) < len(self._devices):
            raise_nvml(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        lost = self._faults.device_error(int(index), t)
        if lost is not None:
            raise_nvml(lost)
        return self._handle(self._devices[int(index)])

    def nvmlDeviceGetHandleByUUID(self, uuid: str | bytes) -> Any:
        """A GPU (GPU-...) or MIG device (MIG-...) handle; NotFound when unknown."""
        t = self._system("nvmlDeviceGetHandleByUUID")
        target = self._by_uuid.get(_text(uuid))
        if target is None:
            raise_nvml(pynvml.NVML_ERROR_NOT_FOUND)
        lost = self._faults.device_error(target.gpu_index, t)
        if lost is not None:
            raise_nvml(lost)
        return self._handle(target)

    def nvmlDeviceGetHandleByPciBusId(self, pciBusId: str | bytes) -> Any:
        """A GPU handle by bus id ('00000000:18:00.0' or '0000:18:00.0')."""
        t = self._system("nvmlDeviceGetHandleByPciBusId", "nvmlDeviceGetHandleByPciBusId_v2")
        wanted = _text(pciBusId).upper()
        for device in self._devices:
            if wanted in (device.pci_bus_id, device.pci_bus_id[4:]):
                lost = self._faults.device_error(device.index, t)
                if lost is not None:
                    raise_nvml(lost)
                return self._handle(device)
        raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_FOUND)

    def nvmlDeviceGetIndex(self, handle: Any) -> int:
        """The GPU's index."""
        device, _ = self._device(handle, "nvmlDeviceGetIndex")
        return device.index

    def nvmlDeviceGetMinorNumber(self, handle: Any) -> int:
        """/dev/nvidiaN number: not the index (default: reversed order; `minor_number`)."""
        device, _ = self._device(handle, "nvmlDeviceGetMinorNumber")
        return device.minor_number

    def nvmlDeviceGetName(self, handle: Any) -> str:
        """Product name (a MIG device: '<GPU name> MIG <profile>')."""
        target, _ = self._target(handle, "nvmlDeviceGetName", mig=True)
        return target.name if isinstance(target, MigDevice) else target.preset.name

    def nvmlDeviceGetUUID(self, handle: Any) -> str:
        """'GPU-…' or, for a MIG device, 'MIG-…'."""
        target, _ = self._target(handle, "nvmlDeviceGetUUID", mig=True)
        return target.uuid

    def nvmlDeviceGetSerial(self, handle: Any) -> str:
        """Board serial number; NotSupported on GeForce."""
        device, _ = self._device(handle, "nvmlDeviceGetSerial")
        if not device.preset.serial:
            raise_nvml(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return device.serial

    def nvmlDeviceGetBrand(self, handle: Any) -> int:
        """NVML_BRAND_* of the part."""
        device, _ = self._device(handle, "nvmlDeviceGetBrand")
        return int(_BRANDS[device.preset.brand])

    def nvmlDeviceGetArchitecture(self, device: Any) -> int:
        """NVML_DEVICE_ARCH_* of the part."""
        gpu, _ = self._device(device, "nvmlDeviceGetArchitecture")
        return int(_ARCHITECTURES[gpu.preset.architecture])

    def nvmlDeviceGetCudaComputeCapability(self, handle: Any) -> tuple[int, int]:
        """(major, minor)."""
        target, _ = self._target(handle, "nvmlDeviceGetCudaComputeCapability", mig=True)
        preset = target.parent.preset if isinstance(target, MigDevice) else target.preset
        return preset.compute_capability

    def nvmlDeviceGetPciInfo_v3(self, handle: Any) -> Any:
        """`nvmlPciInfo_t`: bus id '00000000:18:00.0', device/subsystem ids."""
        device, _ = self._device(handle, "nvmlDeviceGetPciInfo_v3")
        info = pynvml.nvmlPciInfo_t()
        info.busIdLegacy = f"{device.pci_domain:04X}:{device.pci_bus:02X}:00.0"
        info.domain = device.pci_domain
        info.bus = device.pci_bus
        info.device = 0
        info.pciDeviceId = (device.preset.pci_device_id << 16) | 0x10DE
        info.pciSubSystemId = (device.preset.pci_subsystem_id << 16) | 0x10DE
        info.busId = device.pci_bus_id
        return info

    def nvmlDeviceGetPciInfo(self, handle: Any) -> Any:
        """Same as nvmlDeviceGetPciInfo_v3."""
        return self.nvmlDeviceGetPciInfo_v3(handle)

    def nvmlDeviceGetMaxPcieLinkGeneration(self, handle: Any) -> int:
        """PCIe generation of the part."""
        device, _ = self._device(handle, "nvmlDeviceGetMaxPcieLinkGeneration")
        return device.preset.pcie_gen

    def nvmlDeviceGetCurrPcieLinkGeneration(self, handle: Any) -> int:
        """Current PCIe generation (the maximum)."""
        device, _ = self._device(handle, "nvmlDeviceGetCurrPcieLinkGeneration")
        return device.preset.pcie_gen

    def nvmlDeviceGetMaxPcieLinkWidth(self, handle: Any) -> int:
        """PCIe lanes of the part."""
        device, _ = self._device(handle, "nvmlDeviceGetMaxPcieLinkWidth")
        return device.preset.pcie_width

    def nvmlDeviceGetCurrPcieLinkWidth(self, handle: Any) -> int:
        """Current PCIe lanes (the maximum)."""
        device, _ = self._device(handle, "nvmlDeviceGetCurrPcieLinkWidth")
        return device.preset.pcie_width

    def nvmlDeviceGetPersistenceMode(self, handle: Any) -> int:
        """NVML_FEATURE_ENABLED (persistence mode on, as on servers)."""
        self._device(handle, "nvmlDeviceGetPersistenceMode")
        return int(pynvml.NVML_FEATURE_ENABLED)

    def nvmlDeviceGetComputeMode(self, handle: Any) -> int:
        """NVML_COMPUTEMODE_DEFAULT."""
        self._device(handle, "nvmlDeviceGetComputeMode")
        return int(pynvml.NVML_COMPUTEMODE_DEFAULT)
