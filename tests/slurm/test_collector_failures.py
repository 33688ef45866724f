"""The Slurm collector when squeue cannot answer, and label values that are data."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from prometheus_client.exposition import generate_latest
from prometheus_client.metrics_core import Metric
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import Collector, CollectorRegistry

from gpuwatch.collectors.slurm import STALE_LISTINGS, SlurmCollector
from gpuwatch.core.clock import ManualClock
from gpuwatch.core.jobs import GpuJobs, JobAllocationSample, JobAttribution, JobRef
from gpuwatch.core.snapshot import DriverInfo, FleetSnapshot
from gpuwatch.export.slurm_families import slurm_families
from gpuwatch.slurm.config import SlurmConfig
from tests.slurm_cluster import SlurmCluster


def test_a_missing_squeue_fails_the_collector_and_the_listing_goes_stale(
    slurm: SlurmCluster,
) -> None:
    clock = ManualClock()
    good = SlurmCollector(
        SlurmConfig(enabled=True), clock, environ=slurm.env, list_interval_seconds=5.0
    )
    good.refresh()
    assert good.result.success
    listing = good.current_listing()
    assert listing is not None
    assert listing.minors == (0, 1, 2, 3)  # gres.conf beside SLURM_CONF's slurm.conf
    broken = SlurmCollector(
        SlurmConfig(enabled=True, squeue_command="/nonexistent/squeue"),
        clock,
        environ=slurm.env,
        list_interval_seconds=5.0,
    )
    broken.refresh()
    assert not broken.result.success
    attribution, result = broken.attribute(())
    assert attribution.listed_at_seconds is None
    assert not result.success
    attribution, _ = good.attribute(())
    assert not attribution.stale
    clock.advance(STALE_LISTINGS * 5.0 + 1)
    attribution, _ = good.attribute(())
    assert attribution.stale


def test_a_wrong_slurm_conf_is_a_failed_squeue(slurm: SlurmCluster, tmp_path: Path) -> None:
    collector = SlurmCollector(
        SlurmConfig(enabled=True, slurm_conf=str(tmp_path / "none.conf")),
        ManualClock(),
        environ=slurm.env,
    )
    assert collector.slurm_conf == tmp_path / "none.conf"  # the config wins over SLURM_CONF
    collector.refresh()
    assert not collector.result.success


class _Families(Collector):
    def __init__(self, snapshot: FleetSnapshot) -> None:
        self._snapshot = snapshot

    def collect(self) -> Iterator[Metric]:
        return slurm_families(self._snapshot)


def test_names_are_data_in_every_label() -> None:
    odd = 'a"b\\c\nd{e}=f'
    job = JobRef("12", odd, odd + "acct", "gpu,part")
    gpu = GpuJobs(0, "GPU-x", (JobAllocationSample(0, "GPU-x", job, 0, ("0", "batch"), (7,)),))
    snapshot = FleetSnapshot(
        0.0, DriverInfo(None, None, None), (), jobs=JobAttribution(1.0, 1, (gpu,))
    )
    registry = CollectorRegistry()
    registry.register(_Families(snapshot))
    text = generate_latest(registry).decode()
    (labels,) = [
        s.labels
        for f in text_string_to_metric_families(text)
        for s in f.samples
        if s.name == "gpuwatch_gpu_job_info"
    ]
    assert labels["user"] == odd
    assert labels["account"] == odd + "acct"
    assert labels["step"] == "0,batch"
