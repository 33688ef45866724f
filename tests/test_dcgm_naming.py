"""dcgm-exporter 4.9's naming set beside the classic one (`[exporter] dcgm_naming`).

dcgm-exporter 4.9.0's own etc/default-counters.csv is not available here, so the 4.9 set
is derived from DCGM's field table (tests/data/dcgm/field-ids.csv, vendored with its
sources): for every active row of the classic file, DCGM's canonical name of the same
field id, or, where the classic unit is not a base unit, DCGM 4.7's base-unit field for
the same measurement. Each row is checked here against that table by hand, and each
value against the classic set's value of the same tick times a factor re-derived here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pytest
from prometheus_client.exposition import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from gpuwatch.cli import main
from gpuwatch.config import AgentConfig, Config, ExporterConfig
from gpuwatch.export.dcgm import DRIVER_LABEL, FIELDS, DcgmNaming
from tests.conftest import make_agent, simulated
from tests.support.kube_node import kube_node, listed_tick
from tests.test_dcgm_default_counters import CLASSIC_CSV, NOT_EXPORTED, SHARED, _csv_rows

FIELD_IDS = Path(__file__).parent / "data" / "dcgm" / "field-ids.csv"
COMPATIBILITY = Path(__file__).parents[1] / "docs" / "compatibility.md"


@dataclass(frozen=True)
class Row:
    """One row of the vendored DCGM field table."""

    name: str
    field_id: int
    status: str  # "canonical" or "alias of <canonical name>"
    source: str  # "dcgm-4.6.0" (dcgm_fields.h) or "dcgm-4.7-doc" (4.7's base-unit fields)


def _table() -> dict[str, list[Row]]:
    out: dict[str, list[Row]] = {}
    for line in FIELD_IDS.read_text(encoding="utf-8").splitlines():
        if not line or line.startswith("#"):
            continue
        name, field_id, status, source = line.split(",")
        out.setdefault(name, []).append(Row(name, int(field_id), status, source))
    return out


# classic name -> (4.9 name, factor: 4.9 value = classic value x factor), by hand:
# MHz -> Hz x 1e6; mJ -> J / 1000; % -> ratio / 100; MiB -> bytes x 2**20; NVLink's
# KiB/s / 1000 (DCGM's "MB/s") -> bytes/s x 1000 x 1024.
UNIT_CHANGED = {
    "DCGM_FI_DEV_SM_CLOCK": ("DCGM_FI_DEV_SM_CLOCK_HERTZ", 1e6),
    "DCGM_FI_DEV_MEM_CLOCK": ("DCGM_FI_DEV_MEMORY_CLOCK_HERTZ", 1e6),
    "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION": ("DCGM_FI_DEV_GPU_ENERGY_JOULES_TOTAL", 1e-3),
    "DCGM_FI_DEV_GPU_UTIL": ("DCGM_FI_DEV_GPU_UTIL_RATIO", 0.01),
    "DCGM_FI_DEV_MEM_COPY_UTIL": ("DCGM_FI_DEV_MEMORY_UTIL_RATIO", 0.01),
    "DCGM_FI_DEV_ENC_UTIL": ("DCGM_FI_DEV_ENC_UTIL_RATIO", 0.01),
    "DCGM_FI_DEV_DEC_UTIL": ("DCGM_FI_DEV_DEC_UTIL_RATIO", 0.01),
    "DCGM_FI_DEV_FB_FREE": ("DCGM_FI_DEV_FB_FREE_BYTES", 1048576.0),
    "DCGM_FI_DEV_FB_USED": ("DCGM_FI_DEV_FB_USED_BYTES", 1048576.0),
    "DCGM_FI_DEV_FB_RESERVED": ("DCGM_FI_DEV_FB_RESERVED_BYTES", 1048576.0),
    "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL": (
        "DCGM_FI_DEV_NVLINK_THROUGHPUT_BYTES_PER_SECOND",
        1024000.0,
    ),
}
BASE_UNIT_SUFFIX = re.compile(r"_(HERTZ|JOULES_TOTAL|RATIO|BYTES|BYTES_PER_SECOND)$")
"""The base unit a DCGM 4.7 canonical name states."""
RENAMED_COUNT = 23  # 22 metric families and the driver-version label
UNIT_CHANGED_COUNT = 11


def _expected_current(classic: str, table: dict[str, list[Row]]) -> str:
    """The 4.9 name of a classic field, derived from the vendored table alone."""
    if classic in UNIT_CHANGED:
        return UNIT_CHANGED[classic][0]
    (row,) = [r for r in table[classic] if r.source == "dcgm-4.6.0"]
    return row.status.removeprefix("alias of ") if row.status != "canonical" else row.name


def test_every_classic_row_has_its_4_9_name_from_dcgms_field_table() -> None:
    table = _table()
    by_classic = {f.classic: f for f in FIELDS if f.classic is not None}
    renamed, unit_changed = 0, 0
    for field, kind, _ in _csv_rows(CLASSIC_CSV):
        if kind == "label":
            assert DRIVER_LABEL["classic"] == field
            current = DRIVER_LABEL["4.9"]
        elif field in NOT_EXPORTED:
            continue
        else:
            current = by_classic[field].current or ""
        assert current == _expected_current(field, table), field
        source = "dcgm-4.7-doc" if field in UNIT_CHANGED else "dcgm-4.6.0"
        (canonical,) = [r for r in table[current] if r.source == source]
        assert canonical.status == "canonical", current
        if field in UNIT_CHANGED:
            # a new field in DCGM 4.7, in the base unit its name states (DCGM 4.6.0 had
            # renamed field 203 itself DCGM_FI_DEV_GPU_UTIL_RATIO, still in %)
            assert BASE_UNIT_SUFFIX.search(current), current
            assert 1600 <= canonical.field_id <= 1650, current
            unit_changed += 1
        else:
            # the same DCGM field: the classic name is its deprecated alias, same id
            (old,) = [r for r in table[field] if r.source == "dcgm-4.6.0"]
            assert old.field_id == canonical.field_id, field
        renamed += current != field
    assert (renamed, unit_changed) == (RENAMED_COUNT, UNIT_CHANGED_COUNT)
    # and the one new default of 4.9
    (capacity,) = [f for f in FIELDS if f.classic is None]
    assert capacity.current == "DCGM_FI_DEV_FB_CAPACITY_BYTES"
    assert table["DCGM_FI_DEV_FB_CAPACITY_BYTES"][0].field_id == 1625


def _families(naming: DcgmNaming, scenario: str = "demo") -> dict[str, list[dict[str, str]]]:
    agent, clock = make_agent(scenario, dcgm_compat=True, dcgm_naming=naming)
    try:
        for _ in range(5):  # rates (PCIe, NVLink) need two samples
            clock.advance(1.0)
            agent.tick()
        text = generate_latest(agent.registry).decode()
    finally:
        agent.stop()
    return {
        f.name: [{**s.labels, "value": repr(s.value)} for s in f.samples]
        for f in text_string_to_metric_families(text)
        if f.name.startswith("DCGM_")
    }


def _by_gpu(series: list[dict[str, str]]) -> dict[str, float]:
    return {s["gpu"]: float(s["value"]) for s in series if s["pod"] == ""}


def test_the_4_9_set_is_the_classic_set_renamed_and_in_base_units() -> None:
    classic, current = _families("classic"), _families("4.9")
    for field in FIELDS:
        if field.classic is None or field.current is None:
            continue
        _, factor = UNIT_CHANGED.get(field.classic, (field.current, 1.0))
        want = {g: v * factor for g, v in _by_gpu(classic[field.classic]).items()}
        assert _by_gpu(current[field.current]) == pytest.approx(want, rel=1e-12), field.current
    assert not set(classic) & {f.current for f in FIELDS if f.current != f.classic}
    assert "DCGM_FI_DEV_PCIE_TX_THROUGHPUT" not in current  # deprecated, pre-4.0 only
    # GPU 0 of the demo moves 1500 + 1500 MiB/s over NVLink: bytes/s in 4.9
    assert _by_gpu(current["DCGM_FI_DEV_NVLINK_THROUGHPUT_BYTES_PER_SECOND"])["0"] == pytest.approx(
        3000 * 1048576
    )
    capacity = _by_gpu(current["DCGM_FI_DEV_FB_CAPACITY_BYTES"])
    free = _by_gpu(current["DCGM_FI_DEV_FB_FREE_BYTES"])
    used = _by_gpu(current["DCGM_FI_DEV_FB_USED_BYTES"])
    reserved = _by_gpu(current["DCGM_FI_DEV_FB_RESERVED_BYTES"])
    for gpu, total in capacity.items():
        assert total > 80e9  # an H100 SXM: 80 GB
        assert free[gpu] + used[gpu] + reserved[gpu] == pytest.approx(total, rel=1e-6)
    ratios = _by_gpu(current["DCGM_FI_DEV_GPU_UTIL_RATIO"])
    assert all(0.0 <= r <= 1.0 for r in ratios.values())
    for samples in current.values():
        for labels in samples:
            assert labels["DCGM_FI_SYSTEM_DRIVER_VERSION"]
            assert "DCGM_FI_DRIVER_VERSION" not in labels


def test_the_4_9_set_leaves_out_what_a_gpu_lacks_as_the_classic_one_does() -> None:
    classic, current = _families("classic", "legacy"), _families("4.9", "legacy")
    for field in FIELDS:
        if field.classic is not None and field.current is not None:
            assert sorted(_by_gpu(current.get(field.current, []))) == sorted(
                _by_gpu(classic.get(field.classic, []))
            ), field.current


def _shared(tmp_path: Path, naming: DcgmNaming) -> dict[str, list[dict[str, str]]]:
    """The DCGM families of one H100 time-sliced between three pods (and a host tool)."""
    scenario = tmp_path / f"shared-{naming}.toml"
    scenario.write_text(SHARED, encoding="utf-8")
    nv, clock = simulated(str(scenario))
    config = Config(
        agent=AgentConfig(hostname="test-host"),
        exporter=ExporterConfig(dcgm_compat=True, dcgm_naming=naming),
    )
    with kube_node(config, nv, clock, scenario_extras=False) as (agent, _):
        for _ in range(5):
            listed_tick(agent, clock)
        text = generate_latest(agent.registry).decode()
    return {
        f.name: [{**s.labels, "value": repr(s.value)} for s in f.samples]
        for f in text_string_to_metric_families(text)
        if f.name.startswith("DCGM_")
    }


def test_a_shared_gpu_is_split_per_container_under_either_name(tmp_path: Path) -> None:
    classic, current = _shared(tmp_path, "classic"), _shared(tmp_path, "4.9")
    pairs = (
        ("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "DCGM_FI_PROF_GR_ENGINE_UTIL_RATIO", 1.0),
        ("DCGM_FI_DEV_DEC_UTIL", "DCGM_FI_DEV_DEC_UTIL_RATIO", 0.01),
    )
    for old, new, factor in pairs:
        want = {
            (s["namespace"], s["pod"], s["container"]): float(s["value"]) * factor
            for s in classic[old]
        }
        got = {(s["namespace"], s["pod"], s["container"]): float(s["value"]) for s in current[new]}
        assert len(got) == 4, new  # the GPU's own series and one per container
        assert got == pytest.approx(want), new
    # every other family: one series, no pod
    for name, samples in current.items():
        if name not in {new for _, new, _ in pairs}:
            assert [s["pod"] for s in samples] == [""], name


def test_check_config_warns_that_opencost_needs_the_classic_names(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "gpuwatch.toml"
    path.write_text('[exporter]\ndcgm_compat = true\ndcgm_naming = "4.9"\n', encoding="utf-8")
    assert main(["check-config", "--no-host-checks", str(path)]) == 0
    out, err = capsys.readouterr()
    assert 'dcgm_naming = "4.9"' in out.splitlines()
    (warning,) = err.splitlines()
    assert warning.startswith("gpuwatch: warning: exporter.dcgm_naming: OpenCost")
    assert "DCGM_FI_PROF_GR_ENGINE_ACTIVE" in warning
    path.write_text('[exporter]\ndcgm_naming = "4.9"\n', encoding="utf-8")
    assert main(["check-config", "--no-host-checks", str(path)]) == 0
    assert "has no effect without exporter.dcgm_compat" in capsys.readouterr().err
    path.write_text("[exporter]\ndcgm_compat = true\n", encoding="utf-8")
    assert main(["check-config", "--no-host-checks", str(path)]) == 0
    out, err = capsys.readouterr()
    assert 'dcgm_naming = "classic"' in out.splitlines()
    assert err == ""


def test_the_docs_give_every_4_9_name_and_the_counts() -> None:
    text = COMPATIBILITY.read_text(encoding="utf-8")
    for field in FIELDS:
        if field.current is not None:
            assert f"`{field.current}`" in text, field.current
    assert f"renames {RENAMED_COUNT} " in text
    assert f"{UNIT_CHANGED_COUNT} of them" in text
