"""The plan on DRA nodes (`gpuwatch.plan.apply.dra`): where the units held their GPUs
through NVIDIA's DRA driver, the MIG and shared GPUs get DRA claims (`dra-claims.yaml`)
instead of the device plugin's config. Every emitted object validates with
kubernetes-validate --strict at each Kubernetes version with `resource.k8s.io/v1` (1.34
on) and its opaque config against the driver's Go types (tests/plan/dra_validate.py,
after the validator accepts the driver's documented forms and rejects what they
reject); the Prometheus source marks a GPU DRA's from pod info's `resource` label."""

from __future__ import annotations

import dataclasses
import json
import threading
import urllib.parse
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import kubernetes_validate
import pytest
import yaml

from gpuwatch.plan.apply import device_plugin, dra
from gpuwatch.plan.apply.files import apply_files
from gpuwatch.plan.apply.layout import plan_layout
from gpuwatch.plan.model import WorkloadNeed
from gpuwatch.plan.prometheus import load_usage
from gpuwatch.plan.usage import workload_needs
from gpuwatch.promapi.client import PrometheusOptions
from tests.alerts.test_hostile_names import HOSTILE
from tests.conftest import free_port
from tests.plan.dra_validate import feature_gates, validate_gpu_config
from tests.plan.test_apply import CATALOG, fleet, hand_plan, parsed, report_of, unit

# resource.k8s.io/v1 is GA in 1.34; 1.37 is the newest schema kubernetes-validate bundles
RESOURCE_V1_VERSIONS = ("1.34.0", "1.35.0", "1.36.0", "1.37.0")


def dra_fleet(only: set[str] | None = None) -> list[WorkloadNeed]:
    """`fleet()` with the units labelled in `only` (all when None) on DRA."""
    return [
        dataclasses.replace(n, dra=True) if only is None or n.label in only else n for n in fleet()
    ]


def _files(needs: list[WorkloadNeed]) -> dict[str, Any]:
    return parsed(apply_files(report_of(hand_plan(needs), needs), CATALOG))


def _items(docs: dict[str, Any]) -> list[dict[str, Any]]:
    listing = docs["dra-claims.yaml"]
    assert (listing["apiVersion"], listing["kind"]) == ("v1", "List")
    items: list[dict[str, Any]] = listing["items"]
    return items


def _validate_strictly(obj: dict[str, Any]) -> None:
    for version in RESOURCE_V1_VERSIONS:
        kubernetes_validate.validate(obj, version, strict=True)


# -- the validator accepts the driver's documented forms and rejects what it rejects ----


@pytest.mark.parametrize(
    "config",
    [
        # demo/specs/quickstart/v1/gpu-test-mps.yaml's form
        {
            "apiVersion": "resource.nvidia.com/v1beta1",
            "kind": "GpuConfig",
            "sharing": {
                "strategy": "MPS",
                "mpsConfig": {
                    "defaultActiveThreadPercentage": 50,
                    "defaultPinnedDeviceMemoryLimit": "10Gi",
                },
            },
        },
        # time-slicing with each interval the driver knows (sharing.go)
        *(
            {
                "apiVersion": "resource.nvidia.com/v1beta1",
                "kind": "GpuConfig",
                "sharing": {"strategy": "TimeSlicing", "timeSlicingConfig": {"interval": i}},
            }
            for i in ("Default", "Short", "Medium", "Long")
        ),
        {"apiVersion": "resource.nvidia.com/v1beta1", "kind": "GpuConfig"},  # no sharing
    ],
)
def test_the_gpu_config_validator_accepts_the_drivers_forms(config: dict[str, Any]) -> None:
    assert validate_gpu_config(config) == []


def _ts(**sharing: Any) -> dict[str, Any]:
    return {"apiVersion": "resource.nvidia.com/v1beta1", "kind": "GpuConfig", "sharing": sharing}


@pytest.mark.parametrize(
    ("config", "problem"),
    [
        (_ts(strategy="Timeslicing"), "sharing.strategy"),
        (_ts(strategy="TimeSlicing", timeSlicingConfig={"interval": "Tiny"}), "interval"),
        (_ts(strategy="TimeSlicing", mpsConfig={}), "not with the TimeSlicing strategy"),
        (_ts(strategy="MPS", timeSlicingConfig={}), "not with the MPS strategy"),
        (_ts(strategy="MPS", mpsConfig={"defaultActiveThreadPercentage": 101}), "0-100"),
        (_ts(strategy="MPS", mpsConfig={"defaultPinnedDeviceMemoryLimit": "ten"}), "quantity"),
        (_ts(strategy="TimeSlicing", replicas=2), "unknown field"),
        ({**_ts(strategy="MPS"), "apiVersion": "resource.nvidia.com/v1"}, "apiVersion"),
        ({**_ts(strategy="MPS"), "kind": "MigDeviceConfig"}, "kind"),
    ],
)
def test_the_gpu_config_validator_rejects(config: dict[str, Any], problem: str) -> None:
    assert any(problem in error for error in validate_gpu_config(config))


# -- our objects ----------------------------------------------------------------------


def test_a_dra_fleet_gets_claims_not_device_plugin_configs() -> None:
    docs = _files(dra_fleet())
    items = _items(docs)
    for obj in items:
        _validate_strictly(obj)
    templates = [o for o in items if o["kind"] == "ResourceClaimTemplate"]
    claims = [o for o in items if o["kind"] == "ResourceClaim"]
    # the MIG H100: one template per unit, a MIG device of the planned profile
    assert sorted(t["metadata"]["annotations"][dra.UNITS_ANNOTATION] for t in templates) == [
        "a",
        "b",
    ]
    for template in templates:
        (request,) = template["spec"]["spec"]["devices"]["requests"]
        assert request["exactly"]["deviceClassName"] == "mig.nvidia.com"
        (selector,) = request["exactly"]["selectors"]
        assert selector["cel"]["expression"] == (
            "device.attributes['gpu.nvidia.com'].profile == '3g.40gb'"
        )
        assert template["metadata"]["namespace"] == "team-a"
    # the time-sliced L4: ONE claim for exactly c and d, shared by the driver's TimeSlicing
    (claim,) = claims
    assert claim["metadata"]["annotations"][dra.UNITS_ANNOTATION] == "c + d"
    devices = claim["spec"]["devices"]
    (request,) = devices["requests"]
    assert request["exactly"] == {"deviceClassName": "gpu.nvidia.com"}
    (config,) = devices["config"]
    assert config["requests"] == [request["name"]]
    assert config["opaque"]["driver"] == "gpu.nvidia.com"
    parameters = config["opaque"]["parameters"]
    assert validate_gpu_config(parameters) == []
    assert parameters["sharing"]["strategy"] == "TimeSlicing"
    assert feature_gates(parameters) == {"TimeSlicingSettings"}
    # no device-plugin config for the DRA nodes, and no label that would pick one
    plugin = docs["device-plugin-configs.yaml"]["data"] or {}
    assert not [name for name in plugin if "time-slicing" in name or "mig" in name]
    for node in docs["nodes.yaml"]["add"]:
        if node["kind"] in ("mig", "shared"):
            assert device_plugin.DEVICE_PLUGIN_LABEL not in node["labels"]
            assert node["labels"]  # mig-parted's and the pool's stay


def test_each_units_pods_reference_its_claim() -> None:
    """workloads.yaml: a DRA unit moved to a MIG or shared GPU requests no device-plugin
    resource; its pods' spec.resourceClaims entry names its template, or its GPU's ONE
    shared claim (c and d: the same), and a pod using it validates strictly."""
    docs = _files(dra_fleet())
    by_units = {
        o["metadata"]["annotations"][dra.UNITS_ANNOTATION]: o["metadata"]["name"]
        for o in _items(docs)
    }
    work = {w["workload"]: w for w in docs["workloads.yaml"]["workloads"]}
    assert work["a"]["to"] == {}
    assert work["a"]["resource_claims"] == [
        {"name": "gpu", "resourceClaimTemplateName": by_units["a"]}
    ]
    shared = [{"name": "gpu", "resourceClaimName": by_units["c + d"]}]
    assert work["c"]["resource_claims"] == work["d"]["resource_claims"] == shared
    assert "resource_claims" not in work["job"]  # whole GPUs keep their request
    assert work["job"]["to"] == {"nvidia.com/gpu": 4}
    for name in ("a", "c"):
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "p", "namespace": "team-a"},
            "spec": {
                "resourceClaims": work[name]["resource_claims"],
                "containers": [
                    {"name": "c", "image": "x", "resources": {"claims": [{"name": "gpu"}]}}
                ],
            },
        }
        _validate_strictly(pod)
    plain = {w["workload"]: w for w in _files(fleet())["workloads.yaml"]["workloads"]}
    assert "resource_claims" not in plain["a"]
    assert plain["a"]["to"] == {"nvidia.com/mig-3g.40gb": 1}


def test_a_mixed_fleet_keeps_the_device_plugin_for_its_plugin_nodes() -> None:
    """Only the MIG units run on DRA: the time-sliced L4 keeps its plugin config."""
    docs = _files(dra_fleet({"a", "b"}))
    assert {o["kind"] for o in _items(docs)} == {"ResourceClaimTemplate"}
    plugin = yaml.safe_load(docs["device-plugin-configs.yaml"]["data"]["gpuwatch-time-slicing-2"])
    assert plugin["sharing"]["timeSlicing"]["resources"][0]["replicas"] == 2
    assert "gpuwatch-mig-mixed" not in docs["device-plugin-configs.yaml"]["data"]


def test_a_device_plugin_fleet_gets_no_claims() -> None:
    docs = _files(fleet())
    assert _items(docs) == []
    assert "gpuwatch-time-slicing-2" in docs["device-plugin-configs.yaml"]["data"]


def test_mps_sharing_validates() -> None:
    needs = dra_fleet()
    layout = plan_layout(hand_plan(needs), needs)
    objects = json.loads(json.dumps(dra.dra_objects(layout, "MPS").objects))
    (claim,) = [o for o in objects if o["kind"] == "ResourceClaim"]
    parameters = claim["spec"]["devices"]["config"][0]["opaque"]["parameters"]
    assert validate_gpu_config(parameters) == []
    assert feature_gates(parameters) == {"MPSSupport"}
    _validate_strictly(claim)


def test_units_of_two_namespaces_share_no_claim() -> None:
    """A claim is namespaced: pods of two namespaces cannot reference one."""
    needs = [
        dataclasses.replace(n, namespace="team-b") if n.label == "d" else n for n in dra_fleet()
    ]
    found = dra.dra_objects(plan_layout(hand_plan(needs), needs))
    assert [o["kind"] for o in found.objects] == ["ResourceClaimTemplate"] * 2
    assert found.skipped == 1


@pytest.mark.parametrize("name", HOSTILE)
def test_hostile_names_stay_data_and_objects_stay_valid(name: str) -> None:
    """Unit labels and hosts of any bytes: names are made of neither, annotations carry
    them exactly (a lone surrogate as U+FFFD), every object validates; a namespace that
    is no Kubernetes name gets no object."""
    plain = dra_fleet()
    plan = hand_plan(plain)
    needs = [
        dataclasses.replace(n, label=name, host=name) if n.label in ("a", "c") else n for n in plain
    ]
    files = apply_files(report_of(plan, needs), CATALOG)
    assert all(text.isascii() for text in files.values())
    items = _items(parsed(files))
    assert len(items) == 3
    for obj in items:
        _validate_strictly(obj)
    expect = name.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    annotations = [o["metadata"]["annotations"][dra.UNITS_ANNOTATION] for o in items]
    assert expect in annotations
    assert f"{expect} + d" in annotations
    spaced = [dataclasses.replace(n, namespace=name) if n.label == "b" else n for n in plain]
    found = dra.dra_objects(plan_layout(plan, spaced))
    assert (len(found.objects), found.skipped) == (2, 1)


def test_an_invalid_namespace_gets_no_object() -> None:
    needs = [
        dataclasses.replace(n, namespace="Team A") if n.label == "a" else n for n in dra_fleet()
    ]
    found = dra.dra_objects(plan_layout(hand_plan(needs), needs))
    assert found.skipped == 1
    assert len(found.objects) == 2


def test_object_names_are_dns_labels_and_distinct() -> None:
    names = {
        dra.object_name("gpuwatch-mig-3g.40gb", x, x) for x in ("a_b", "a.b", "A-B", "x" * 300)
    }
    assert len(names) == 4
    for name in names:
        assert len(name) <= 63
        kubernetes_validate.validate(
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}},
            RESOURCE_V1_VERSIONS[-1],
            strict=True,
        )


# -- the Prometheus source reads the evidence -----------------------------------------

AT = 1_793_404_800.0
HOUR = 3600.0


def _pod_series(uuid: str, pod: str, resource: str) -> dict[str, Any]:
    labels = {
        "__name__": "gpuwatch_gpu_pod_info",
        "instance": "node-1:9842",
        "uuid": uuid,
        "namespace": "team-a",
        "pod": pod,
        "container": "c",
        "resource": resource,
    }
    return {"metric": labels, "values": [[AT - HOUR, "1"], [AT, "1"]]}


class _Handler(BaseHTTPRequestHandler):
    """Answers the plan's queries: two GPUs, one held through a DRA claim."""

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length", "0"))
        query = dict(urllib.parse.parse_qsl(self.rfile.read(length).decode()))["query"]
        result: list[dict[str, Any]] = []
        kind = "vector"
        if query.startswith("last_over_time(gpuwatch_gpu_info"):
            result = [
                {
                    "metric": {"instance": "node-1:9842", "uuid": u, "gpu": g, "name": "NVIDIA L4"},
                    "value": [AT, "1"],
                }
                for u, g in (("GPU-dra", "0"), ("GPU-plugin", "1"))
            ]
        elif query.startswith("max_over_time(gpuwatch_gpu_pod_info"):
            kind = "matrix"
            result = [
                _pod_series("GPU-dra", "trainer", "gpu.nvidia.com"),
                _pod_series("GPU-plugin", "eval", "nvidia.com/gpu"),
            ]
        elif "[10m] @" in query or query.startswith("last_over_time(gpuwatch_gpu_required"):
            kind = "matrix"
        payload = json.dumps(
            {"status": "success", "data": {"resultType": kind, "result": result}}
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def api_url() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", free_port()), _Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()
    thread.join()


def test_the_prometheus_source_marks_gpus_held_through_dra(api_url: str) -> None:
    usages = {u.uuid: u for u in load_usage(PrometheusOptions(api_url), 30, AT)}
    assert usages["GPU-dra"].dra is True
    assert usages["GPU-plugin"].dra is False
    needs = {n.key: n for n in workload_needs(list(usages.values()), CATALOG)}
    assert needs["GPU-dra"].dra is True
    assert needs["GPU-plugin"].dra is False


def test_unit_builder_is_not_dra_by_default() -> None:
    assert unit("x", "node-1").dra is False
