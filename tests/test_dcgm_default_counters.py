"""The DCGM-compatible set: dcgm-exporter's default counters where the part answers them,
absent (never 0) where it does not, and the per-container split of a shared GPU."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client.exposition import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from gpuwatch.agent import Agent
from gpuwatch.config import AgentConfig, Config, ExporterConfig
from gpuwatch.core.clock import ManualClock
from tests.conftest import make_agent, simulated
from tests.support.kube_node import kube_node, listed_tick

NEW_FIELDS = (
    "DCGM_FI_DEV_MEMORY_TEMP",
    "DCGM_FI_DEV_ENC_UTIL",
    "DCGM_FI_DEV_DEC_UTIL",
    "DCGM_FI_DEV_PCIE_TX_THROUGHPUT",
    "DCGM_FI_DEV_PCIE_RX_THROUGHPUT",
    "DCGM_FI_DEV_PCIE_REPLAY_COUNTER",
    "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL",
    "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS",
    "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS",
    "DCGM_FI_DEV_ROW_REMAP_FAILURE",
)
Series = dict[str, str]


def _dcgm(agent: Agent) -> dict[str, list[Series]]:
    """DCGM samples by family: each sample's labels plus its value under "value"."""
    text = generate_latest(agent.registry).decode()
    out: dict[str, list[Series]] = {}
    for family in text_string_to_metric_families(text):
        if family.name.startswith("DCGM_"):
            out[family.name] = [{**s.labels, "value": repr(s.value)} for s in family.samples]
    return out


def _by_gpu(series: list[Series]) -> dict[str, float]:
    return {s["gpu"]: float(s["value"]) for s in series if s["pod"] == ""}


def _run(scenario: str, seconds: int) -> dict[str, list[Series]]:
    agent, clock = make_agent(scenario, dcgm_compat=True)
    try:
        for _ in range(seconds):
            clock.advance(1.0)
            agent.tick()
        return _dcgm(agent)
    finally:
        agent.stop()


def test_an_h100_answers_every_default_counter_in_dcgm_units() -> None:
    families = _run("demo", 5)
    for name in NEW_FIELDS:
        assert sorted(_by_gpu(families[name])) == ["0", "1", "2", "3"], name
    # GPU 0 moves 1500 + 1500 MiB/s over NVLink: DCGM's figure is KiB/s / 1000
    assert _by_gpu(families["DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL"])["0"] == pytest.approx(
        3000 * 1024 / 1000
    )
    assert _by_gpu(families["DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL"])["1"] == 0.0
    # PCIe in KB/s (KB = 1024 bytes, NVML's unit): GPU 0 receives ~1800 MiB/s
    assert _by_gpu(families["DCGM_FI_DEV_PCIE_RX_THROUGHPUT"])["0"] == pytest.approx(
        1800 * 1024, rel=0.05
    )
    gpu_temp = _by_gpu(families["DCGM_FI_DEV_GPU_TEMP"])
    memory_temp = _by_gpu(families["DCGM_FI_DEV_MEMORY_TEMP"])
    assert all(memory_temp[g] > gpu_temp[g] for g in gpu_temp)  # HBM runs warmer
    assert set(_by_gpu(families["DCGM_FI_DEV_ROW_REMAP_FAILURE"]).values()) == {0.0}


def test_older_and_smaller_parts_leave_out_what_they_lack() -> None:
    families = _run("legacy", 5)
    # legacy: 0-1 V100 (HBM2, NVLink, no row remapping), 2-3 T4 and 4 A10G (GDDR6, PCIe
    # only, T4 no row remapping), 5 H100
    assert sorted(_by_gpu(families["DCGM_FI_DEV_MEMORY_TEMP"])) == ["0", "1", "5"]
    assert sorted(_by_gpu(families["DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL"])) == ["0", "1", "5"]
    assert sorted(_by_gpu(families["DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS"])) == ["4", "5"]
    for name in ("DCGM_FI_DEV_PCIE_REPLAY_COUNTER", "DCGM_FI_DEV_DEC_UTIL"):
        assert sorted(_by_gpu(families[name])) == ["0", "1", "2", "3", "4", "5"], name


def test_mig_gpus_have_no_whole_gpu_engine_utilization() -> None:
    families = _run("dgx-h100-mig", 3)
    assert "DCGM_FI_DEV_ENC_UTIL" not in families  # NotSupported with MIG on: absent, not 0
    assert "DCGM_FI_DEV_DEC_UTIL" not in families
    assert len(_by_gpu(families["DCGM_FI_DEV_MEMORY_TEMP"])) == 8


SHARED = """
name = "shared"
description = "one H100 time-sliced between three pods, and a host tool on it"

[[gpus]]
preset = "h100-sxm"

[gpus.activity]
levels = { util = 0.8, sm = 0.6 }

[[gpus.processes]]
pid = 101
name = "python3 serve.py"
memory = "20 GiB"
share = 0.6

[[gpus.processes]]
pid = 102
name = "python3 batch.py"
memory = "10 GiB"
share = 0.3

[[gpus.processes]]
pid = 103
name = "dcgmproftester"
memory = "1 GiB"
share = 0.1

[[pods]]
namespace = "ml"
name = "serve-0"
[[pods.containers]]
name = "server"
resource = "nvidia.com/gpu.shared"
devices = [{ gpu = 0, replica = 0 }]
pids = [101]

[[pods]]
namespace = "ml"
name = "batch-0"
[[pods.containers]]
name = "worker"
resource = "nvidia.com/gpu.shared"
devices = [{ gpu = 0, replica = 1 }]
pids = [102]

[[pods]]
namespace = "dev"
name = "idle-0"
[[pods.containers]]
name = "shell"
resource = "nvidia.com/gpu.shared"
devices = [{ gpu = 0, replica = 2 }]
"""


@pytest.fixture
def shared(tmp_path: Path) -> Iterator[tuple[Agent, ManualClock]]:
    scenario = tmp_path / "shared.toml"
    scenario.write_text(SHARED, encoding="utf-8")
    nv, clock = simulated(str(scenario))
    config = Config(
        agent=AgentConfig(hostname="test-host"),
        exporter=ExporterConfig(dcgm_compat=True),
    )
    with kube_node(config, nv, clock, scenario_extras=False) as (agent, _):
        yield agent, clock


def test_a_shared_gpu_is_split_by_its_processes_activity(
    shared: tuple[Agent, ManualClock],
) -> None:
    agent, clock = shared
    for _ in range(5):
        snapshot = listed_tick(agent, clock)
    processes = {p.pid: p for p in snapshot.gpus[0].processes or ()}
    sm = {pid: p.sm_utilization_ratio or 0.0 for pid, p in processes.items()}
    assert processes[103].pod is None  # the host tool is in no pod
    families = _dcgm(agent)
    for name in ("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "DCGM_FI_DEV_DEC_UTIL"):
        series = {(s["namespace"], s["pod"], s["container"]): s for s in families[name]}
        gpu = float(series[("", "", "")]["value"])
        pods = {k: float(s["value"]) for k, s in series.items() if k != ("", "", "")}
        assert set(pods) == {
            ("ml", "serve-0", "server"),
            ("ml", "batch-0", "worker"),
            ("dev", "idle-0", "shell"),
        }
        total = sum(sm.values())
        assert pods[("ml", "serve-0", "server")] == pytest.approx(gpu * sm[101] / total)
        assert pods[("ml", "batch-0", "worker")] == pytest.approx(gpu * sm[102] / total)
        assert pods[("dev", "idle-0", "shell")] == 0.0
        # the pods sum to the GPU's value less the host tool's share
        assert sum(pods.values()) == pytest.approx(gpu * (1 - sm[103] / total))
    engine = {s["pod"]: float(s["value"]) for s in families["DCGM_FI_PROF_GR_ENGINE_ACTIVE"]}
    assert engine[""] == pytest.approx(0.8, rel=0.05)
    assert engine["serve-0"] > engine["batch-0"] > 0  # 0.6 vs 0.3 of the SMs
    # every other family keeps one series for the GPU, without pod labels
    for name, samples in families.items():
        if name not in ("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "DCGM_FI_DEV_DEC_UTIL"):
            assert [s["pod"] for s in samples] == [""], name


MIG_PODS = """
name = "mig-pods"
description = "an H100 split into two MIG instances, each held by a pod; an H100 held whole"

[[gpus]]
preset = "h100-sxm"
[[gpus.mig]]
profile = "3g.40gb"
gpu_instance_id = 1
[gpus.mig.activity]
levels = { util = 0.9, sm = 0.7 }
[[gpus.mig.processes]]
pid = 101
name = "python3 train.py"
memory = "20 GiB"
[[gpus.mig]]
profile = "3g.40gb"
gpu_instance_id = 2
[gpus.mig.activity]
levels = { util = 0.5, sm = 0.3 }
[[gpus.mig.processes]]
pid = 102
name = "python3 serve.py"
memory = "10 GiB"

[[gpus]]
preset = "h100-sxm"
[gpus.activity]
levels = { util = 0.8, sm = 0.6 }
[[gpus.processes]]
pid = 201
name = "python3 whole.py"
memory = "10 GiB"

[[pods]]
namespace = "ml"
name = "train-0"
[[pods.containers]]
name = "trainer"
resource = "nvidia.com/mig-3g.40gb"
devices = [{ gpu = 0, mig = 0 }]
pids = [101]

[[pods]]
namespace = "ml"
name = "serve-0"
[[pods.containers]]
name = "server"
resource = "nvidia.com/mig-3g.40gb"
devices = [{ gpu = 0, mig = 1 }]
pids = [102]

[[pods]]
namespace = "ml"
name = "whole-0"
[[pods.containers]]
name = "worker"
devices = [{ gpu = 1 }]
pids = [201]
"""


def test_pods_on_mig_get_nothing_from_opencosts_two_families(tmp_path: Path) -> None:
    """What docs/kubernetes.md tells OpenCost users: NVML has no whole-GPU utilization,
    encoder or decoder utilization with MIG on, so a MIG GPU has no series in the two
    families OpenCost reads per container (usage, and the GPU-info query that carries
    model and UUID), and its other families carry no pod; a GPU held whole has both."""
    scenario = tmp_path / "mig-pods.toml"
    scenario.write_text(MIG_PODS, encoding="utf-8")
    nv, clock = simulated(str(scenario))
    config = Config(
        agent=AgentConfig(hostname="test-host"), exporter=ExporterConfig(dcgm_compat=True)
    )
    with kube_node(config, nv, clock, scenario_extras=False) as (agent, _):
        for _ in range(5):
            listed_tick(agent, clock)
        text = generate_latest(agent.registry).decode()
        families = _dcgm(agent)
    holders = {
        s.labels["pod"]: s.labels["mig_uuid"]
        for f in text_string_to_metric_families(text)
        if f.name == "gpuwatch_gpu_pod_info"
        for s in f.samples
    }
    assert holders["train-0"].startswith("MIG-")
    assert holders["serve-0"].startswith("MIG-")
    for name in (
        "DCGM_FI_PROF_GR_ENGINE_ACTIVE",
        "DCGM_FI_DEV_DEC_UTIL",
        "DCGM_FI_DEV_ENC_UTIL",
        "DCGM_FI_DEV_GPU_UTIL",
    ):
        assert [(s["gpu"], s["pod"]) for s in families[name]] == [("1", "whole-0")], name
    for name, samples in families.items():
        assert {s["pod"] for s in samples if s["gpu"] == "0"} <= {""}, name
    assert [s["pod"] for s in families["DCGM_FI_DEV_FB_USED"] if s["gpu"] == "0"] == [""]


CLASSIC_CSV = Path(__file__).parent / "data" / "dcgm_exporter" / "default-counters-classic.csv"
NOT_EXPORTED = {"DCGM_FI_DEV_VGPU_LICENSE_STATUS": "a vGPU guest's licence, not a GPU's"}
"""Active rows of the file gpuwatch leaves out, and why (README, "DCGM")."""
EXTRA = {
    "DCGM_FI_DEV_PCIE_TX_THROUGHPUT": "the default of releases before 4.0",
    "DCGM_FI_DEV_PCIE_RX_THROUGHPUT": "the default of releases before 4.0",
    "DCGM_FI_PROF_SM_ACTIVE": "a commented row, read by dcgm-exporter's dashboard",
    "DCGM_FI_PROF_SM_OCCUPANCY": "a commented row, read by dcgm-exporter's dashboard",
}
"""Families gpuwatch exports beyond the file's active rows, and why."""


def _csv_rows(path: Path) -> list[tuple[str, str, str]]:
    """(field, Prometheus type, help) of each active row of a default-counters.csv."""
    rows = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        field, kind, help_text = (part.strip() for part in line.split(",", 2))
        rows.append((field, kind, help_text))
    return rows


def test_every_active_row_of_the_classic_file_is_exported_or_explained() -> None:
    rows = _csv_rows(CLASSIC_CSV)
    metrics = {field: kind for field, kind, _ in rows if kind != "label"}
    labels = [field for field, kind, _ in rows if kind == "label"]
    assert labels == ["DCGM_FI_DRIVER_VERSION"]
    assert {"DCGM_FI_PROF_PCIE_TX_BYTES", "DCGM_FI_PROF_PCIE_RX_BYTES"} <= set(metrics)
    agent, clock = make_agent("demo", dcgm_compat=True)
    try:
        for _ in range(5):  # rates (PCIe, NVLink) need two samples
            clock.advance(1.0)
            snapshot = agent.tick()
        text = generate_latest(agent.registry).decode()
    finally:
        agent.stop()
    families = {
        f.name: f for f in text_string_to_metric_families(text) if f.name.startswith("DCGM")
    }
    for field, kind in metrics.items():
        if field in NOT_EXPORTED:
            assert field not in families
            continue
        assert field in families, field
        assert kind in ("gauge", "counter"), field
        # a dcgm counter is exposed as a gauge: prometheus-client would add `_total`
        assert families[field].type == "gauge", field
        assert len(families[field].samples) == 4, field  # one series per H100
    assert set(families) - set(metrics) == set(EXTRA)
    driver = snapshot.driver.driver_version
    assert driver
    for family in families.values():
        assert {s.labels["DCGM_FI_DRIVER_VERSION"] for s in family.samples} == {driver}


def test_pcie_bytes_are_nvmls_throughput_in_bytes_per_second() -> None:
    families = _run("demo", 5)
    for direction in ("TX", "RX"):
        nvml_kb = _by_gpu(families[f"DCGM_FI_DEV_PCIE_{direction}_THROUGHPUT"])
        prof_bytes = _by_gpu(families[f"DCGM_FI_PROF_PCIE_{direction}_BYTES"])
        assert prof_bytes == pytest.approx({g: v * 1024 for g, v in nvml_kb.items()})
    # GPU 0 receives ~1800 MiB/s
    assert _by_gpu(families["DCGM_FI_PROF_PCIE_RX_BYTES"])["0"] == pytest.approx(
        1800 * 1024 * 1024, rel=0.05
    )
