"""OpenCost's GPU queries, as OpenCost writes them, against a real Prometheus scraping
`gpuwatch run --simulate demo` with the DCGM-compatible set on.

The query formats are copied verbatim from opencost/opencost
`modules/prometheus-source/pkg/prom/metricsquerier.go` (`QueryGPUsUsageAvg`,
`QueryGPUsUsageMax`, `QueryGPUInfo`; `pkg/costmodel/allocation.go` applies their results
to each allocation). OpenCost fills them with `fmt.Sprintf`: the window as
`timeutil.DurationString(end - start)`, its cluster label (default `cluster_id`) and its
cluster filter (empty without a cluster ID), and runs them at `end` (`QueryAtTime`).

The demo node: team-a trains on GPU 0 (held whole) and holds GPU 2 with an idle notebook;
team-b holds GPU 1 idle and shares GPU 3 between its vLLM server (the only process there)
and a canary that runs nothing. Each pod must get OpenCost's usage equal to its measured
activity (the GPU's activity times its processes' share, read from the agent's own
`gpuwatch_*` series) and a GPU model and UUID from the GPU-info query.

`demo-dra` is the same node with its pods holding their GPUs through DRA claims of
`gpu.nvidia.com` (pod-resources' `dynamic_resources`): OpenCost must give it the same
per-pod answers. One Prometheus scrapes both agents, each target labelled with its own
`cluster_id` (OpenCost's cluster label), so OpenCost's queries, which group by it, keep
the two nodes' identically named pods apart; the GPU-info query takes OpenCost's cluster
filter as OpenCost writes it with a `CLUSTER_ID` set (`cluster_id="demo-dra"`).
"""

from __future__ import annotations

import json
import signal
import time
import urllib.parse
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.agent_process import fetch, start_agent
from tests.conftest import free_port
from tests.prometheus_process import labelled_scrape_config, running_prometheus

# modules/prometheus-source/pkg/prom/metricsquerier.go, verbatim
QUERY_FMT_GPUS_USAGE_AVG = (
    'avg(avg_over_time(DCGM_FI_PROF_GR_ENGINE_ACTIVE{container!=""}[%s]))'
    " by (container, pod, namespace, uid, %s)"
)
QUERY_FMT_GPUS_USAGE_MAX = (
    'max(max_over_time(DCGM_FI_PROF_GR_ENGINE_ACTIVE{container!=""}[%s]))'
    " by (container, pod, namespace, uid, %s)"
)
QUERY_FMT_GET_GPU_INFO = (
    'avg(avg_over_time(DCGM_FI_DEV_DEC_UTIL{container!="",%s}[%s]))'
    " by (container, pod, namespace, device, modelName, UUID, uid, %s)"
)
CLUSTER_LABEL = "cluster_id"  # OpenCost's default PROM_CLUSTER_ID_LABEL
CLUSTER_FILTER = ""  # no CLUSTER_ID configured
WINDOW = "20s"  # timeutil.DurationString(20 * time.Second)
WINDOW_SECONDS = 20

DEMO_PODS = {
    ("team-a", "llama3-sft-0", "trainer"),
    ("team-a", "notebook-alice", "jupyter"),
    ("team-b", "batch-eval-7f9c", "eval"),
    ("team-b", "vllm-llama-8b-0", "vllm"),
    ("team-b", "vllm-llama-8b-canary", "vllm"),
}
Key = tuple[str, str, str]


CLUSTERS = ("demo", "demo-dra")  # each agent's scenario, and its target's cluster_id


def _filter(cluster: str) -> str:
    """OpenCost's cluster filter with `CLUSTER_ID` set (env.GetPromClusterFilter)."""
    return f'{CLUSTER_LABEL}="{cluster}"'


@pytest.fixture(scope="module")
def agent_ports(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, int]]:
    """`gpuwatch run --simulate` of each scenario in CLUSTERS, by cluster."""
    config = tmp_path_factory.mktemp("agent") / "gpuwatch.toml"
    config.write_text(
        "[agent]\nper_process_metrics = true\n[exporter]\ndcgm_compat = true\n", encoding="utf-8"
    )
    ports: dict[str, int] = {}
    procs = []
    try:
        for cluster in CLUSTERS:
            port = free_port()
            procs.append(
                start_agent(["--simulate", cluster, "--speed", "10", "--config", str(config)], port)
            )
            ports[cluster] = port
        yield ports
    finally:
        for proc in procs:
            proc.send_signal(signal.SIGTERM)
            proc.communicate(timeout=10)


@pytest.fixture(scope="module")
def prometheus_url(
    agent_ports: dict[str, int], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    """One Prometheus for both nodes, each target labelled with its cluster_id."""
    workdir: Path = tmp_path_factory.mktemp("prometheus")
    targets = {port: {CLUSTER_LABEL: cluster} for cluster, port in agent_ports.items()}
    with running_prometheus(workdir, labelled_scrape_config(targets)) as url:
        yield url


def _query(url: str, promql: str, at: float) -> list[dict[str, object]]:
    params = urllib.parse.urlencode({"query": promql, "time": f"{at:.3f}"})
    body = json.loads(fetch(f"{url}/api/v1/query?{params}"))
    assert body["status"] == "success", body
    result: list[dict[str, object]] = body["data"]["result"]
    return result


def _labels(series: dict[str, object]) -> dict[str, str]:
    metric = series["metric"]
    assert isinstance(metric, dict)
    return {str(k): str(v) for k, v in metric.items()}


def _value(series: dict[str, object]) -> float:
    value = series["value"]
    assert isinstance(value, list)
    return float(value[1])


def _key(labels: dict[str, str]) -> Key:
    return labels["namespace"], labels["pod"], labels["container"]


@pytest.fixture(scope="module")
def end(prometheus_url: str) -> float:
    """OpenCost's `end`: a time with a full window of scrapes behind it, on both nodes, of
    every GPU's DCGM series and of the kubelet's view (the five demo holders' info series)."""
    deadline = time.monotonic() + 60
    promql = (
        f"count_over_time(DCGM_FI_PROF_GR_ENGINE_ACTIVE[{WINDOW}])"
        f" or count_over_time(gpuwatch_gpu_pod_info[{WINDOW}])"
    )
    while time.monotonic() < deadline:
        now = time.time()
        try:
            counts = _query(prometheus_url, promql, now)
        except OSError:  # Prometheus still starting
            counts = []
        full = len(counts) >= len(CLUSTERS) * (4 + len(DEMO_PODS))
        if full and min(map(_value, counts)) >= WINDOW_SECONDS - 2:
            return now
        time.sleep(1.0)
    raise AssertionError("Prometheus never held a full window of the GPUs and their pods")


def _in(cluster: str, rows: list[dict[str, object]]) -> list[dict[str, object]]:
    """The rows of one node (OpenCost groups by its cluster label)."""
    return [row for row in rows if _labels(row)[CLUSTER_LABEL] == cluster]


def _measured_activity(url: str, cluster: str, at: float) -> dict[Key, float]:
    """Each demo pod's activity from the agent's own series, without any DCGM family: its
    GPU's kernel-busy ratio averaged over the window, times its processes' share of the
    GPU's processes' SM utilization (the demo's shares hold still: 1 or 0)."""
    only = "{" + _filter(cluster) + "}"
    holders = [_labels(s) for s in _query(url, f"gpuwatch_gpu_pod_info{only}", at)]
    busy = {
        _labels(s)["uuid"]: _value(s)
        for s in _query(url, f"avg_over_time(gpuwatch_gpu_utilization_ratio{only}[{WINDOW}])", at)
    }
    sm: dict[str, dict[Key, float]] = {}
    for series in _query(url, f"gpuwatch_process_sm_utilization_ratio{only}", at):
        labels = _labels(series)
        per_gpu = sm.setdefault(labels["uuid"], {})
        per_gpu[_key(labels)] = per_gpu.get(_key(labels), 0.0) + _value(series)
    measured = {}
    for hold in holders:
        on_gpu = sm.get(hold["uuid"], {})
        total = sum(on_gpu.values())
        share = on_gpu.get(_key(hold), 0.0) / total if total > 0 else 0.0
        # a GPU held whole by one container is all its own, processes or not
        if sum(h["uuid"] == hold["uuid"] for h in holders) == 1:
            share = 1.0
        measured[_key(hold)] = busy[hold["uuid"]] * share
    return measured


def _usage(url: str, at: float) -> dict[str, dict[Key, float]]:
    """OpenCost's average GPU usage query, by node, then by container."""
    rows = _query(url, QUERY_FMT_GPUS_USAGE_AVG % (WINDOW, CLUSTER_LABEL), at)
    usage = {
        cluster: {_key(_labels(s)): _value(s) for s in _in(cluster, rows)} for cluster in CLUSTERS
    }
    assert sum(map(len, usage.values())) == len(rows), "one row per container and node"
    return usage


@pytest.mark.parametrize("cluster", CLUSTERS)
def test_opencost_gpu_usage_is_each_pods_measured_activity(
    prometheus_url: str, end: float, cluster: str
) -> None:
    got = _usage(prometheus_url, end)[cluster]
    assert set(got) == DEMO_PODS, "every demo pod, shared GPU 3's two included"
    measured = _measured_activity(prometheus_url, cluster, end)
    assert set(measured) == DEMO_PODS
    for key, value in got.items():
        assert value == pytest.approx(measured[key], abs=1e-9), key
    assert got[("team-a", "llama3-sft-0", "trainer")] > 0.9
    assert got[("team-b", "vllm-llama-8b-0", "vllm")] > 0.3  # the server on the shared GPU
    assert got[("team-b", "vllm-llama-8b-canary", "vllm")] == 0.0  # holds, runs nothing
    peak = _in(
        cluster, _query(prometheus_url, QUERY_FMT_GPUS_USAGE_MAX % (WINDOW, CLUSTER_LABEL), end)
    )
    assert {_key(_labels(s)) for s in peak} == DEMO_PODS


def test_dra_node_gets_the_demos_answers(prometheus_url: str, end: float) -> None:
    """demo-dra's pods get demo's usage. The two agents run on their own simulated clocks,
    started a moment apart, so their readings carry different draws of the scenarios' +-2 %
    jitter (`noise.jitter`): two averages of one noise-free level differ by at most 4 % of
    it. GPU 3's level changes every simulated minute, so its server is checked against its
    own node's measurement above, not against demo's."""
    usage = _usage(prometheus_url, end)
    assert set(usage["demo-dra"]) == set(usage["demo"]) == DEMO_PODS
    varying = {("team-b", "vllm-llama-8b-0", "vllm")}
    for key in DEMO_PODS - varying:
        assert usage["demo-dra"][key] == pytest.approx(usage["demo"][key], rel=0.04), key
    idle = DEMO_PODS - varying - {("team-a", "llama3-sft-0", "trainer")}
    assert all(usage["demo-dra"][key] == usage["demo"][key] == 0.0 for key in idle)


@pytest.mark.parametrize("cluster", CLUSTERS)
def test_shared_gpu_pods_sum_to_the_gpus_own_series(
    prometheus_url: str, end: float, cluster: str
) -> None:
    gpu_level = _query(
        prometheus_url, f'DCGM_FI_PROF_GR_ENGINE_ACTIVE{{gpu="3",{_filter(cluster)}}}', end
    )
    # Prometheus stores an empty label as no label: the GPU's own series has no pod
    by_pod = {_labels(s).get("pod", ""): _value(s) for s in gpu_level}
    assert set(by_pod) == {"", "vllm-llama-8b-0", "vllm-llama-8b-canary"}
    own = [_labels(s) for s in gpu_level if "pod" not in _labels(s)]
    assert len(own) == 1
    assert "container" not in own[0], 'so OpenCost\'s {container!=""} never counts it'
    assert by_pod["vllm-llama-8b-0"] + by_pod["vllm-llama-8b-canary"] == pytest.approx(
        by_pod[""], abs=1e-12
    )


def _gpu_info(url: str, cluster: str, at: float) -> dict[Key, dict[str, str]]:
    """OpenCost's GPU-info query with its cluster filter for `cluster`, by container."""
    info = _query(url, QUERY_FMT_GET_GPU_INFO % (_filter(cluster), WINDOW, CLUSTER_LABEL), at)
    rows = {_key(_labels(s)): _labels(s) for s in info}
    assert len(rows) == len(info)
    assert {labels[CLUSTER_LABEL] for labels in rows.values()} == {cluster}
    return rows


@pytest.mark.parametrize("cluster", CLUSTERS)
def test_opencost_gpu_info_names_each_pods_gpu(
    prometheus_url: str, end: float, cluster: str
) -> None:
    rows = _gpu_info(prometheus_url, cluster, end)
    assert set(rows) == DEMO_PODS
    held = {
        _key(labels): labels["uuid"]
        for labels in map(
            _labels,
            _query(prometheus_url, f"gpuwatch_gpu_pod_info{{{_filter(cluster)}}}", end),
        )
    }
    for key, labels in rows.items():
        assert labels["modelName"] == "NVIDIA H100 80GB HBM3", key
        assert labels["UUID"] == held[key], key
        assert labels["device"].startswith("nvidia"), key


def test_dra_node_names_the_demos_gpus(prometheus_url: str, end: float) -> None:
    """Each demo-dra pod is on the same GPU (UUID, device, model) as its demo twin."""
    kept = ("UUID", "device", "modelName")
    demo = _gpu_info(prometheus_url, "demo", end)
    dra = _gpu_info(prometheus_url, "demo-dra", end)
    for key in DEMO_PODS:
        assert {k: dra[key][k] for k in kept} == {k: demo[key][k] for k in kept}, key
