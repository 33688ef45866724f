"""The chart renders, lints strictly and validates for every ci/ value set; its pods
keep the security posture docs/kubernetes.md describes."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

import helm_python
import kubernetes_validate
import pytest

from gpuwatch.config import Config
from tests.helm.chart import CHART, NAMESPACE, Rendered, value_sets
from tests.helm.pss import baseline_violations

VALUE_SETS = sorted(value_sets())
# kubeVersion ">=1.27.0-0" (CronJob timeZone is GA in 1.27); 1.37 is the newest schema
# kubernetes-validate bundles.
KUBERNETES_VERSIONS = ("1.27.0", "1.37.0")
OPERATOR_GROUP = "monitoring.coreos.com/v1"
NO_VALUE_SETS_EXPECTED = {"baseline-values", "default-values", "files-values", "full-values"}


def _pod_spec(obj: dict[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = obj["spec"]["template"]["spec"]
    return spec


def _agent(rendered: Rendered) -> dict[str, Any]:
    agent: dict[str, Any]
    (agent,) = [
        c for c in _pod_spec(rendered.one("DaemonSet"))["containers"] if c["name"] == "agent"
    ]
    return agent


def test_ci_has_the_documented_value_sets() -> None:
    assert set(VALUE_SETS) >= NO_VALUE_SETS_EXPECTED


@pytest.mark.parametrize("name", VALUE_SETS)
def test_strict_lint_is_clean(chart: Path, name: str) -> None:
    result = helm_python.lint(chart, value_sets()[name], strict=True, namespace=NAMESPACE)
    assert result["errors"] == []
    # severity 1 is INFO ("icon is recommended"); warnings (2) and errors fail.
    assert [m for m in result["messages"] if m["severity"] > 1] == []


@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
@pytest.mark.parametrize("name", VALUE_SETS)
def test_objects_validate_strictly(rendered: dict[str, Rendered], name: str, version: str) -> None:
    checked = 0
    for obj in rendered[name].objects:
        if obj["apiVersion"] == OPERATOR_GROUP:
            continue  # CRDs: no bundled schema; test_operator_objects checks their shape
        kubernetes_validate.validate(obj, version, strict=True)
        checked += 1
    assert checked >= 4


def test_a_field_typo_is_caught_by_the_validator(rendered: dict[str, Rendered]) -> None:
    ds = rendered["full-values"].one("DaemonSet")
    spec = _pod_spec(ds)
    spec["hostPid"] = True
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(ds, KUBERNETES_VERSIONS[0], strict=True)
    del spec["hostPid"]


def test_default_daemonset_posture(rendered: dict[str, Rendered]) -> None:
    r = rendered["default-values"]
    pod = _pod_spec(r.one("DaemonSet"))
    agent = _agent(r)
    env = {e["name"]: e.get("value") for e in agent["env"]}
    assert pod["runtimeClassName"] == "nvidia"
    assert env["NVIDIA_VISIBLE_DEVICES"] == "all"
    assert env["NVIDIA_DRIVER_CAPABILITIES"] == "utility"
    assert pod["nodeSelector"] == {"nvidia.com/gpu.present": "true"}
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in pod[
        "tolerations"
    ]
    assert "hostPID" not in pod
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] != 0
    context = agent["securityContext"]
    assert context["readOnlyRootFilesystem"] is True
    assert context["allowPrivilegeEscalation"] is False
    assert context["capabilities"] == {"drop": ["ALL"]}
    assert "cpu" not in agent["resources"]["limits"]
    assert agent["resources"]["limits"] == {"memory": "192Mi"}
    assert agent["resources"]["requests"]["memory"] == "96Mi"
    mounts = {m["name"]: m for m in agent["volumeMounts"]}
    assert mounts["pod-resources"]["readOnly"] is True
    assert mounts["pod-resources"]["mountPath"] == "/var/lib/kubelet/pod-resources"
    assert mounts["pod-logs"]["readOnly"] is True
    # NVML's host PIDs map to pods through the host's /proc, without hostPID
    assert mounts["host-proc"] == {"name": "host-proc", "mountPath": "/host/proc", "readOnly": True}
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes["pod-resources"]["hostPath"]["path"] == "/var/lib/kubelet/pod-resources"
    assert volumes["host-proc"]["hostPath"] == {"path": "/proc", "type": "Directory"}
    assert volumes["state"]["hostPath"] == {
        "path": "/var/lib/gpuwatch",
        "type": "DirectoryOrCreate",
    }


@pytest.mark.parametrize("name", VALUE_SETS)
def test_no_privileges_in_any_value_set(rendered: dict[str, Rendered], name: str) -> None:
    for obj in rendered[name].objects:
        if obj["kind"] not in ("DaemonSet", "CronJob", "Pod"):
            continue
        pod = (
            obj["spec"]["jobTemplate"]["spec"]["template"]["spec"]
            if obj["kind"] == "CronJob"
            else (obj["spec"] if obj["kind"] == "Pod" else _pod_spec(obj))
        )
        assert "hostNetwork" not in pod
        for container in pod.get("initContainers", []) + pod["containers"]:
            context = container["securityContext"]
            assert not context.get("privileged")
            assert context["allowPrivilegeEscalation"] is False
            assert context["readOnlyRootFilesystem"] is True
            assert set(context["capabilities"].get("add", [])) <= {"CHOWN"}
            assert "SYS_ADMIN" not in str(container)


# Which value sets meet Pod Security "baseline", and exactly what the others need
# (docs/kubernetes.md, "Security posture", lists the same).
BASELINE_EXCEPTIONS = {
    "baseline-values": [],
    "default-values": [
        "spec.volumes[state].hostPath",
        "spec.volumes[pod-resources].hostPath",
        "spec.volumes[pod-logs].hostPath",
        "spec.volumes[host-proc].hostPath",
    ],
    "full-values": [
        "spec.volumes[state].hostPath",
        "spec.volumes[pod-resources].hostPath",
        "spec.volumes[pod-logs].hostPath",
        "spec.volumes[host-proc].hostPath",
    ],
}


@pytest.mark.parametrize("name", sorted(BASELINE_EXCEPTIONS))
def test_pod_security_baseline(rendered: dict[str, Rendered], name: str) -> None:
    pod = _pod_spec(rendered[name].one("DaemonSet"))
    assert baseline_violations(pod) == BASELINE_EXCEPTIONS[name]


def test_baseline_checker_catches_what_baseline_forbids() -> None:
    pod = {
        "hostNetwork": True,
        "securityContext": {"sysctls": [{"name": "kernel.msgmax", "value": "1"}]},
        "containers": [
            {
                "name": "c",
                "securityContext": {
                    "privileged": True,
                    "capabilities": {"add": ["SYS_ADMIN", "CHOWN"]},
                },
                "ports": [{"containerPort": 1, "hostPort": 1}],
            }
        ],
    }
    assert baseline_violations(pod) == [
        "spec.hostNetwork",
        "spec.containers[c].securityContext.privileged",
        "spec.containers[c].securityContext.capabilities.add: SYS_ADMIN",
        "spec.securityContext.sysctls: kernel.msgmax",
        "spec.containers[c].ports.hostPort",
    ]


@pytest.mark.parametrize("name", VALUE_SETS)
def test_config_toml_is_a_valid_agent_config(rendered: dict[str, Rendered], name: str) -> None:
    r = rendered[name]
    (cm,) = [c for c in r.of_kind("ConfigMap") if "config.toml" in c.get("data", {})]
    data = tomllib.loads(cm["data"]["config.toml"])
    assert data["agent"]["state_dir"] == "/var/lib/gpuwatch"
    port = _agent(r)["ports"][0]["containerPort"]
    assert data["exporter"]["listen"] == f"0.0.0.0:{port}"
    values = value_sets()[name]
    attribution = values.get("attribution", {})
    if attribution.get("enabled", True):
        kube = data["kubernetes"]
        assert kube["enabled"] is True
        assert kube["pod_resources_socket"] == "/var/lib/kubelet/pod-resources/kubelet.sock"
        assert kube["pod_logs_dir"] == "/var/log/pods"
        host_proc = attribution.get("hostProc", "/proc")
        assert kube.get("proc_root") == ("/host/proc" if host_proc else None)
        mounts = {m["mountPath"] for m in _agent(r)["volumeMounts"]}
        assert ("/host/proc" in mounts) == bool(host_proc)
    else:
        assert "kubernetes" not in data
    # The hook: [kubernetes] is checked by the agent's own model once config.py has it.
    if "kubernetes" not in Config.model_fields:
        data.pop("kubernetes", None)
    Config.model_validate(data)


def test_user_config_reaches_the_toml(rendered: dict[str, Rendered]) -> None:
    (cm,) = [c for c in rendered["full-values"].of_kind("ConfigMap") if "config.toml" in c["data"]]
    data = tomllib.loads(cm["data"]["config.toml"])
    assert data["alerts"]["slack"]["mention"] == "<!here>"
    assert data["workloads"][0]["process_name"] == "*vllm*"
    assert data["exporter"]["dcgm_compat"] is True


def test_secrets_come_from_existing_secrets(rendered: dict[str, Rendered]) -> None:
    env = {e["name"]: e for e in _agent(rendered["full-values"])["env"]}
    assert (
        env["GPUWATCH_SLACK_WEBHOOK_URL"]["valueFrom"]["secretKeyRef"]["name"] == "gpuwatch-slack"
    )
    assert env["AWS_SECRET_ACCESS_KEY"]["valueFrom"]["secretKeyRef"] == {
        "name": "gpuwatch-aws",
        "key": "AWS_SECRET_ACCESS_KEY",
    }
    files = rendered["files-values"]
    agent = _agent(files)
    mounts = {m["name"]: m for m in agent["volumeMounts"]}
    assert mounts["slack"]["readOnly"] is True
    (cm,) = [c for c in files.of_kind("ConfigMap") if "config.toml" in c["data"]]
    slack_file = tomllib.loads(cm["data"]["config.toml"])["alerts"]["slack"]["webhook_url_file"]
    assert slack_file.startswith(mounts["slack"]["mountPath"] + "/")
    aws_env = {e["name"]: e.get("value") for e in agent["env"]}
    assert aws_env["AWS_SHARED_CREDENTIALS_FILE"].startswith(mounts["aws"]["mountPath"] + "/")
    assert not [o for r in rendered.values() for o in r.objects if o["kind"] == "Secret"]


def test_monitors_honor_labels_and_are_opt_in(rendered: dict[str, Rendered]) -> None:
    assert not [o for o in rendered["default-values"].objects if o["apiVersion"] == OPERATOR_GROUP]
    selector = rendered["full-values"].one("DaemonSet")["spec"]["selector"]["matchLabels"]
    sm = rendered["full-values"].one("ServiceMonitor")
    assert sm["spec"]["endpoints"][0]["honorLabels"] is True
    assert sm["spec"]["selector"]["matchLabels"] == selector
    assert sm["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    pm = rendered["files-values"].one("PodMonitor")
    assert pm["spec"]["podMetricsEndpoints"][0]["honorLabels"] is True
    assert pm["spec"]["podMetricsEndpoints"][0]["port"] == "metrics"


def test_helm_test_pod_is_not_adopted_by_the_daemonset(rendered: dict[str, Rendered]) -> None:
    r = rendered["default-values"]
    (pod,) = r.of_kind("Pod")
    assert pod["metadata"]["annotations"]["helm.sh/hook"] == "test"
    selector = r.one("DaemonSet")["spec"]["selector"]["matchLabels"]
    labels = pod["metadata"]["labels"]
    assert not all(labels.get(k) == v for k, v in selector.items())
    assert r.one("Service")["spec"]["selector"] == selector


def test_report_cronjob(rendered: dict[str, Rendered]) -> None:
    job = rendered["full-values"].one("CronJob")
    assert job["spec"]["schedule"] == "0 2 1 * *"
    assert job["spec"]["timeZone"] == "Etc/UTC"
    (container,) = job["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"]
    script = container["args"][0]
    assert script.startswith("exec gpuwatch report --month ")
    assert '--prometheus "$$GPUWATCH_REPORT_PROMETHEUS_URL"' in script
    assert script.endswith("--out /reports --slack")
    assert not rendered["default-values"].of_kind("CronJob")


def test_notes_name_the_namespace_label(rendered: dict[str, Rendered]) -> None:
    notes = rendered["default-values"].manifests["gpuwatch/templates/NOTES.txt"]
    assert "pod-security.kubernetes.io/enforce=privileged" in notes
    assert "baseline" not in rendered["baseline-values"].manifests["gpuwatch/templates/NOTES.txt"]


def test_chart_files_are_links_to_the_repository_folders() -> None:
    assert (CHART / "files/prometheus").readlink() == Path("../../../prometheus")
    assert (CHART / "files/dashboards").readlink() == Path("../../../../dashboards")
