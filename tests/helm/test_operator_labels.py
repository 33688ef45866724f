"""The chart's ServiceMonitor and PodMonitor, as the Prometheus operator runs them, against
the real Prometheus scraping the demo agent.

The operator turns a monitor endpoint into a scrape job whose targets carry the agent's own
pod as target labels (`namespace`, `pod`, `container`, `endpoint`, for a ServiceMonitor
also `service`; `job`; `instance` = the pod's IP:port) and the pod's
`__meta_kubernetes_pod_node_name`, then applies the endpoint's `relabelings` and scrapes
with `honor_labels` from `honorLabels`. Here each monitor becomes such a job: one static
target (the demo agent on loopback) labelled as the operator would label an agent pod on
node `gpu-node-7`, and the monitor's relabelings as `relabel_configs`, keys converted from
camelCase and nothing else changed. A control job with the same target labels and no
relabelings shows what the relabelings remove.
"""

from __future__ import annotations

import json
import re
import subprocess
import time
import urllib.error
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from gpuwatch.promapi.client import PrometheusOptions
from gpuwatch.report.model import Period
from gpuwatch.report.prometheus import load
from tests.agent_process import fetch, start_agent
from tests.conftest import REPO_ROOT, free_port
from tests.helm.chart import Rendered
from tests.prometheus_process import running_prometheus

NODE = "gpu-node-7"
AGENT_POD = "gw-gpuwatch-x7k2p"
POD_IP = "10.4.2.17"
NODE_ONLY_IP = "10.4.9.9"
DEADLINE_SECONDS = 45.0
# The families compared label for label with the agent's own exposition: a GPU series
# without pod labels, and two pod series (one without `container`, one with it).
COMPARED = ("gpuwatch_gpu_up", "gpuwatch_pod_cost_usd_total", "gpuwatch_gpu_pod_info")
POD_FAMILIES = ("gpuwatch_pod_", "gpuwatch_gpu_pod_")
ADDED = {"job", "instance", "node"}
AGENT_IDENTITY = ("namespace", "pod", "container", "service", "endpoint")

Labels = frozenset[tuple[str, str]]


def _snake(key: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", key).lower()


def relabel_configs(relabelings: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A monitor's `relabelings` as Prometheus `relabel_configs`: keys in snake case,
    `action` lower-cased (the operator accepts either case), values as given."""
    configs = []
    for rule in relabelings:
        config = {_snake(key): value for key, value in rule.items()}
        if "action" in config:
            config["action"] = str(config["action"]).lower()
        configs.append(config)
    return configs


@dataclass(frozen=True)
class Job:
    """One emulated operator scrape job."""

    name: str
    job_label: str
    target_labels: dict[str, str]
    honor_labels: bool
    relabelings: list[dict[str, Any]]
    pod_ip: str = POD_IP

    def scrape_config(self, port: int) -> dict[str, Any]:
        labels = {
            **self.target_labels,
            "job": self.job_label,
            "instance": f"{self.pod_ip}:{port}",
            "__meta_kubernetes_pod_node_name": NODE,
        }
        config: dict[str, Any] = {
            "job_name": self.name,
            "honor_labels": self.honor_labels,
            "scrape_interval": "1s",
            "static_configs": [{"targets": [f"127.0.0.1:{port}"], "labels": labels}],
        }
        if self.relabelings:
            config["relabel_configs"] = relabel_configs(self.relabelings)
        return config


def _agent_container(rendered: Rendered) -> str:
    containers = rendered.one("DaemonSet")["spec"]["template"]["spec"]["containers"]
    (name,) = [c["name"] for c in containers if c.get("ports")]
    return str(name)


def operator_jobs(rendered: dict[str, Rendered]) -> list[Job]:
    """The ServiceMonitor (full-values) and PodMonitor (files-values) as the operator's
    jobs, an older operator's reading of the ServiceMonitor (it drops an empty
    `replacement`, so Prometheus's default `$1` applies), the control, and a scrape
    that only adds `node`."""
    sm = rendered["full-values"].one("ServiceMonitor")
    (sm_endpoint,) = sm["spec"]["endpoints"]
    pm = rendered["files-values"].one("PodMonitor")
    (pm_endpoint,) = pm["spec"]["podMetricsEndpoints"]
    namespace = sm["metadata"]["namespace"]
    service = sm["metadata"]["name"]
    sm_labels = {
        "namespace": namespace,
        "service": service,
        "pod": AGENT_POD,
        "container": _agent_container(rendered["full-values"]),
        "endpoint": sm_endpoint["port"],
    }
    pm_labels = {
        "namespace": pm["metadata"]["namespace"],
        "pod": AGENT_POD,
        "container": _agent_container(rendered["files-values"]),
        "endpoint": pm_endpoint["port"],
    }
    omitted = [
        {k: v for k, v in rule.items() if not (k == "replacement" and v == "")}
        for rule in sm_endpoint["relabelings"]
    ]
    node_only = [rule for rule in omitted if rule["targetLabel"] == "node"]
    return [
        Job(
            "servicemonitor",
            service,
            sm_labels,
            sm_endpoint["honorLabels"],
            sm_endpoint["relabelings"],
        ),
        Job(
            "podmonitor",
            f"{pm['metadata']['namespace']}/{pm['metadata']['name']}",
            pm_labels,
            pm_endpoint["honorLabels"],
            pm_endpoint["relabelings"],
        ),
        Job("servicemonitor-omitempty", f"omitempty/{service}", sm_labels, True, omitted),
        Job("control", f"control/{service}", sm_labels, True, []),
        # A hand-written scrape that adds `node` and keeps instance = IP:port.
        Job("node-only", f"node-only/{service}", sm_labels, True, node_only, NODE_ONLY_IP),
    ]


@dataclass(frozen=True)
class Scraped:
    """What Prometheus holds per job, and the agent's own exposition."""

    jobs: dict[str, Job]
    series: dict[str, list[dict[str, str]]]  # by job name
    exposition: dict[str, set[Labels]]  # by family, the agent's own label sets
    port: int
    url: str  # the Prometheus


def _series(url: str, job_label: str) -> list[dict[str, str]]:
    query = urllib.parse.urlencode({"match[]": f'{{job="{job_label}"}}'})
    reply = json.loads(fetch(f"{url}/api/v1/series?{query}"))
    assert reply["status"] == "success"
    return list(reply["data"])


def _exposition(text: str) -> dict[str, set[Labels]]:
    """The agent's label sets of the COMPARED families; empty values left out (Prometheus
    drops a label whose value is empty)."""
    families: dict[str, set[Labels]] = {name: set() for name in COMPARED}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name in families:
                families[sample.name].add(frozenset((k, v) for k, v in sample.labels.items() if v))
    return families


@pytest.fixture(scope="module")
def scraped(
    rendered: dict[str, Rendered], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Scraped]:
    workdir: Path = tmp_path_factory.mktemp("operator")
    jobs = {job.name: job for job in operator_jobs(rendered)}
    port = free_port()
    agent = start_agent(["--simulate", "demo", "--speed", "10"], port)
    try:
        config = {
            "global": {"scrape_interval": "1s"},
            "scrape_configs": [job.scrape_config(port) for job in jobs.values()],
        }
        with running_prometheus(workdir, yaml.safe_dump(config, sort_keys=False)) as url:
            deadline = time.monotonic() + DEADLINE_SECONDS
            seen: list[set[str]] = []
            while True:
                try:
                    series = {name: _series(url, job.job_label) for name, job in jobs.items()}
                    seen = [{s["__name__"] for s in found} for found in series.values()]
                    if all(set(COMPARED) <= names for names in seen):
                        break
                except (urllib.error.URLError, ConnectionError):
                    pass  # Prometheus still starting
                assert time.monotonic() < deadline, f"families not scraped in time: {seen}"
                time.sleep(0.5)
            exposition = _exposition(fetch(f"http://127.0.0.1:{port}/metrics"))
            # The demo's pods come in one kubelet listing and stay: once every job has the
            # compared families, the agent's exposition holds the same label sets.
            series = {name: _series(url, job.job_label) for name, job in jobs.items()}
            yield Scraped(jobs, series, exposition, port, url)
    finally:
        agent.terminate()
        try:
            agent.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            agent.kill()
            agent.communicate()


RELABELLED = ("servicemonitor", "podmonitor", "servicemonitor-omitempty")


@pytest.mark.parametrize("job", RELABELLED)
def test_every_series_names_the_node_and_not_the_agent_pod(scraped: Scraped, job: str) -> None:
    target = scraped.jobs[job].target_labels
    assert len(scraped.series[job]) > 50
    for series in scraped.series[job]:
        assert series["node"] == NODE, series
        assert series["instance"] == NODE, series
        assert "service" not in series, series
        assert "endpoint" not in series, series
        for label in ("namespace", "pod", "container"):
            assert series.get(label) != target[label], series


@pytest.mark.parametrize("job", RELABELLED)
def test_gpu_series_carry_no_pod_labels(scraped: Scraped, job: str) -> None:
    gpu_series = [
        s
        for s in scraped.series[job]
        if s["__name__"].startswith("gpuwatch_gpu_") and not s["__name__"].startswith(POD_FAMILIES)
    ]
    assert len(gpu_series) > 20
    for series in gpu_series:
        assert not set(AGENT_IDENTITY) & set(series), series


@pytest.mark.parametrize("job", RELABELLED)
def test_pod_series_keep_the_workloads_labels(scraped: Scraped, job: str) -> None:
    pod_series = [s for s in scraped.series[job] if s["__name__"].startswith(POD_FAMILIES)]
    assert {s["namespace"] for s in pod_series} == {"team-a", "team-b"}
    costs = [s for s in pod_series if s["__name__"] == "gpuwatch_pod_cost_usd_total"]
    assert costs
    assert all("container" not in s for s in costs)
    for family in COMPARED:
        got = {
            frozenset((k, v) for k, v in s.items() if k not in ADDED and k != "__name__")
            for s in scraped.series[job]
            if s["__name__"] == family
        }
        assert got == scraped.exposition[family], family


def test_without_the_relabelings_the_agent_pod_lands_on_gpu_series(scraped: Scraped) -> None:
    """The control: the operator's target labels as they are, honor_labels on."""
    target = scraped.jobs["control"].target_labels
    series = scraped.series["control"]
    gpu_up = [s for s in series if s["__name__"] == "gpuwatch_gpu_up"]
    assert gpu_up
    for s in gpu_up:
        assert s["pod"] == AGENT_POD
        assert s["namespace"] == target["namespace"]
        assert s["instance"] == f"{POD_IP}:{scraped.port}"
        assert "node" not in s
    costs = [s for s in series if s["__name__"] == "gpuwatch_pod_cost_usd_total"]
    assert costs
    assert all(s["container"] == target["container"] for s in costs)
    # honor_labels: the workload's own namespace and pod still win where the agent sets them.
    assert {s["namespace"] for s in costs} == {"team-a", "team-b"}


def test_the_fleet_report_names_hosts_by_node(scraped: Scraped) -> None:
    """`gpuwatch report --prometheus` keys hosts by `node`, else `instance` (the control
    job has no `node`): the relabelled jobs and the one that only adds `node` (its
    instance is another IP:port) are one host, the node."""
    now = datetime.now(UTC)
    today = Period(now.replace(hour=0, minute=0, second=0, microsecond=0), now, "today")
    data = load(PrometheusOptions(scraped.url, scrape_interval_seconds=1.0), today)
    control = f"{POD_IP}:{scraped.port}"
    assert {g.host for g in data.gpu_days} == {NODE, control}
    assert {p.host for p in data.pod_days} == {NODE, control}
    assert {(p.namespace, p.pod) for p in data.pod_days if p.host == NODE} == {
        (dict(labels)["namespace"], dict(labels)["pod"])
        for labels in scraped.exposition["gpuwatch_pod_cost_usd_total"]
    }


def test_the_alert_docs_scrape_snippet_sets_what_the_monitors_set(
    rendered: dict[str, Rendered],
) -> None:
    """docs/alerts.md's relabeling for a scrape config without the chart's monitors sets
    `node` and `instance` from the pod's node name exactly as the monitors do, so the
    dashboards' host variable (`instance`) and the alerts (`node`) agree with the chart."""
    text = (REPO_ROOT / "docs" / "alerts.md").read_text(encoding="utf-8")
    found = re.search(r"```yaml\n(relabel_configs:\n.*?)```", text, re.DOTALL)
    assert found, "docs/alerts.md shows no relabel_configs snippet"
    snippet = yaml.safe_load(found.group(1))["relabel_configs"]
    for kind, key in (("ServiceMonitor", "endpoints"), ("PodMonitor", "podMetricsEndpoints")):
        values = "full-values" if kind == "ServiceMonitor" else "files-values"
        (endpoint,) = rendered[values].one(kind)["spec"][key]
        chart = [
            rule
            for rule in relabel_configs(endpoint["relabelings"])
            if rule.get("source_labels") == ["__meta_kubernetes_pod_node_name"]
        ]
        assert [r["target_label"] for r in chart] == ["node", "instance"]
        assert snippet == chart, kind
