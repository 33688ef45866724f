"""MIG on /metrics: processes carry their instance, instances export their GPM figures."""

from __future__ import annotations

from prometheus_client.exposition import generate_latest

from tests.conftest import REPO_ROOT, make_agent
from tests.test_legacy_fleet import series

H100_MIG = str(REPO_ROOT / "tests" / "scenarios" / "h100-mig.toml")


def metrics_after(scenario: str, seconds: int) -> str:
    agent, clock = make_agent(scenario, per_process_metrics=True)
    try:
        for _ in range(seconds):
            clock.advance(1.0)
            agent.tick()
        return generate_latest(agent.registry).decode("utf-8")
    finally:
        agent.stop()


def test_processes_on_mig_instances_carry_their_gpu_and_compute_instance() -> None:
    text = metrics_after(H100_MIG, 5)
    (proc,) = [s for s in series(text, "gpuwatch_process_memory_used_bytes") if s["pid"] == "5001"]
    assert proc["gpu_instance_id"] == "1"
    assert proc["compute_instance_id"] == "0"
    plain = metrics_after("demo", 2)
    assert {s["gpu_instance_id"] for s in series(plain, "gpuwatch_process_memory_used_bytes")} == {
        ""
    }


def test_mig_instances_export_occupancy_tensor_and_dram_from_gpm() -> None:
    text = metrics_after(H100_MIG, 5)

    def by_instance(name: str) -> dict[str, float]:
        return {s["gpu_instance_id"]: float(s["value"]) for s in series(text, name)}

    # instance 1 runs at sm 0.6, occupancy 0.4, tensor 0.3, dram 0.4 (+-2 % jitter)
    for name, level in (
        ("gpuwatch_mig_sm_active_ratio", 0.6),
        ("gpuwatch_mig_sm_occupancy_ratio", 0.4),
        ("gpuwatch_mig_tensor_active_ratio", 0.3),
        ("gpuwatch_mig_dram_bandwidth_ratio", 0.4),
    ):
        values = by_instance(name)
        assert abs(values["1"] - level) <= 0.03 * level, name
        assert values["2"] < values["1"], name
