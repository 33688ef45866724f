"""Device presets: the real specifications of the GPU models a scenario can use.

`PRESETS` maps a short id (``"h100-sxm"``, ``"l4"``...) to a `DevicePreset`, read from
the package data file ``presets.toml``; each entry cites its `source`.
"""

from __future__ import annotations

import tomllib
from importlib import resources
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from gpuwatch.core.units import MIB

Architecture = Literal["volta", "turing", "ampere", "ada", "hopper", "blackwell"]
Brand = Literal["nvidia", "tesla", "geforce", "quadro"]


class DevicePreset(BaseModel):
    """One GPU model as NVML reports it (see ``presets.toml`` for the field meanings)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str
    name: str
    architecture: Architecture
    compute_capability: tuple[int, int]
    brand: Brand
    memory_mib: int = Field(gt=0)
    reserved_mib: int = Field(ge=0)
    power_limit_w: float = Field(gt=0)
    power_min_limit_w: float = Field(gt=0)
    idle_power_w: float = Field(gt=0)
    max_sm_clock_mhz: int = Field(gt=0)
    max_mem_clock_mhz: int = Field(gt=0)
    idle_sm_clock_mhz: int = Field(gt=0)
    idle_mem_clock_mhz: int = Field(gt=0)
    temp_idle_c: float
    temp_load_c: float
    pcie_gen: int = Field(ge=1, le=6)
    pcie_width: int = Field(ge=1, le=16)
    pci_device_id: int = Field(ge=0, le=0xFFFF)
    pci_subsystem_id: int = Field(ge=0, le=0xFFFF)
    nvlink_links: int = Field(ge=0)
    gpm: bool
    mig_max: int = Field(ge=0, le=7)
    ecc: bool
    remapped_rows: bool
    memory_temperature: bool
    serial: bool
    source: str

    @property
    def memory_bytes(self) -> int:
        """Frame-buffer total in bytes (NVML `total`)."""
        return self.memory_mib * MIB

    @property
    def reserved_bytes(self) -> int:
        """Driver-reserved memory in bytes (NVML v2 `reserved`)."""
        return self.reserved_mib * MIB

    @property
    def has_nvlink(self) -> bool:
        """True when the part has NVLink (the throughput counters answer)."""
        return self.nvlink_links > 0


def _load_presets() -> dict[str, DevicePreset]:
    text = resources.files("gpuwatch.simulate").joinpath("presets.toml").read_text("utf-8")
    raw = tomllib.loads(text)
    presets: dict[str, DevicePreset] = {}
    for key, table in raw.items():
        try:
            presets[key] = DevicePreset.model_validate({"id": key, **table})
        except ValidationError as exc:  # a packaging bug, not a user error
            raise RuntimeError(f"presets.toml [{key}] is invalid: {exc}") from exc
    return presets


PRESETS: dict[str, DevicePreset] = _load_presets()
"""Every known device preset by id."""
