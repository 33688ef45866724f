"""gpuwatch.export.status_json: the document the agent serves and `status --json` prints."""

from __future__ import annotations

import json
from typing import Any

import pytest

from gpuwatch.core.snapshot import (
    DriverInfo,
    FleetSnapshot,
    GpuIdentity,
    GpuSample,
    ProcessSample,
)
from gpuwatch.export.status_json import FORMAT, encode, status_document
from tests.status.conftest import replayed_document

IDENTITY = GpuIdentity(
    index=0,
    uuid="GPU-0",
    name="NVIDIA H100 80GB HBM3",
    serial=None,
    pci_bus_id="00000000:01:00.0",
    memory_total_bytes=80 * 1024**3,
    power_limit_watts=700.0,
    gpm_supported=True,
)


def snapshot(**gpu: Any) -> FleetSnapshot:
    return FleetSnapshot(
        timestamp_seconds=1_767_225_600.0,
        driver=DriverInfo("570.133.20", "12.8", None),
        gpus=(GpuSample(identity=IDENTITY, up=True, **gpu),),
        hostname="host\x1b[2J",
    )


def strict_loads(data: bytes) -> Any:
    def no_constants(name: str) -> None:
        raise AssertionError(f"{name} is not JSON")

    return json.loads(data, parse_constant=no_constants)


def test_demo_document_carries_gpus_verdicts_and_costs() -> None:
    document = replayed_document("demo", 2000)
    assert document["format"] == FORMAT
    assert document["source"] == "simulation"
    assert document["hostname"] == "test-host"
    assert [g["index"] for g in document["gpus"]] == [0, 1, 2, 3]
    assert set(document["utilization_busy_ratio"]) == {"1h", "24h", "30d"}
    for gpu in document["gpus"]:
        assert gpu["name"] == "NVIDIA H100 80GB HBM3"
        assert gpu["uuid"].startswith("GPU-")
        assert isinstance(gpu["verdict"]["state"], str)
        assert gpu["verdict"]["state_since_seconds"] <= document["timestamp_seconds"]
        assert "uuid" not in gpu["verdict"]
        assert gpu["cost"]["price"] == {
            "usd_per_hour": pytest.approx(6.88, abs=0.01),
            "source": "static",
        }
        assert gpu["cost"]["idle_cost_usd_total"] <= gpu["cost"]["cost_usd_total"]
    idle, held, serve = document["gpus"][1], document["gpus"][2], document["gpus"][3]
    assert idle["verdict"]["state"] == "idle"
    assert idle["cost"]["idle_cost_usd_total"] > 0
    assert held["processes"][0]["name"].startswith("/opt/conda/bin/python -m ipykernel")
    assert held["processes"][0]["sm_utilization_ratio"] is None  # no sample: unknown, not 0
    assert serve["verdict"]["recommendation"]["gpu_id"]
    assert serve["verdict"]["need_basis"] == "measured", "from its vLLM server's KV cache"
    assert serve["verdict"]["required_memory_bytes"]["measured"] > 0
    assert serve["verdict"]["need_sample_bytes"] > 0
    assert [g["verdict"]["need_basis"] for g in document["gpus"][:3]] == ["observed"] * 3


def test_process_names_and_analysis_can_be_left_out() -> None:
    snap = snapshot(
        processes=(
            ProcessSample(pid=7, name="python3 secret.py", kind="compute", memory_used_bytes=1),
        )
    )
    document = status_document(snap, source="local", process_names=False, analysis=False)
    (gpu,) = document["gpus"]
    assert gpu["processes"] == [
        {
            "pid": 7,
            "name": None,
            "kind": "compute",
            "memory_used_bytes": 1,
            "sm_utilization_ratio": None,
            "gpu_instance_id": None,
            "compute_instance_id": None,
        }
    ]
    assert gpu["verdict"] is None
    assert gpu["cost"] is None
    assert "secret" not in encode(document).decode()


def test_names_are_escaped_and_nan_is_null() -> None:
    snap = snapshot(
        power_watts=float("nan"),
        temperature_celsius=float("inf"),
        processes=(
            ProcessSample(
                pid=1, name="\x1b]0;x\x07 \u202e ✓", kind="compute", memory_used_bytes=None
            ),
        ),
    )
    data = encode(status_document(snap, source="agent"))
    assert data.isascii()
    assert b"\x1b" not in data
    assert b"\\u001b]0;x\\u0007 \\u202e \\u2713" in data
    document = strict_loads(data)
    (gpu,) = document["gpus"]
    assert gpu["power_watts"] is None
    assert gpu["temperature_celsius"] is None
    assert gpu["processes"][0]["name"] == "\x1b]0;x\x07 \u202e ✓"
    assert document["hostname"] == "host\x1b[2J"


def test_unknown_source_is_refused() -> None:
    with pytest.raises(ValueError, match="source"):
        status_document(snapshot(), source="guess")
