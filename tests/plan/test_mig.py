"""The MIG tables against NVIDIA's published profile tables, placements and examples.

Sources (cited in gpuwatch.plan.mig):

- GUIDE: NVIDIA Multi-Instance GPU User Guide, "Supported MIG Profiles": each table's
  "Number of Instances Available" is 7 / 4 / 3 / 2 / 1 / 1 for the 1g (one memory
  slice), 1g (two), 2g, 3g, 4g and 7g profiles of A100, H100 80/94/96GB, H200 and B200.
- The guide's "Getting Started with MIG": ``nvidia-smi mig -lgipp`` on an A100 40GB, and
  the geometries it creates there: two 3g.20gb; "3-2-1-1" (``-cgi 9,19,14,19``);
  "2-1-1-1-1-1" (``-cgi 14,19,19,19,19,19``).
- NVIDIA/mig-parted: examples/config.yaml's A100 40GB configurations (all-1g.5gb: 7,
  all-2g.10gb: 3, all-3g.20gb: 2, all-balanced: 2 x 1g.5gb + 2g.10gb + 3g.20gb) and
  pkg/mig/builder/balanced_test.go's all-balanced per model (2 x 1g + 2g + 3g).
"""

from __future__ import annotations

import itertools

import pytest

from gpuwatch.core.units import GIB
from gpuwatch.plan.mig import (
    A100_40GB,
    A100_80GB,
    B200_180GB,
    B300_288GB,
    COMPUTE_SLICES,
    H100_80GB,
    H100_94GB,
    H100_96GB,
    H200_141GB,
    MEMORY_SLICES,
    MIG_TABLES,
    RTX_PRO_6000_96GB,
    MigTable,
    mig_table,
)
from gpuwatch.sizing import build_gpu_catalog

TABLES = (
    A100_40GB,
    A100_80GB,
    H100_80GB,
    H100_94GB,
    H100_96GB,
    H200_141GB,
    B200_180GB,
    B300_288GB,
)

GUIDE_NAMES = {
    A100_40GB: ("1g.5gb", "1g.10gb", "2g.10gb", "3g.20gb", "4g.20gb", "7g.40gb"),
    A100_80GB: ("1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"),
    H100_80GB: ("1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"),
    H100_94GB: ("1g.12gb", "1g.24gb", "2g.24gb", "3g.47gb", "4g.47gb", "7g.94gb"),
    H100_96GB: ("1g.12gb", "1g.24gb", "2g.24gb", "3g.48gb", "4g.48gb", "7g.96gb"),
    H200_141GB: ("1g.18gb", "1g.35gb", "2g.35gb", "3g.71gb", "4g.71gb", "7g.141gb"),
    B200_180GB: ("1g.23gb", "1g.45gb", "2g.45gb", "3g.90gb", "4g.90gb", "7g.180gb"),
    # no guide table: NVIDIA mig-parted's config-default.yaml (device filter 0x318210DE)
    B300_288GB: ("1g.34gb", "1g.67gb", "2g.67gb", "3g.135gb", "4g.135gb", "7g.269gb"),
}
GUIDE_INSTANCES = (7, 4, 3, 2, 1, 1)
"""The guide's "Number of Instances Available", in the order of GUIDE_NAMES."""
GUIDE_MEMORY_FRACTION = (1 / 8, 2 / 8, 2 / 8, 4 / 8, 4 / 8, 1.0)
"""The guide's "Fraction of Memory" (1g.20gb-class: "1/4"; 7g: "Full"). The A100 table
prints 1/8 for 1g.10gb, but its -lgipp placement is {0,2,4,6}:2, two slices."""
GUIDE_SM_FRACTION = (1 / 7, 1 / 7, 2 / 7, 3 / 7, 4 / 7, 1.0)
"""The guide's "Fraction of SMs": the share where no SM count is at hand."""
LGIP_SMS = {
    A100_40GB: ((14, 14, 28, 42, 56, 98), 108),
    A100_80GB: ((14, 14, 28, 42, 56, 98), 108),
    H100_80GB: ((16, 26, 32, 60, 64, 132), 132),
    H100_94GB: ((16, 26, 32, 60, 64, 132), 132),
}
"""The SM column of `nvidia-smi mig -lgip` (A100; H100 80GB HBM3; H100 NVL in OpenNebula's
"NVIDIA vGPU & MIG") and the GPU's SMs outside MIG (A100 108, H100 SXM5 and NVL 132): a
1g of an H100 SXM is 16/132 = 12.1 %, not 1/7."""


@pytest.mark.parametrize("table", TABLES, ids=lambda t: t.model)
def test_profiles_are_the_guides(table: MigTable) -> None:
    assert tuple(p.name for p in table.profiles) == GUIDE_NAMES[table]
    assert tuple(p.max_count for p in table.profiles) == GUIDE_INSTANCES
    assert tuple(p.memory_fraction for p in table.profiles) == GUIDE_MEMORY_FRACTION
    if table in LGIP_SMS:
        sms, gpu = LGIP_SMS[table]
        assert tuple(p.compute_fraction for p in table.profiles) == tuple(n / gpu for n in sms)
    else:
        assert tuple(p.compute_fraction for p in table.profiles) == GUIDE_SM_FRACTION


def test_an_h100_1g_slice_has_16_of_132_sms() -> None:
    """Issue 24: seven units at 12.5 % activity no longer fit seven 1g.10gb of an H100
    SXM (16 SMs each: 12.1 % of the GPU, 10.9 % with 10 % headroom)."""
    one = H100_80GB.profile("1g.10gb")
    assert one.compute_fraction == pytest.approx(0.1212, abs=1e-4)
    assert one.compute_fraction < 0.125 < 1 / 7


@pytest.mark.parametrize("table", TABLES, ids=lambda t: t.model)
def test_enumeration_reproduces_the_guides_instance_counts(table: MigTable) -> None:
    """The most instances of each profile that any enumerated configuration holds is the
    guide's "Number of Instances Available", and every configuration keeps within the
    GPU's 7 compute and 8 memory slices."""
    configs = table.configurations
    for i, profile in enumerate(table.profiles):
        assert max(config.counts[i] for config in configs) == profile.max_count
    for config in configs:
        instances = config.instances(table)
        assert sum(p.compute_slices for p in instances) <= COMPUTE_SLICES
        assert sum(p.memory_slices for p in instances) <= MEMORY_SLICES


def test_a100_placements_are_the_guides_lgipp() -> None:
    """The guide's ``nvidia-smi mig -lgipp`` on an A100 40GB, as {starts}:size."""
    lgipp = {
        "1g.5gb": ((0, 1, 2, 3, 4, 5, 6), 1),
        "1g.10gb": ((0, 2, 4, 6), 2),
        "2g.10gb": ((0, 2, 4), 2),
        "3g.20gb": ((0, 4), 4),
        "4g.20gb": ((0,), 4),
        "7g.40gb": ((0,), 8),
    }
    for name, (starts, size) in lgipp.items():
        profile = A100_40GB.profile(name)
        assert (profile.placements, profile.memory_slices) == (starts, size)


def test_the_guides_and_mig_parteds_configurations_are_valid() -> None:
    for counts in (
        {"3g.20gb": 2},  # the guide: -cgi 9,3g.20gb
        {"3g.20gb": 1, "2g.10gb": 1, "1g.5gb": 2},  # the guide: 3-2-1-1 geometry
        {"2g.10gb": 1, "1g.5gb": 5},  # the guide: 2-1-1-1-1-1 geometry
        {"1g.5gb": 7},  # mig-parted all-1g.5gb
        {"2g.10gb": 3},  # mig-parted all-2g.10gb
        {"7g.40gb": 1},
    ):
        assert A100_40GB.is_valid(counts), counts
    balanced = {  # mig-parted balanced_test.go: 2 x 1g + 1 x 2g + 1 x 3g
        A100_80GB: {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1},
        H100_80GB: {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1},
        H100_94GB: {"1g.12gb": 2, "2g.24gb": 1, "3g.47gb": 1},
        H100_96GB: {"1g.12gb": 2, "2g.24gb": 1, "3g.48gb": 1},
        H200_141GB: {"1g.18gb": 2, "2g.35gb": 1, "3g.71gb": 1},
        B200_180GB: {"1g.23gb": 2, "2g.45gb": 1, "3g.90gb": 1},
    }
    for table, counts in balanced.items():
        assert table.is_valid(counts), table.model


def test_placement_rules_reject_what_memory_counting_would_allow() -> None:
    """Two 4g.20gb fill exactly the 8 memory slices (2 x 20 GB = 40 GB) but are invalid:
    a 4g.20gb starts only at slice 0, and 4 + 4 compute slices exceed 7. Two 3g.20gb and
    a 1g.5gb keep within 7 compute slices but need 9 memory slices."""
    assert not A100_40GB.is_valid({"4g.20gb": 2})
    assert not A100_40GB.is_valid({"4g.20gb": 1, "3g.20gb": 1, "1g.5gb": 1})
    assert not A100_40GB.is_valid({"3g.20gb": 2, "1g.5gb": 1})
    assert not A100_40GB.is_valid({"1g.10gb": 4, "1g.5gb": 1})
    assert A100_40GB.is_valid({"4g.20gb": 1, "3g.20gb": 1})
    assert A100_40GB.is_valid({"2g.10gb": 3, "1g.10gb": 1})
    assert A100_40GB.is_valid({"1g.5gb": 6, "1g.10gb": 1})  # the 1g.10gb at 6, slices 6-7
    assert not A100_40GB.is_valid({"nope": 1})


@pytest.mark.parametrize("table", TABLES, ids=lambda t: t.model)
def test_placements_agree_with_slice_counting(table: MigTable) -> None:
    """For this layout the placement-aware enumeration finds exactly the count vectors
    within 8 memory slices, 7 compute slices and each profile's instance count: no
    combination is lost to alignment. (What the plan relies on is the enumeration.)"""
    counted = set()
    for counts in itertools.product(*(range(p.max_count + 1) for p in table.profiles)):
        memory = sum(c * p.memory_slices for c, p in zip(counts, table.profiles, strict=True))
        compute = sum(c * p.compute_slices for c, p in zip(counts, table.profiles, strict=True))
        if any(counts) and memory <= MEMORY_SLICES and compute <= COMPUTE_SLICES:
            counted.add(counts)
    assert {config.counts for config in table.configurations} == counted
    assert len(counted) == 77


def test_maximal_configurations_contain_every_configuration() -> None:
    for table in TABLES:
        maximal = table.maximal_configurations
        for config in table.configurations:
            assert any(
                all(a >= b for a, b in zip(big.counts, config.counts, strict=True))
                for big in maximal
            )
    labels = {c.label(A100_40GB) for c in A100_40GB.maximal_configurations}
    assert "3g.20gb + 3g.20gb" in labels
    assert "4g.20gb + 3g.20gb" in labels
    assert "7g.40gb" in labels


def test_catalog_ids_map_to_their_tables() -> None:
    catalog = build_gpu_catalog()
    for gpu_id, table in MIG_TABLES.items():
        gpu = catalog.get(gpu_id)
        if table is B300_288GB:  # mig-parted's 7g.269gb: 269 of the B300's 288 GB
            assert table.profiles[-1].memory_bytes == 269e9 < gpu.memory_bytes
            continue
        assert table.profiles[-1].memory_bytes == gpu.memory_bytes, gpu_id
    for gpu_id in ("L4-24GB", "L40S-48GB", "T4-16GB", "V100-SXM2-32GB", "RTX-4090-24GB"):
        assert gpu_id in catalog
        assert mig_table(gpu_id) is None
    assert mig_table("h100-sxm-80gb") is H100_80GB


def test_profile_memory_is_at_most_what_nvidia_smi_reports() -> None:
    """``nvidia-smi mig -lgip`` on an H100 80GB HBM3 (published output): GiB per profile."""
    lgip_gib = {
        "1g.10gb": 9.75,
        "1g.20gb": 19.62,
        "2g.20gb": 19.62,
        "3g.40gb": 39.50,
        "4g.40gb": 39.50,
        "7g.80gb": 79.25,
    }
    for name, gib in lgip_gib.items():
        assert H100_80GB.profile(name).memory_bytes <= gib * GIB


def test_rtx_pro_6000_is_the_guides_four_slice_table() -> None:
    """The guide's RTX PRO 6000 Blackwell table: 1g.24gb (1/4 of memory and SMs, 4
    instances), 2g.48gb (1/2, 2), 4g.96gb (full, 1), on 4 compute and 4 memory slices."""
    table = RTX_PRO_6000_96GB
    assert (table.compute_slices, table.memory_slices) == (4, 4)
    assert [p.name for p in table.profiles] == ["1g.24gb", "2g.48gb", "4g.96gb"]
    assert [p.max_count for p in table.profiles] == [4, 2, 1]
    assert [p.compute_fraction for p in table.profiles] == [0.25, 0.5, 1.0]
    assert [p.memory_fraction for p in table.profiles] == [0.25, 0.5, 1.0]
    assert [p.memory_bytes for p in table.profiles] == [24e9, 48e9, 96e9]


def test_rtx_pro_6000_configurations_by_hand() -> None:
    """Counts (1g, 2g, 4g) on 4 memory slices, 1g at {0,1,2,3}, 2g at {0,2}, 4g at {0}:
    1-4 x 1g (4), 1-2 x 2g (2), 4g (1), one 2g with one or two 1g in the other half (2):
    9 configurations; the maximal ones are 4 x 1g, 2 x 2g, 4g and 2g + 2 x 1g, the four
    NVIDIA's mig-parted ships (all-1g.24gb, all-2g.48gb, all-4g.96gb, all-balanced).
    Three 1g with a 2g need 5 slices: not valid."""
    table = RTX_PRO_6000_96GB
    assert {c.counts for c in table.configurations} == {
        (1, 0, 0), (2, 0, 0), (3, 0, 0), (4, 0, 0),
        (0, 1, 0), (0, 2, 0), (0, 0, 1), (1, 1, 0), (2, 1, 0),
    }  # fmt: skip
    assert {c.counts for c in table.maximal_configurations} == {
        (4, 0, 0), (0, 2, 0), (0, 0, 1), (2, 1, 0),
    }  # fmt: skip
    assert table.is_valid({"1g.24gb": 2, "2g.48gb": 1})
    assert not table.is_valid({"1g.24gb": 3, "2g.48gb": 1})
    assert not table.is_valid({"2g.48gb": 1, "4g.96gb": 1})


def test_the_b300_has_the_b200s_layout_and_mig_parted_configures_it() -> None:
    """mig-parted's B300 configs: all-1g.34gb 7, all-1g.67gb 4, all-2g.67gb 3,
    all-3g.135gb 2, all-4g.135gb 1, all-7g.269gb 1, all-balanced 2 x 1g.34gb + 2g.67gb +
    3g.135gb: each a valid configuration here; a 1g of a B300 is 1/7 of it (no SM count
    at hand)."""
    table = B300_288GB
    for name, count in zip(GUIDE_NAMES[table], GUIDE_INSTANCES, strict=True):
        assert table.is_valid({name: count})
        assert not table.is_valid({name: count + 1})
    assert table.is_valid({"1g.34gb": 2, "2g.67gb": 1, "3g.135gb": 1})
    assert table.profile("1g.34gb").compute_fraction == 1 / 7
    assert mig_table("B300-288GB") is table


def test_an_h100_nvl_1g_slice_has_16_of_132_sms() -> None:
    """OpenNebula's published `nvidia-smi mig -lgip` on an H100 NVL: 1g.12gb 16 SMs of
    132 (12.1 %), where the guide's 1/7 is 14.3 %."""
    assert H100_94GB.profile("1g.12gb").compute_fraction == pytest.approx(16 / 132)
    assert mig_table("H100-NVL-94GB") is H100_94GB
