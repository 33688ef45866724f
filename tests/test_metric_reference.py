"""The README's metric reference stays in step with what the exporter really exports."""

from __future__ import annotations

import functools
import re
import time
from collections.abc import Iterable
from pathlib import Path

from prometheus_client.metrics_core import Metric

from gpuwatch.agent import Agent
from gpuwatch.alerts import SlackConfig
from gpuwatch.alerts.dispatcher import AlertDispatcher
from gpuwatch.analysis.measured import MeasuredNeeds
from gpuwatch.billing import BillingCollector, BillingConfig
from gpuwatch.core.clock import ManualClock
from gpuwatch.core.costs import CostSummary, GpuUnattributedCost, GroupCost, PodCost
from gpuwatch.core.jobs import GpuJobs, JobAllocationSample, JobAttribution, JobRef
from gpuwatch.core.snapshot import (
    Attribution,
    DriverInfo,
    FleetSnapshot,
    GpuAttribution,
    PodAllocationSample,
    PodRef,
)
from gpuwatch.core.verdict import GpuVerdict
from gpuwatch.export.attribution_families import (
    attribution_families,
    attribution_health_families,
)
from gpuwatch.export.collector import SnapshotCollector
from gpuwatch.export.cost_families import pod_cost_families
from gpuwatch.export.dcgm import dcgm_families
from gpuwatch.export.families import ExportOptions
from gpuwatch.export.slurm_families import slurm_families
from gpuwatch.history.writer import HistoryWriter
from gpuwatch.sizing import build_model_catalog
from gpuwatch.slurm.config import SlurmConfig
from gpuwatch.slurm.reclaim import Reclaimer
from gpuwatch.store import SnapshotStore
from gpuwatch.tokens import TokenCollector, TokenSourceConfig
from tests.conftest import REPO_ROOT, make_agent


def exported_names(snapshot: FleetSnapshot) -> set[str]:
    """Every gpuwatch_* family the agent's collector yields for this snapshot."""
    store = SnapshotStore()
    store.publish(snapshot)
    collector = SnapshotCollector(store, ExportOptions(per_process_metrics=True))
    names = set()
    for family in collector.collect():
        suffix = {"counter": "_total", "info": "_info"}.get(family.type, "")
        names.add(family.name + suffix)
    return names


def family_names(families: Iterable[Metric]) -> set[str]:
    suffixes = {"counter": "_total", "info": "_info"}
    return {family.name + suffixes.get(family.type, "") for family in families}


def source_metric_names(tmp_path: Path) -> set[str]:
    """Families of a configured but not yet scraped token source and billing tiers."""
    tokens = TokenCollector(
        [TokenSourceConfig(name="x", url="http://127.0.0.1:9/metrics", gpus=[0])], ManualClock()
    )
    billing = BillingCollector(
        BillingConfig(pricing_api=True, instance_type="p5.48xlarge", region="us-east-1"),
        state_dir=tmp_path,
        clock=ManualClock(),
        hostname="h",
        gpu_count=8,
        gpu_name="NVIDIA H100 80GB HBM3",
        catalog_price_usd_per_gpu_hour=6.88,
    )
    needs = MeasuredNeeds(tokens.sources, build_model_catalog())
    return (
        family_names(tokens.families())
        | family_names(billing.families())
        | family_names(needs.families())
    )


def attribution_metric_names() -> set[str]:
    """Families of Kubernetes attribution (tests/kube/ runs them on the demo's node)."""
    pod = PodRef("ns", "pod", "c")
    gpu = GpuAttribution(
        0,
        "GPU-x",
        (
            PodAllocationSample(0, "GPU-x", None, pod, "nvidia.com/gpu", ("GPU-x",), ()),
            PodAllocationSample(
                0, "GPU-x", None, pod, "nvidia.com/gpu", ("GPU-x",), (), "pid_unmapped"
            ),
        ),
        (1,),
        ((pod, 2),),
        (3,),
    )
    snapshot = FleetSnapshot(
        0.0,
        DriverInfo(None, None, None),
        (),
        attribution=Attribution(
            1.0,
            1,
            (gpu,),
            dra_unresolved=(("gpu.nvidia.com", "node", "gpu-9", "no_such_gpu"),),
            dra_ignored=(("dra.net", 1),),
        ),
        cost=CostSummary(
            pods=(PodCost("ns", "pod", 1.0, 0.5),),
            unattributed=(GpuUnattributedCost(0, "GPU-x", 0.25),),
        ),
    )
    return (
        family_names(attribution_families(snapshot))
        | family_names(pod_cost_families(snapshot))
        | family_names(attribution_health_families("permission_denied"))
    )


def slurm_metric_names() -> set[str]:
    """Families of Slurm attribution (tests/slurm/ runs them against a real Slurm)."""
    job = JobRef("7", "ann", "physics", "debug")
    gpu = GpuJobs(0, "GPU-x", (JobAllocationSample(0, "GPU-x", job, 0, (), ()),))
    snapshot = FleetSnapshot(
        0.0,
        DriverInfo(None, None, None),
        (),
        verdicts=(GpuVerdict(0, "GPU-x", "idle", 0.0, 0.0, 0.0, 0.0),),
        jobs=JobAttribution(1.0, 1, (gpu,)),
        cost=CostSummary(
            slurm_accounts=(GroupCost("physics", 1.0, 0.5, 0.25),),
            slurm_users=(GroupCost("ann", 1.0, 0.5, 0.25),),
        ),
    )
    return family_names(slurm_families(snapshot)) | reclaim_metric_names()


def reclaim_metric_names() -> set[str]:
    """Families of Slurm reclaim: the Slurm collector publishes them from its `Reclaimer`
    (live counters), not from the tick's snapshot."""
    reclaimer = Reclaimer(SlurmConfig(reclaim_mode="dry-run"), Path("/nonexistent"), {})
    return family_names(reclaimer.families())


def alert_metric_names(tmp_path: Path) -> set[str]:
    dispatcher = AlertDispatcher(
        SlackConfig(), "http://127.0.0.1:9/never-called", tmp_path, ManualClock(), "host"
    )
    try:
        return {
            family.name + ("_total" if family.type == "counter" else "")
            for family in dispatcher.families()
        }
    finally:
        dispatcher.stop()


SCENARIOS = ("demo", "faults", str(REPO_ROOT / "tests" / "scenarios" / "h100-mig.toml"))


XIDS_DUE_TICK = 130
"""By the faults scenario's t = 130 s both its XIDs (t = 60 and 120 s) are due."""
XID_WAIT_SECONDS = 60.0


def _wait_for_xids(agent: Agent) -> list[FleetSnapshot]:
    """Tick on the spot until a snapshot carries an XID (at most XID_WAIT_SECONDS real).

    XIDs reach the sample through the event thread, which waits in real time. The faults
    scenario's driver error window (t = 300 to 330 s, then a re-initialisation) ends that
    thread's event set, and a new set only gets XIDs raised after it registered, as with
    real NVML: so the XIDs must be read before the manual clock runs past t = 300 s, or a
    loaded machine loses them (seen with a 1,900-tick run and a 10 s wait at the end)."""
    taken = []
    deadline = time.monotonic() + XID_WAIT_SECONDS
    while time.monotonic() < deadline:
        taken.append(agent.tick())
        if any(g.xid_errors_total for g in taken[-1].gpus):
            break
        time.sleep(0.05)
    return taken


@functools.cache
def snapshots(scenarios: tuple[str, ...] = SCENARIOS) -> list[FleetSnapshot]:
    """Fleets run past the analysis window, so every kind of series has appeared."""
    taken = []
    for scenario in scenarios:
        agent, clock = make_agent(scenario)
        try:
            for tick in range(1900):
                clock.advance(1.0)
                taken.append(agent.tick())
                if scenario == "faults" and tick == XIDS_DUE_TICK:
                    taken += _wait_for_xids(agent)
        finally:
            agent.stop()
    return taken


def readme_section(marker: str) -> str:
    text = (REPO_ROOT / "README.md").read_text()
    start = text.index(f"<!-- {marker}:start -->")
    end = text.index(f"<!-- {marker}:end -->")
    return text[start:end]


def test_readme_lists_exactly_the_exported_gpuwatch_metrics(tmp_path: Path) -> None:
    documented = set(
        re.findall(r"^\| `(gpuwatch_[a-z_]+)`", readme_section("metric-reference"), re.M)
    )
    exported: set[str] = alert_metric_names(tmp_path) | source_metric_names(tmp_path)
    exported |= attribution_metric_names()
    exported |= slurm_metric_names()
    exported |= family_names(HistoryWriter.down_families())  # same names as an open store
    for snapshot in snapshots():
        exported |= exported_names(snapshot)
    only_after_data = {  # each is exported once its source has delivered something
        "gpuwatch_alert_last_success_timestamp_seconds",
        "gpuwatch_cost_per_million_tokens_usd",  # tested in tests/cost/test_demo_cost.py
        "gpuwatch_token_source_cost_usd_total",  # tests/cost/test_demo_tokens.py
        "gpuwatch_token_source_charged_tokens_total",  # tests/report_agreement
        "gpuwatch_token_source_charged_cost_usd_total",  # tests/report_agreement
        "gpuwatch_prompt_tokens_by_origin_total",  # tests/tokens/test_collector.py
        "gpuwatch_token_source_scrape_duration_seconds",
        "gpuwatch_token_source_kv_cache_used_tokens",  # tests/tokens/test_kv_cache.py
        "gpuwatch_token_source_kv_cache_capacity_tokens",  # tests/tokens/test_kv_cache.py
        # with a [[workloads]] declaration only (the demo measures GPU 3's need instead):
        "gpuwatch_gpu_theoretical_tokens_per_second",  # tests/analysis/test_scenarios.py
    }
    assert documented - exported == only_after_data, "documented but never exported"
    assert exported - documented == set(), "exported but not in the README"


def test_readme_lists_exactly_the_dcgm_families() -> None:
    documented = set(re.findall(r"`(DCGM_FI_[A-Z_]+)`", readme_section("dcgm-reference")))
    exported = {family.name for family in dcgm_families(snapshots(("demo",))[-1], "host")}
    assert documented == exported


def test_simulation_doc_carries_the_current_scenario_format() -> None:
    import gpuwatch.simulate.scenario as scenario_module

    doc = (REPO_ROOT / "docs" / "simulation.md").read_text()
    assert scenario_module.__doc__ is not None
    assert scenario_module.__doc__.strip() in doc, "regenerate docs/simulation.md"
