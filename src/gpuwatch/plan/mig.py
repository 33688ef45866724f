"""MIG profile tables and their placement rules, per catalog GPU.

A data-centre MIG GPU (A100, H100, H200, B200, B300) has 7 compute slices and 8 memory
slices; an RTX PRO 6000 Blackwell has 4 and 4 (`MigTable.compute_slices`,
`memory_slices`). A GPU instance of profile ``<c>g.<m>gb`` takes `compute_slices` compute
slices and a contiguous run of `memory_slices` memory slices that must start at one of
the profile's `placements` (what ``nvidia-smi mig -lgipp`` prints as ``{starts}:size``).
A set of instances is a valid configuration when their memory slices do not overlap and
their compute slices add up to at most the GPU's; `MigTable.configurations` enumerates
every one.

Sources:

- Profiles, fractions and "Number of Instances Available": NVIDIA Multi-Instance GPU
  User Guide, "Supported MIG Profiles" (docs.nvidia.com/datacenter/tesla/mig-user-guide/
  supported-mig-profiles.html), the tables for A100 (40GB; the 80GB names are given in
  the same section), H100 80GB (PCIe and SXM5), H100 94GB (PCIe and SXM5), H100 96GB
  (H100 on GH200), H200 141GB and B200 180 GB. The ``+me`` (media-extension) variants
  are left out: they have the same slices as the plain 1g profile, at most one each.
- Placements: the guide's "Getting Started with MIG" prints ``nvidia-smi mig -lgipp``
  on an A100 40GB: 1g.5gb {0..6}:1, 1g.10gb {0,2,4,6}:2, 2g.10gb {0,2,4}:2, 3g.20gb
  {0,4}:4, 4g.20gb {0}:4, 7g.40gb {0}:8. The same profile IDs print the same
  placements on an H100 NVL (Colfax Research, "Sharing NVIDIA GPUs at the System Level:
  Time-Sliced and MIG-Backed vGPUs", 2024) and an H100 80GB HBM3 (published
  ``nvidia-smi mig -lgipp`` output). The H200, GH200 and B200 tables have the same
  fractions and instance counts, so they are given the same layout: an inference, which
  the tests check against each table's instance counts.
- RTX PRO 6000 Blackwell (Workstation, Max-Q and Server Edition, 96GB): the guide's
  "RTX PRO 6000 Blackwell MIG Profiles" table (current edition of the same page): 1g.24gb
  (1/4 of memory and SMs, 4 instances), 2g.48gb (1/2, 2), 4g.96gb (full, 1); the
  ``+me``, ``+gfx``, ``+me.all`` and ``-me`` variants are left out (same slices). Its
  placements are not published: 4 compute and 4 memory slices laid out as the A30's
  (1g {0,1,2,3}:1, 2g {0,2}:2, 4g {0}:4, the guide's A30 table has the same fractions and
  counts), which gives exactly the configurations NVIDIA's mig-parted ships for it
  (``all-1g.24gb`` 4, ``all-2g.48gb`` 2, ``all-4g.96gb`` 1, ``all-balanced`` 2 x 1g + 1 x
  2g: ``deployments/systemd/config-default.yaml``, device filter 0x2BB510DE).
- B300 288GB: the guide prints no table. NVIDIA mig-parted (v0.13.0, "Add MIG profiles
  for B300 and GB300", ``deployments/systemd/config-default.yaml`` at commit bd7160f4,
  device filter 0x318210DE) configures 1g.34gb x 7, 1g.67gb x 4, 2g.67gb x 3, 3g.135gb x
  2, 4g.135gb x 1, 7g.269gb x 1 and the balanced 2 x 1g.34gb + 2g.67gb + 3g.135gb: the
  B200's counts, so the B200's layout (an inference, as for the H200). Its full profile
  holds 269 GB, not the part's 288 GB.

Memory: `MigProfile.memory_bytes` is the profile name's figure in decimal GB (``10gb``
= 10e9 bytes), the catalog's convention for a whole GPU (gpus.toml's ``memory_gb``, at
most what NVML reports). It is below what an instance holds: ``nvidia-smi mig -lgip``
on an H100 80GB lists 1g.10gb at 9.75 GiB (10.47e9 bytes), 1g.20gb and 2g.20gb at
19.62 GiB, 3g.40gb and 4g.40gb at 39.50 GiB, 7g.80gb at 79.25 GiB. The full-GPU
profile's figure equals the catalog part's ``memory_gb`` (80, 94, 96, 141, 180, 96), but
for the B300, whose 7g.269gb holds 269 of its 288 GB.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from types import MappingProxyType

from gpuwatch.sizing.units import GB

COMPUTE_SLICES = 7
"""Compute slices of a data-centre MIG GPU (A100, H100, H200, B200, B300)."""

MEMORY_SLICES = 8
"""Memory slices of a data-centre MIG GPU (A100, H100, H200, B200, B300)."""

GUIDE = (
    "NVIDIA Multi-Instance GPU User Guide, 'Supported MIG Profiles' "
    "(docs.nvidia.com/datacenter/tesla/mig-user-guide/supported-mig-profiles.html)"
)

_NAME = re.compile(r"^(?P<compute>[1-7])g\.(?P<memory>\d+)gb$")


@dataclass(frozen=True, slots=True)
class MigProfile:
    """One GPU instance profile of one GPU model."""

    name: str  # "3g.40gb"
    compute_slices: int  # of COMPUTE_SLICES
    memory_slices: int  # of MEMORY_SLICES, contiguous from a placement start
    memory_bytes: int  # the name's figure in decimal bytes (see the module docstring)
    max_count: int  # the guide's "Number of Instances Available"
    placements: tuple[int, ...]  # memory-slice indices where an instance may start
    sm_count: int = 0  # the instance's SMs (nvidia-smi mig -lgip's SM column); 0: unpublished
    gpu_sm_count: int = 0  # the whole GPU's SMs outside MIG; 0: unpublished
    gpu_compute_slices: int = COMPUTE_SLICES  # the GPU's compute slices (RTX PRO 6000: 4)
    gpu_memory_slices: int = MEMORY_SLICES  # the GPU's memory slices (RTX PRO 6000: 4)

    @property
    def compute_fraction(self) -> float:
        """Share of the whole GPU's SMs (and of its dense FLOP/s), 0-1: the profile's SMs
        over the GPU's where both are published (an H100 SXM 1g: 16 of 132, 12.1 %),
        else compute slices over the GPU's (1/7; 1/4 on an RTX PRO 6000)."""
        if self.sm_count and self.gpu_sm_count:
            return self.sm_count / self.gpu_sm_count
        return self.compute_slices / self.gpu_compute_slices

    @property
    def memory_fraction(self) -> float:
        """Share of the GPU's memory slices (and of its DRAM bandwidth), 0-1."""
        return self.memory_slices / self.gpu_memory_slices


@dataclass(frozen=True, slots=True)
class MigConfiguration:
    """One valid configuration of a GPU: how many instances of each profile."""

    counts: tuple[int, ...]  # per profile of the table, in table order

    def instances(self, table: MigTable) -> tuple[MigProfile, ...]:
        """The profile of each instance, largest first."""
        return tuple(
            profile
            for profile, count in reversed(tuple(zip(table.profiles, self.counts, strict=True)))
            for _ in range(count)
        )

    def label(self, table: MigTable) -> str:
        """E.g. "3g.40gb + 3g.40gb"."""
        return " + ".join(profile.name for profile in self.instances(table))


@dataclass(frozen=True, slots=True)
class MigTable:
    """The MIG profiles of one GPU model, smallest first, and where they come from."""

    model: str  # "H100 80GB"
    profiles: tuple[MigProfile, ...]
    source: str
    compute_slices: int = COMPUTE_SLICES  # the GPU's
    memory_slices: int = MEMORY_SLICES  # the GPU's

    def profile(self, name: str) -> MigProfile:
        """The profile called `name` (e.g. "3g.40gb"); raises KeyError."""
        for profile in self.profiles:
            if profile.name == name:
                return profile
        raise KeyError(f"{self.model} has no MIG profile {name!r}")

    @property
    def configurations(self) -> tuple[MigConfiguration, ...]:
        """Every valid non-empty configuration, each once (as counts per profile)."""
        return _configurations(self)

    @property
    def maximal_configurations(self) -> tuple[MigConfiguration, ...]:
        """The valid configurations to which no further instance can be added.

        Every valid configuration is contained in one of these, so a plan that may leave
        instances unused needs only these.
        """
        return _maximal(self)

    def is_valid(self, counts: Mapping[str, int]) -> bool:
        """Whether instances with these counts per profile name fit one GPU together."""
        wanted = tuple(counts.get(profile.name, 0) for profile in self.profiles)
        unknown = set(counts) - {profile.name for profile in self.profiles}
        if unknown or any(count < 0 for count in wanted):
            return False
        return not any(wanted) or MigConfiguration(wanted) in set(self.configurations)


def _placements_of(table: MigTable) -> Iterator[tuple[int, ...]]:
    """Count vectors of every set of non-overlapping placements within the compute limit."""
    n = len(table.profiles)

    def visit(slot: int, counts: list[int], compute: int) -> Iterator[tuple[int, ...]]:
        if slot >= table.memory_slices:
            yield tuple(counts)
            return
        yield from visit(slot + 1, counts, compute)  # memory slice `slot` left empty
        for i, profile in enumerate(table.profiles):
            end = slot + profile.memory_slices
            if (
                slot in profile.placements
                and end <= table.memory_slices
                and compute + profile.compute_slices <= table.compute_slices
            ):
                counts[i] += 1
                yield from visit(end, counts, compute + profile.compute_slices)
                counts[i] -= 1

    yield from visit(0, [0] * n, 0)


@functools.cache
def _configurations(table: MigTable) -> tuple[MigConfiguration, ...]:
    found = {counts for counts in _placements_of(table) if any(counts)}
    return tuple(MigConfiguration(counts) for counts in sorted(found, reverse=True))


@functools.cache
def _maximal(table: MigTable) -> tuple[MigConfiguration, ...]:
    every = _configurations(table)
    return tuple(
        config
        for config in every
        if not any(
            other != config
            and all(a >= b for a, b in zip(other.counts, config.counts, strict=True))
            for other in every
        )
    )


# The GA100/GH100 layout (-lgipp): (compute slices, memory slices, placement starts).
_LAYOUT = {
    "1g-small": (1, 1, (0, 1, 2, 3, 4, 5, 6)),
    "1g-large": (1, 2, (0, 2, 4, 6)),
    "2g": (2, 2, (0, 2, 4)),
    "3g": (3, 4, (0, 4)),
    "4g": (4, 4, (0,)),
    "7g": (7, 8, (0,)),
}
_MAX_COUNT = {"1g-small": 7, "1g-large": 4, "2g": 3, "3g": 2, "4g": 1, "7g": 1}
"""The guide's "Number of Instances Available", the same in each table used here."""


# The RTX PRO 6000 Blackwell layout: 4 compute and 4 memory slices, as the A30's.
_LAYOUT_4 = {"1g": (1, 1, (0, 1, 2, 3)), "2g": (2, 2, (0, 2)), "4g": (4, 4, (0,))}
_MAX_COUNT_4 = {"1g": 4, "2g": 2, "4g": 1}
"""The guide's "Number of Instances" in the RTX PRO 6000 Blackwell table."""


def _table(
    model: str,
    names: tuple[str, ...],
    section: str,
    sms: tuple[int, ...] | None = None,
    gpu_sms: int = 0,
    *,
    four: bool = False,
    source: str = GUIDE,
) -> MigTable:
    layout, counts = (_LAYOUT_4, _MAX_COUNT_4) if four else (_LAYOUT, _MAX_COUNT)
    compute_total, memory_total = (4, 4) if four else (COMPUTE_SLICES, MEMORY_SLICES)
    profiles = []
    for n, (kind, name) in enumerate(zip(layout, names, strict=True)):
        match = _NAME.match(name)
        if match is None:
            raise ValueError(f"not a MIG profile name: {name!r}")
        compute, memory, placements = layout[kind]
        if int(match["compute"]) != compute:
            raise ValueError(f"{name!r} is not a {kind} profile")
        profiles.append(
            MigProfile(
                name=name,
                compute_slices=compute,
                memory_slices=memory,
                memory_bytes=int(match["memory"]) * GB,
                max_count=counts[kind],
                placements=placements,
                sm_count=0 if sms is None else sms[n],
                gpu_sm_count=0 if sms is None else gpu_sms,
                gpu_compute_slices=compute_total,
                gpu_memory_slices=memory_total,
            )
        )
    return MigTable(
        model=model,
        profiles=tuple(profiles),
        source=f"{source}, {section}",
        compute_slices=compute_total,
        memory_slices=memory_total,
    )


_GA100_SMS = (14, 14, 28, 42, 56, 98)
"""SMs per A100 profile, smallest first: the SM column of ``nvidia-smi mig -lgip`` on an
A100 (40GB and 80GB print the same: 1g 14, 2g 28, 3g 42, 4g 56, 7g 98), of the 108 SMs
an A100 (SXM4 and PCIe) has outside MIG."""
_GH100_SXM_SMS = (16, 26, 32, 60, 64, 132)
"""SMs per H100 SXM5 80GB profile: ``nvidia-smi mig -lgip`` on an H100 80GB HBM3 prints
1g.10gb 16, 1g.20gb 26, 2g.20gb 32, 3g.40gb 60, 4g.40gb 64, 7g.80gb 132, of its 132 SMs.
The guide's table says "1/7" for a 1g: 14.3 % against the 12.1 % the SMs give."""
_GH100_NVL_SMS = (16, 26, 32, 60, 64, 132)
"""SMs per H100 94GB profile: ``nvidia-smi mig -lgip`` on an H100 NVL, published in
OpenNebula's documentation ("NVIDIA vGPU & MIG", github.com/OpenNebula/website,
content/product/cluster_configuration/hosts_and_clusters/vgpu.md): 1g.12gb 16, 1g.24gb
26, 2g.24gb 32, 3g.47gb 60, 4g.47gb 64, 7g.94gb 132, of the card's 132 SMs (the same
column as the H100 SXM5 80GB's)."""
MIG_PARTED = (
    "NVIDIA mig-parted, deployments/systemd/config-default.yaml "
    "(github.com/NVIDIA/mig-parted, commit bd7160f4)"
)

A100_40GB = _table(
    "A100 40GB",
    ("1g.5gb", "1g.10gb", "2g.10gb", "3g.20gb", "4g.20gb", "7g.40gb"),
    "A100 MIG Profiles (table for A100-SXM4-40GB)",
    _GA100_SMS,
    108,
)
A100_80GB = _table(
    "A100 80GB",
    ("1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"),
    "A100 MIG Profiles (the A100-SXM4-80GB names given there)",
    _GA100_SMS,
    108,
)
H100_80GB = _table(
    "H100 80GB",
    ("1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"),
    "H100 MIG Profiles (H100 80GB, PCIe and SXM5); SMs: nvidia-smi mig -lgip on SXM5",
    _GH100_SXM_SMS,
    132,
)
H100_80GB_PCIE = _table(
    "H100 80GB PCIe",
    ("1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"),
    "H100 MIG Profiles (H100 80GB, PCIe and SXM5); SMs unpublished for the 114-SM card",
)
H100_94GB = _table(
    "H100 94GB",
    ("1g.12gb", "1g.24gb", "2g.24gb", "3g.47gb", "4g.47gb", "7g.94gb"),
    "H100 MIG Profiles (H100 94GB, PCIe and SXM5); SMs: nvidia-smi mig -lgip on an H100 NVL "
    "(OpenNebula's 'NVIDIA vGPU & MIG')",
    _GH100_NVL_SMS,
    132,
)
H100_96GB = _table(
    "H100 96GB (GH200)",
    ("1g.12gb", "1g.24gb", "2g.24gb", "3g.48gb", "4g.48gb", "7g.96gb"),
    "H100 MIG Profiles (H100 96GB, H100 on GH200)",
)
H200_141GB = _table(
    "H200 141GB",
    ("1g.18gb", "1g.35gb", "2g.35gb", "3g.71gb", "4g.71gb", "7g.141gb"),
    "H200 MIG Profiles (H200 141GB)",
)
B200_180GB = _table(
    "B200 180GB",
    ("1g.23gb", "1g.45gb", "2g.45gb", "3g.90gb", "4g.90gb", "7g.180gb"),
    "B200 MIG Profiles (B200 180 GB)",
)
B300_288GB = _table(
    "B300 288GB",
    ("1g.34gb", "1g.67gb", "2g.67gb", "3g.135gb", "4g.135gb", "7g.269gb"),
    "all-1g.34gb ... all-7g.269gb and all-balanced (device filter 0x318210DE, B300); "
    "layout: the B200's (inferred)",
    source=MIG_PARTED,
)
RTX_PRO_6000_96GB = _table(
    "RTX PRO 6000 Blackwell 96GB",
    ("1g.24gb", "2g.48gb", "4g.96gb"),
    "RTX PRO 6000 Blackwell MIG Profiles (96GB); placements: the A30's layout (inferred)",
    four=True,
)

MIG_TABLES: Mapping[str, MigTable] = MappingProxyType(
    {
        "A100-SXM-40GB": A100_40GB,
        "A100-PCIe-40GB": A100_40GB,
        "A100-SXM-80GB": A100_80GB,
        "A100-PCIe-80GB": A100_80GB,
        "H100-SXM-80GB": H100_80GB,
        "H100-PCIe-80GB": H100_80GB_PCIE,
        "H100-NVL-94GB": H100_94GB,  # the guide's "H100 94GB (PCIe)": the NVL card
        "GH200-96GB": H100_96GB,
        "H200-141GB": H200_141GB,
        "H200-NVL-141GB": H200_141GB,  # "H200 NVL 141GB" in the guide's supported GPUs
        "B200-180GB": B200_180GB,
        "B300-288GB": B300_288GB,
        "RTX-PRO-6000-Blackwell-96GB": RTX_PRO_6000_96GB,
    }
)
"""Catalog id (gpus.toml) -> its MIG table. Parts without MIG (L4, L40S, V100, T4, the
other workstation and consumer cards) are absent; so is GH200 144GB (no table at hand).
B300 comes from NVIDIA mig-parted's shipped configuration, RTX PRO 6000 Blackwell from
the guide's table (module docstring); both layouts are inferred.

Compute: a profile's share of the GPU is its SMs over the whole GPU's where the SM
counts are published (A100, H100 SXM5 80GB, H100 94GB: `MigProfile.compute_fraction`),
else its compute slices over the GPU's (H100 PCIe 80GB, 96GB, H200, B200, B300, RTX PRO
6000: a full -lgip SM column of these parts was not at hand; their full instance may
hold fewer SMs than the card, so the fraction may overstate a 1g's share as it did on
the H100 SXM, by 14.3 % against 12.1 %)."""

_BY_FOLDED = {gpu_id.casefold(): table for gpu_id, table in MIG_TABLES.items()}


def mig_table(gpu_id: str) -> MigTable | None:
    """The MIG table of a catalog GPU (case-insensitive id), None where it has no MIG."""
    return _BY_FOLDED.get(gpu_id.casefold())
