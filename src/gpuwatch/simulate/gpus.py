"""A scenario's GPUs: the `[[gpus]]` tables (processes, MIG instances, MIG mode
changes, ECC counts) and the `[driver]` table, validated by pydantic.

Each table checks only itself; what needs the whole scenario (uuids used twice, a pid
named twice, memory held by the processes of a GPU) is `gpuwatch.simulate.scenario`'s.
Sizes are bytes or strings with a unit (`parse_bytes`). No loading and no simulation
here: `gpuwatch.simulate.device` turns a `GpuConfig` into a simulated device.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, field_validator, model_validator

from gpuwatch.core.units import MIB
from gpuwatch.simulate.presets import PRESETS, DevicePreset
from gpuwatch.simulate.timeline import Activity

_UNITS = {
    "B": 1,
    "KiB": 1024,
    "MiB": 1024**2,
    "GiB": 1024**3,
    "TiB": 1024**4,
    "KB": 1000,
    "MB": 1000**2,
    "GB": 1000**3,
    "TB": 1000**4,
}
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMGT]i?B|B)?\s*$")


def parse_bytes(value: Any) -> Any:
    """An int (bytes) or a string such as ``"30 GiB"`` to bytes; others pass through."""
    if isinstance(value, str):
        match = _SIZE.match(value)
        if match is None:
            raise ValueError(f"{value!r} is not a size (e.g. 1073741824, '30 GiB', '72 GB')")
        number, unit = match.groups()
        return int(float(number) * _UNITS[unit or "B"])
    return value


ByteSize = Annotated[int, BeforeValidator(parse_bytes), Field(ge=0)]
_UUID_HEX = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
_PROFILE = re.compile(r"^([1-7])g\.(\d+)gb(\+me)?$")


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class DriverInfo(_Model):
    """What the system-level calls report."""

    version: str = "570.133.20"
    nvml_version: str = "12.570.133.20"
    cuda_version: int = Field(default=12080, gt=0)
    process_struct_bytes: Literal[24, 32] = 24


class ProcessConfig(_Model):
    """A process holding memory on a GPU (or MIG instance) while it runs."""

    pid: int = Field(ge=1, le=0xFFFFFFFF)
    name: str = Field(min_length=1)
    kind: Literal["compute", "graphics"] = "compute"
    memory: ByteSize | None = None
    memory_fraction: float | None = Field(default=None, gt=0, le=1)
    start: float = Field(default=0.0, ge=0)
    end: float | None = None
    share: float = Field(default=1.0, ge=0)
    memory_visible: bool = True
    name_encoding: Literal["utf-8", "latin-1"] = "utf-8"

    @model_validator(mode="after")
    def _consistent(self) -> ProcessConfig:
        if (self.memory is None) == (self.memory_fraction is None):
            raise ValueError("give exactly one of memory and memory_fraction")
        try:
            self.name.encode(self.name_encoding)
        except UnicodeEncodeError:
            raise ValueError(f"name cannot be written in {self.name_encoding}") from None
        if self.end is not None and self.end <= self.start:
            raise ValueError("end must be after start")
        return self

    def memory_bytes(self, usable: int) -> int:
        """Memory held in bytes; a fraction is of `usable` (total - reserved), in whole MiB."""
        if self.memory is not None:
            return self.memory
        return int((self.memory_fraction or 0.0) * usable) // MIB * MIB

    def running(self, t: float) -> bool:
        """True while the process exists (start <= t < end)."""
        return self.start <= t and (self.end is None or t < self.end)


class EccCounts(_Model):
    """Aggregate ECC error counts the GPU starts with."""

    corrected: int = Field(default=0, ge=0)
    uncorrected: int = Field(default=0, ge=0)


class MigInstanceConfig(_Model):
    """One MIG device (a GPU instance with one compute instance)."""

    profile: str
    gpu_instance_id: int | None = Field(default=None, ge=0)
    compute_instance_id: int = Field(default=0, ge=0)
    # the GPU instance's profile ID and placement start (nvmlGpuInstanceGetInfo); default:
    # the profile's ID as on an H100/A100 (1g: 19, or 15 with two memory slices; 2g: 14;
    # 3g: 9; 4g: 5; 7g: 0) and the instances placed in order, each after the previous
    # one's memory slices
    gpu_instance_profile_id: int | None = Field(default=None, ge=0)
    placement_start: int | None = Field(default=None, ge=0, le=7)
    memory: ByteSize | None = None
    uuid: str | None = Field(default=None, pattern=rf"^MIG-{_UUID_HEX}$")
    activity: Activity = Activity()
    processes: tuple[ProcessConfig, ...] = ()

    @field_validator("profile")
    @classmethod
    def _profile(cls, profile: str) -> str:
        if not _PROFILE.match(profile):
            raise ValueError(f"{profile!r} is not a MIG profile such as '1g.10gb' or '3g.40gb'")
        return profile

    @property
    def slices(self) -> int:
        """Compute slices (the N of Ng.XXgb), out of 7."""
        match = _PROFILE.match(self.profile)
        return int(match.group(1)) if match else 1

    def memory_slices(self, gpu_memory_bytes: int) -> int:
        """Memory slices of the GPU's eight the profile takes (1g.10gb of 80 GB: 1)."""
        match = _PROFILE.match(self.profile)
        gigabytes = int(match.group(2)) if match else 10
        return max(1, round(gigabytes * 1e9 * 8 / gpu_memory_bytes))

    def profile_id(self, gpu_memory_bytes: int) -> int:
        """`gpu_instance_profile_id`, else the profile's ID on an H100/A100."""
        if self.gpu_instance_profile_id is not None:
            return self.gpu_instance_profile_id
        if self.slices == 1:
            return 19 if self.memory_slices(gpu_memory_bytes) == 1 else 15
        return {2: 14, 3: 9, 4: 5}.get(self.slices, 0)

    def memory_bytes(self) -> int:
        """Instance memory: `memory`, else about the profile's GB as nvidia-smi shows it."""
        if self.memory is not None:
            return self.memory
        match = _PROFILE.match(self.profile)
        gigabytes = int(match.group(2)) if match else 10
        return gigabytes * 1000 * MIB - 256 * MIB


class MigChange(_Model):
    """MIG mode set at runtime (`nvidia-smi -mig`): pending from `at`, current from `applied`.

    Without `applied` (no GPU reset yet) the mode stays pending and nothing changes.
    """

    at: float = Field(ge=0)
    enabled: bool
    applied: float | None = None

    @model_validator(mode="after")
    def _ordered(self) -> MigChange:
        if self.applied is not None and self.applied < self.at:
            raise ValueError("applied must not be before at")
        return self


class GpuConfig(_Model):
    """One GPU of the fleet."""

    preset: str
    uuid: str | None = Field(default=None, pattern=rf"^GPU-{_UUID_HEX}$")
    serial: str | None = Field(default=None, min_length=1, max_length=29)
    pci_bus_id: str | None = Field(
        default=None, pattern=r"^[0-9A-F]{8}:[0-9A-F]{2}:[0-9A-F]{2}\.[0-7]$"
    )
    power_limit_w: float | None = Field(default=None, gt=0)
    ecc_errors: EccCounts = EccCounts()
    mig_mode: bool | None = None
    mig: tuple[MigInstanceConfig, ...] = ()
    mig_changes: tuple[MigChange, ...] = ()
    minor_number: int | None = Field(default=None, ge=0, le=255)
    activity: Activity = Activity()
    processes: tuple[ProcessConfig, ...] = ()

    @field_validator("preset")
    @classmethod
    def _known_preset(cls, preset: str) -> str:
        if preset not in PRESETS:
            raise ValueError(f"unknown preset {preset!r} (known: {', '.join(sorted(PRESETS))})")
        return preset

    @property
    def device(self) -> DevicePreset:
        """The preset this GPU is."""
        return PRESETS[self.preset]

    @property
    def mig_enabled(self) -> bool:
        """MIG mode at start: `mig_mode`, else off with `mig_changes`, else on with instances."""
        if self.mig_mode is not None:
            return self.mig_mode
        return False if self.mig_changes else bool(self.mig)
