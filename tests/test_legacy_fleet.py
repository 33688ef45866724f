"""The pre-Hopper fallback paths on the `legacy` fleet: kernel-busy activity, what the
exporter shows for it, and the analysis states that rest on it."""

from __future__ import annotations

import pytest
from prometheus_client.exposition import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from gpuwatch.analysis.activity import (
    GPM_SM_ACTIVE,
    KERNEL_BUSY,
    MIG_GPM_SM_ACTIVE,
    activity_signal,
)
from gpuwatch.core.snapshot import FleetSnapshot, GpuIdentity, GpuSample, MigInstanceSample
from tests.analysis.test_scenarios import run_until, verdict
from tests.conftest import make_agent

KERNEL_BUSY_GPUS = (0, 1, 2, 3, 4)


@pytest.fixture(scope="module")
def legacy_after_window() -> tuple[FleetSnapshot, str]:
    """The legacy fleet past the 30 min analysis window, and its /metrics text."""
    agent, clock = make_agent("legacy", per_process_metrics=True)
    try:
        snapshot = run_until(agent, clock, 1900, step=2.0)
        text = generate_latest(agent.registry).decode("utf-8")
    finally:
        agent.stop()
    return snapshot, text


def series(text: str, name: str) -> list[dict[str, str]]:
    found = []
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name:
                found.append({**sample.labels, "value": str(sample.value)})
    return found


def test_every_gpu_names_its_activity_source(
    legacy_after_window: tuple[FleetSnapshot, str],
) -> None:
    _, text = legacy_after_window
    sources = {s["gpu"]: s["source"] for s in series(text, "gpuwatch_gpu_activity_source_info")}
    assert sources == {
        **{str(i): KERNEL_BUSY for i in KERNEL_BUSY_GPUS},
        "5": GPM_SM_ACTIVE,
    }
    sm_active = {s["gpu"] for s in series(text, "gpuwatch_gpu_sm_active_ratio")}
    assert sm_active == {"5"}  # no GPM below Hopper: absent, never 0
    kernel_busy = {s["gpu"] for s in series(text, "gpuwatch_gpu_utilization_ratio")}
    assert kernel_busy == {"0", "1", "2", "3", "4", "5"}


def test_what_older_parts_and_the_r535_driver_answer(
    legacy_after_window: tuple[FleetSnapshot, str],
) -> None:
    snapshot, text = legacy_after_window
    gpus = {g.identity.index: g for g in snapshot.gpus}
    assert gpus[0].identity.name == "Tesla V100-SXM2-16GB"
    assert gpus[2].identity.name == "Tesla T4"
    assert gpus[4].identity.name == "NVIDIA A10G"
    # temperature from nvmlDeviceGetTemperature: the R535 driver lacks ...TemperatureV
    assert all(g.temperature_celsius is not None for g in snapshot.gpus)
    # Volta and Turing retire pages: no remapped rows; Ampere (A10G) and Hopper have them
    assert {i for i, g in gpus.items() if g.remapped_rows_pending is not None} == {4, 5}
    assert all(g.ecc_uncorrected_errors_total == 0 for g in snapshot.gpus)
    # NVLink on the V100s and the H100, none on the PCIe cards
    assert {i for i, g in gpus.items() if g.nvlink_tx_bytes_total is not None} == {0, 1, 5}
    # energy everywhere (Volta and newer), in the batched field-values call
    assert all(g.energy_joules_total for g in snapshot.gpus)
    # PCIe from the slow job where GPM is missing
    assert gpus[0].pcie_rx_bytes_per_second is not None
    assert gpus[0].pcie_rx_bytes_per_second > 0
    assert 'driver="535.183.01"' in text


def test_analysis_states_rest_on_kernel_busy_time(
    legacy_after_window: tuple[FleetSnapshot, str],
) -> None:
    snapshot, _ = legacy_after_window
    states = {i: verdict(snapshot, i).state for i in range(6)}
    assert states == {
        0: "busy",
        1: "busy",  # a polling kernel: kernel-busy ~100 % with SMs idle; NVML cannot tell
        2: "underutilized",
        3: "idle",
        4: "held",
        5: "busy",
    }
    spinning = verdict(snapshot, 1).activity_mean_ratio
    assert spinning is not None
    assert spinning > 0.9


def _sample(**values: object) -> GpuSample:
    identity = GpuIdentity(
        index=0,
        uuid="GPU-0",
        name="x",
        serial=None,
        pci_bus_id="",
        memory_total_bytes=None,
        power_limit_watts=None,
        gpm_supported=False,
    )
    return GpuSample(identity=identity, up=True, **values)  # type: ignore[arg-type]


def test_activity_signal_prefers_gpm_then_kernel_busy_then_mig_instances() -> None:
    mig = (
        MigInstanceSample("MIG-a", 1, 0, None, None, sm_active_ratio=0.2),
        MigInstanceSample("MIG-b", 2, 0, None, None, sm_active_ratio=0.7),
        MigInstanceSample("MIG-c", 3, 0, None, None),
    )
    assert activity_signal(_sample(sm_active_ratio=0.4, utilization_ratio=1.0)) == (
        0.4,
        GPM_SM_ACTIVE,
    )
    assert activity_signal(_sample(utilization_ratio=1.0, mig_instances=mig)) == (1.0, KERNEL_BUSY)
    assert activity_signal(_sample(mig_instances=mig)) == (0.7, MIG_GPM_SM_ACTIVE)
    assert activity_signal(_sample(mig_instances=mig[2:])) is None
    assert activity_signal(_sample()) is None
