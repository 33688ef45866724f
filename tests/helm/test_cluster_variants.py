"""Renderings for real kubelets and non-default clusters: the user the agent runs as (the
kubelet's pod-resources socket is root's), the monitors' relabelings, the host driver
folder (GKE), extra volumes and environment, and the report CronJob's fsGroup. Each
rendering is real Helm; the objects validate with kubernetes-validate --strict."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import helm_python
import kubernetes_validate
import pytest

from tests.helm.chart import NAMESPACE, RELEASE, Rendered, render
from tests.helm.test_chart import KUBERNETES_VERSIONS, OPERATOR_GROUP

AGENT_USER = 65532


def _pod(rendered: Rendered, kind: str = "DaemonSet") -> dict[str, Any]:
    obj = rendered.one(kind)
    template = obj["spec"]["jobTemplate"]["spec"] if kind == "CronJob" else obj["spec"]
    spec: dict[str, Any] = template["template"]["spec"]
    return spec


def _container(pod: dict[str, Any], name: str) -> dict[str, Any]:
    containers: list[dict[str, Any]] = pod.get("initContainers", []) + pod["containers"]
    (found,) = [c for c in containers if c["name"] == name]
    return found


def _effective_user(pod: dict[str, Any], container: dict[str, Any]) -> int:
    """runAsUser as the kubelet applies it: the container's, else the pod's."""
    user = container["securityContext"].get("runAsUser", pod["securityContext"]["runAsUser"])
    return int(user)


def _validate(rendered: Rendered) -> None:
    for obj in rendered.objects:
        if obj["apiVersion"] != OPERATOR_GROUP:
            for version in KUBERNETES_VERSIONS:
                kubernetes_validate.validate(obj, version, strict=True)


def _assert_unprivileged(container: dict[str, Any]) -> None:
    context = container["securityContext"]
    assert context["capabilities"] == {"drop": ["ALL"]}  # drops ALL, adds nothing
    assert context["allowPrivilegeEscalation"] is False
    assert context["readOnlyRootFilesystem"] is True
    assert "privileged" not in context


@pytest.mark.parametrize("name", ["default-values", "full-values", "gke-values"])
def test_attribution_runs_the_agent_as_root_with_no_capability(
    rendered: dict[str, Rendered], name: str
) -> None:
    """The kubelet's pod-resources/ is root's, mode 0750: uid 0 reaches the socket as its
    owner, with no capability."""
    pod = _pod(rendered[name])
    agent = _container(pod, "agent")
    assert agent["securityContext"]["runAsUser"] == 0
    assert agent["securityContext"]["runAsNonRoot"] is False
    assert _effective_user(pod, agent) == 0
    _assert_unprivileged(agent)
    assert {m["name"] for m in agent["volumeMounts"]} >= {"pod-resources", "pod-logs"}
    # The state folder is handed to the user the agent runs as: root without
    # CAP_DAC_OVERRIDE cannot write into a folder 65532 owns.
    owner = _container(pod, "state-owner")
    assert owner["command"][:3] == ["chown", "-R", f"0:{AGENT_USER}"]
    # The pod's default stays non-root for every other container (the report CronJob).
    assert pod["securityContext"]["runAsUser"] == AGENT_USER


def test_without_attribution_the_agent_stays_65532(rendered: dict[str, Rendered]) -> None:
    pod = _pod(rendered["baseline-values"])
    agent = _container(pod, "agent")
    assert _effective_user(pod, agent) == AGENT_USER
    assert "runAsUser" not in agent["securityContext"]
    assert "runAsNonRoot" not in agent["securityContext"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    _assert_unprivileged(agent)
    assert "pod-resources" not in {v["name"] for v in pod["volumes"]}


def test_a_runasuser_set_in_values_wins(chart: Path) -> None:
    """The user's securityContext.runAsUser overrides the chart's root for attribution
    (the agent then reports attribution down, reason permission_denied, on a default
    kubelet); the state folder follows that user."""
    r = render(chart, {"securityContext": {"runAsUser": AGENT_USER, "runAsNonRoot": True}})
    pod = _pod(r)
    agent = _container(pod, "agent")
    assert _effective_user(pod, agent) == AGENT_USER
    assert agent["securityContext"]["runAsNonRoot"] is True
    _assert_unprivileged(agent)
    assert _container(pod, "state-owner")["command"][2] == f"{AGENT_USER}:{AGENT_USER}"
    _validate(r)


def test_gke_mounts_the_host_driver(rendered: dict[str, Rendered]) -> None:
    pod = _pod(rendered["gke-values"])
    agent = _container(pod, "agent")
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes["nvidia-driver"]["hostPath"] == {
        "path": "/home/kubernetes/bin/nvidia",
        "type": "Directory",
    }
    mounts = {m["name"]: m for m in agent["volumeMounts"]}
    assert mounts["nvidia-driver"] == {
        "name": "nvidia-driver",
        "mountPath": "/usr/local/nvidia",
        "readOnly": True,
    }
    env = {e["name"]: e.get("value") for e in agent["env"]}
    assert env["LD_LIBRARY_PATH"] == "/usr/local/nvidia/lib64"
    assert "runtimeClassName" not in pod


@pytest.mark.parametrize("name", ["default-values", "baseline-values", "full-values"])
def test_no_driver_mount_by_default(rendered: dict[str, Rendered], name: str) -> None:
    pod = _pod(rendered[name])
    assert "nvidia-driver" not in {v["name"] for v in pod["volumes"]}
    assert "LD_LIBRARY_PATH" not in {e["name"] for e in _container(pod, "agent")["env"]}


def test_driver_mount_path_sets_the_library_path(chart: Path) -> None:
    r = render(chart, {"driver": {"hostPath": "/opt/nvidia/driver", "mountPath": "/driver"}})
    agent = _container(_pod(r), "agent")
    env = {e["name"]: e.get("value") for e in agent["env"]}
    assert env["LD_LIBRARY_PATH"] == "/driver/lib64"
    assert {"name": "nvidia-driver", "mountPath": "/driver", "readOnly": True} in agent[
        "volumeMounts"
    ]
    _validate(r)


EXTRAS: dict[str, list[dict[str, Any]]] = {
    "extraVolumes": [
        {"name": "dev-nvidia", "hostPath": {"path": "/dev/nvidia0", "type": "CharDevice"}},
        {"name": "ca", "configMap": {"name": "corporate-ca"}},
    ],
    "extraVolumeMounts": [
        {"name": "ca", "mountPath": "/etc/ssl/corporate", "readOnly": True},
    ],
    "extraEnv": [
        {"name": "GPUWATCH_LOGGING__FORMAT", "value": "json"},
        {"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
    ],
}


def test_extra_volumes_mounts_and_env_reach_the_agent(chart: Path) -> None:
    r = render(chart, EXTRAS)
    pod = _pod(r)
    agent = _container(pod, "agent")
    for volume in EXTRAS["extraVolumes"]:
        assert volume in pod["volumes"]
    assert EXTRAS["extraVolumeMounts"][0] in agent["volumeMounts"]
    for variable in EXTRAS["extraEnv"]:
        assert variable in agent["env"]
    _validate(r)


@pytest.mark.parametrize(
    "values",
    [
        {"extraVolumes": [{"name": "x", "hostpath": {"path": "/x"}}]},
        {"extraVolumes": [{"hostPath": {"path": "/x"}}]},
        {"extraVolumeMounts": [{"name": "x", "mountpath": "/x"}]},
        {"extraVolumeMounts": [{"name": "x"}]},
        {"driver": {"hostPath": "home/kubernetes/bin/nvidia"}},
        {"driver": {"hostpath": "/home/kubernetes/bin/nvidia"}},
    ],
)
def test_a_misspelt_extra_fails_the_schema(chart: Path, values: dict[str, Any]) -> None:
    with pytest.raises(helm_python.HelmError) as caught:
        helm_python.Chart.load(chart).render(values, name=RELEASE, namespace=NAMESPACE)
    assert "schema" in str(caught.value).lower()


def test_report_pod_owns_a_fresh_volume_through_fsgroup(rendered: dict[str, Rendered]) -> None:
    """A new PVC is root-owned: the report (non-root) can write to it only as fsGroup."""
    pod = _pod(rendered["full-values"], "CronJob")
    context = pod["securityContext"]
    assert context["fsGroup"] == AGENT_USER
    assert context["fsGroupChangePolicy"] == "OnRootMismatch"
    assert context["runAsUser"] == AGENT_USER
    assert context["runAsNonRoot"] is True
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes["reports"]["persistentVolumeClaim"] == {"claimName": "gpuwatch-reports"}
    _assert_unprivileged(_container(pod, "report"))


def test_report_fsgroup_follows_the_values(chart: Path) -> None:
    values = {
        "report": {"enabled": True, "prometheusUrl": "http://p:9090", "slack": False},
        "podSecurityContext": {"runAsUser": 1000, "runAsGroup": 2000},
    }
    context = _pod(render(chart, values), "CronJob")["securityContext"]
    assert context["fsGroup"] == 2000
    values["podSecurityContext"] = {
        "runAsUser": 1000,
        "runAsGroup": 2000,
        "fsGroup": 3000,
        "fsGroupChangePolicy": "Always",
    }
    r = render(chart, values)
    context = _pod(r, "CronJob")["securityContext"]
    assert (context["fsGroup"], context["fsGroupChangePolicy"]) == (3000, "Always")
    _validate(r)


def test_monitors_move_the_agent_identity_out_of_the_way(rendered: dict[str, Rendered]) -> None:
    (sm,) = rendered["full-values"].one("ServiceMonitor")["spec"]["endpoints"]
    (pm,) = rendered["files-values"].one("PodMonitor")["spec"]["podMetricsEndpoints"]
    assert sm["relabelings"] == pm["relabelings"]
    for endpoint in (sm, pm):
        assert endpoint["honorLabels"] is True
        by_target = {r["targetLabel"]: r for r in endpoint["relabelings"]}
        for label in ("node", "instance"):
            assert by_target[label]["sourceLabels"] == ["__meta_kubernetes_pod_node_name"]
        for label in ("namespace", "pod", "container", "service", "endpoint"):
            assert by_target[label] == {"targetLabel": label, "replacement": ""}
        assert "metricRelabelings" not in endpoint


def test_notes_say_why_the_agent_is_root(chart: Path, rendered: dict[str, Rendered]) -> None:
    notes = "gpuwatch/templates/NOTES.txt"
    assert "runs as uid 0" in rendered["default-values"].manifests[notes]
    assert "runs as uid 0" not in rendered["baseline-values"].manifests[notes]
    overridden = render(chart, {"securityContext": {"runAsUser": AGENT_USER}})
    assert "runs as uid 0" not in overridden.manifests[notes]


# The label keys of kubernetes-sigs/dra-driver-nvidia-gpu's kubeletPlugin.affinity (its
# chart's values.yaml at 95932046): one node selector term each, any one selects a node.
DRA_DRIVER_NODE_LABELS = {
    "feature.node.kubernetes.io/pci-10de.present": ["true"],
    "feature.node.kubernetes.io/pci-0302_10de.present": ["true"],
    "feature.node.kubernetes.io/pci-0300_10de.present": ["true"],
    "feature.node.kubernetes.io/cpu-model.vendor_id": ["NVIDIA"],
    "nvidia.com/gpu.present": ["true"],
}


def test_dra_values_land_where_the_drivers_plugin_runs(rendered: dict[str, Rendered]) -> None:
    """ci/dra-values.yaml: the agent selects the nodes NVIDIA's DRA driver's kubelet plugin
    selects (GFD's label alone would miss a node without the GPU Operator) and reads DRA
    claims through the pod-resources folder it already mounts: no RBAC, no token, no CDI."""
    r = rendered["dra-values"]
    pod = _pod(r)
    assert "nodeSelector" not in pod
    terms = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"
    ]
    assert all(len(term["matchExpressions"]) == 1 for term in terms)  # ORed, one label each
    selected = {
        e["key"]: e["values"]
        for term in terms
        for e in term["matchExpressions"]
        if e["operator"] == "In"
    }
    assert selected == DRA_DRIVER_NODE_LABELS
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in pod[
        "tolerations"
    ]
    agent = _container(pod, "agent")
    mounts = {m["name"]: m for m in agent["volumeMounts"]}
    assert mounts["pod-resources"] == {
        "name": "pod-resources",
        "mountPath": "/var/lib/kubelet/pod-resources",
        "readOnly": True,
    }
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes["pod-resources"]["hostPath"]["path"] == "/var/lib/kubelet/pod-resources"
    assert not [v for v in pod["volumes"] if "cdi" in str(v.get("hostPath", {}).get("path"))]
    assert pod["automountServiceAccountToken"] is False
    kinds = {obj["kind"] for obj in r.objects}
    assert not kinds & {"Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding"}
    _validate(r)


@pytest.mark.parametrize(
    ("name", "selector"),
    [
        ("default-values", {"nvidia.com/gpu.present": "true"}),
        ("nfd-values", {"feature.node.kubernetes.io/pci-10de.present": "true"}),
        ("gke-values", None),
        ("dra-values", None),
    ],
)
def test_node_selector_is_the_value_sets_own(
    rendered: dict[str, Rendered], name: str, selector: dict[str, str] | None
) -> None:
    """Helm merges a values map into the default one: a set that replaces GFD's label must
    null it, or the agent would need both labels (and never land on a GKE node)."""
    assert _pod(rendered[name]).get("nodeSelector") == selector
