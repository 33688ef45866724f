"""Builds the chart's values.schema.json (draft-07, `additionalProperties: false`).

The chart's own keys are written here; the `config` map's schema is generated from
gpuwatch's pydantic config models, so a typo in `config:` fails `helm install` with the
same rules the agent applies. `python -m tests.helm.schema` rewrites the file;
tests/helm/test_schema.py fails when the file is stale (for example after a new config
section): rerun the command then.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from gpuwatch.config import Config

SCHEMA_PATH = Path(__file__).resolve().parents[2] / "deploy/helm/gpuwatch/values.schema.json"

Schema = dict[str, Any]


def obj(properties: Schema, required: list[str] | None = None) -> Schema:
    """A closed object: only the listed keys."""
    out: Schema = {"type": "object", "additionalProperties": False, "properties": properties}
    if required:
        out["required"] = required
    return out


def string_map() -> Schema:
    """Labels, annotations, node selectors: names are data, values strings."""
    return {"type": "object", "additionalProperties": {"type": "string"}}


STR: Schema = {"type": "string"}
BOOL: Schema = {"type": "boolean"}
PORT: Schema = {"type": "integer", "minimum": 1, "maximum": 65535}
QUANTITY: Schema = {"type": ["string", "number"]}
DURATION: Schema = {"type": "string", "pattern": "^([0-9]+(ms|s|m|h))+$"}


def resources() -> Schema:
    """Container resources: requests and limits of cpu, memory, ephemeral-storage."""
    amounts = obj({"cpu": QUANTITY, "memory": QUANTITY, "ephemeral-storage": QUANTITY})
    return obj({"requests": amounts, "limits": amounts})


def pod_security_context() -> Schema:
    """The pod-level securityContext fields the chart passes through."""
    ints = {"type": "integer", "minimum": 0}
    return obj(
        {
            "runAsNonRoot": BOOL,
            "runAsUser": ints,
            "runAsGroup": ints,
            "fsGroup": ints,
            "fsGroupChangePolicy": {"enum": ["OnRootMismatch", "Always"]},
            "supplementalGroups": {"type": "array", "items": ints},
            "seccompProfile": seccomp(),
            "seLinuxOptions": se_linux(),
            "sysctls": {"type": "array", "items": obj({"name": STR, "value": STR})},
        },
        required=["runAsUser", "runAsGroup"],
    )


def seccomp() -> Schema:
    """seccompProfile: RuntimeDefault or a Localhost profile (Unconfined is refused)."""
    return obj({"type": {"enum": ["RuntimeDefault", "Localhost"]}, "localhostProfile": STR})


def se_linux() -> Schema:
    """seLinuxOptions."""
    return obj({"level": STR, "role": STR, "type": STR, "user": STR})


def container_security_context() -> Schema:
    """The agent container's securityContext: no privileged, no added capabilities."""
    return obj(
        {
            "allowPrivilegeEscalation": BOOL,
            "readOnlyRootFilesystem": BOOL,
            "runAsNonRoot": BOOL,
            "runAsUser": {"type": "integer", "minimum": 0},
            "runAsGroup": {"type": "integer", "minimum": 0},
            "capabilities": obj(
                {"drop": {"type": "array", "items": STR}, "add": {"type": "array", "maxItems": 0}}
            ),
            "seccompProfile": seccomp(),
            "seLinuxOptions": se_linux(),
        }
    )


# Volume sources of a Kubernetes Volume (1.27-1.37): their content is checked by the API
# server; the schema closes the Volume itself so a misspelt source fails the install.
VOLUME_SOURCES = (
    "awsElasticBlockStore",
    "azureDisk",
    "azureFile",
    "cephfs",
    "cinder",
    "configMap",
    "csi",
    "downwardAPI",
    "emptyDir",
    "ephemeral",
    "fc",
    "flexVolume",
    "flocker",
    "gcePersistentDisk",
    "gitRepo",
    "glusterfs",
    "hostPath",
    "image",
    "iscsi",
    "nfs",
    "persistentVolumeClaim",
    "photonPersistentDisk",
    "portworxVolume",
    "projected",
    "quobyte",
    "rbd",
    "scaleIO",
    "secret",
    "storageos",
    "vsphereVolume",
)


def volume() -> Schema:
    """extraVolumes[]: a Kubernetes Volume (name and one source)."""
    sources: Schema = {name: {"type": "object"} for name in VOLUME_SOURCES}
    return obj({"name": STR, **sources}, required=["name"])


def volume_mount() -> Schema:
    """extraVolumeMounts[]: a Kubernetes VolumeMount."""
    return obj(
        {
            "name": STR,
            "mountPath": {"type": "string", "pattern": "^/"},
            "subPath": STR,
            "subPathExpr": STR,
            "readOnly": BOOL,
            "recursiveReadOnly": {"enum": ["Disabled", "IfPossible", "Enabled"]},
            "mountPropagation": {"enum": ["None", "HostToContainer", "Bidirectional"]},
        },
        required=["name", "mountPath"],
    )


def monitor() -> Schema:
    """ServiceMonitor / PodMonitor switches."""
    return obj(
        {"enabled": BOOL, "interval": DURATION, "scrapeTimeout": DURATION, "labels": string_map()}
    )


def chart_schema() -> Schema:
    """Every key of values.yaml."""
    toleration = obj(
        {
            "key": STR,
            "operator": {"enum": ["Exists", "Equal"]},
            "value": STR,
            "effect": {"enum": ["NoSchedule", "PreferNoSchedule", "NoExecute", ""]},
            "tolerationSeconds": {"type": "integer"},
        }
    )
    env_var = {
        "type": "object",
        "required": ["name"],
        "properties": {"name": STR, "value": STR, "valueFrom": {"type": "object"}},
        "additionalProperties": False,
    }
    return obj(
        {
            "image": obj(
                {
                    "repository": {"type": "string", "minLength": 1},
                    "tag": STR,
                    "pullPolicy": {"enum": ["Always", "IfNotPresent", "Never"]},
                },
                required=["repository"],
            ),
            "imagePullSecrets": {"type": "array", "items": obj({"name": STR}, ["name"])},
            "nameOverride": STR,
            "fullnameOverride": STR,
            "runtimeClassName": STR,
            "nvidiaEnv": BOOL,
            "nodeSelector": string_map(),
            "affinity": {
                "type": "object",
                "description": "a Kubernetes Affinity, checked by the API server",
                "properties": {
                    "nodeAffinity": {"type": "object"},
                    "podAffinity": {"type": "object"},
                    "podAntiAffinity": {"type": "object"},
                },
                "additionalProperties": False,
            },
            "tolerations": {"type": "array", "items": toleration},
            "priorityClassName": STR,
            "podAnnotations": string_map(),
            "podLabels": string_map(),
            "updateStrategy": obj(
                {
                    "type": {"enum": ["RollingUpdate", "OnDelete"]},
                    "rollingUpdate": obj({"maxUnavailable": QUANTITY, "maxSurge": QUANTITY}),
                }
            ),
            "serviceAccount": obj(
                {
                    "create": BOOL,
                    "name": STR,
                    "annotations": string_map(),
                    "automountToken": BOOL,
                }
            ),
            "resources": resources(),
            "podSecurityContext": pod_security_context(),
            "securityContext": container_security_context(),
            "port": PORT,
            "state": obj({"hostPath": STR, "chown": BOOL}),
            "attribution": obj(
                {
                    "enabled": BOOL,
                    "podResourcesDir": {"type": "string", "pattern": "^/"},
                    "podLogsDir": {"type": "string", "pattern": "^/"},
                    "hostProc": {"type": "string", "pattern": "^(/.*)?$"},
                }
            ),
            "slack": obj({"existingSecret": STR, "key": STR, "mode": {"enum": ["env", "file"]}}),
            "aws": obj(
                {
                    "existingSecret": STR,
                    "mode": {"enum": ["env", "file"]},
                    "accessKeyIdKey": STR,
                    "secretAccessKeyKey": STR,
                    "credentialsFileKey": STR,
                }
            ),
            "driver": obj(
                {
                    "hostPath": {"type": "string", "pattern": "^(/.*)?$"},
                    "mountPath": {"type": "string", "pattern": "^/"},
                }
            ),
            "extraEnv": {"type": "array", "items": env_var},
            "extraVolumes": {"type": "array", "items": volume()},
            "extraVolumeMounts": {"type": "array", "items": volume_mount()},
            "config": {"$ref": "#/definitions/Config"},
            "serviceMonitor": monitor(),
            "podMonitor": monitor(),
            "prometheusRule": obj(
                {
                    "enabled": BOOL,
                    "labels": string_map(),
                    "fleetIdleSpendThresholdUsdPerHour": {
                        "type": ["number", "null"],
                        "exclusiveMinimum": 0,
                    },
                }
            ),
            "dashboards": obj(
                {"enabled": BOOL, "labels": string_map(), "annotations": string_map()}
            ),
            "report": obj(
                {
                    "enabled": BOOL,
                    "schedule": STR,
                    "timeZone": STR,
                    "prometheusUrl": STR,
                    "formats": {
                        "type": "array",
                        "items": {"enum": ["html", "md", "csv", "json", "pdf"]},
                        "minItems": 1,
                        "uniqueItems": True,
                    },
                    "slack": BOOL,
                    "existingClaim": STR,
                    "resources": resources(),
                }
            ),
            "tests": obj({"image": obj({"repository": STR, "tag": STR})}),
            "global": {"type": "object"},
        }
    )


def _strip(node: Any) -> Any:
    """Drop pydantic's titles and defaults (noise in a values schema); keys of a
    `properties` map are field names and stay."""
    if isinstance(node, list):
        return [_strip(item) for item in node]
    if not isinstance(node, dict):
        return node
    out: Schema = {}
    for key, value in node.items():
        if key == "properties":
            out[key] = {name: _strip(field) for name, field in value.items()}
        elif key not in ("title", "default"):
            out[key] = _strip(value)
    return out


def config_definitions() -> Schema:
    """gpuwatch's config models as draft-07 definitions (`Config` is the root)."""
    generated = Config.model_json_schema(ref_template="#/definitions/{model}")
    definitions: Schema = generated.pop("$defs", {})
    definitions["Config"] = generated
    return {name: _strip(schema) for name, schema in sorted(definitions.items())}


def values_schema() -> Schema:
    """The whole values.schema.json."""
    schema: Schema = {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "title": "gpuwatch chart values",
    }
    schema.update(chart_schema())
    schema["definitions"] = config_definitions()
    return schema


def render() -> str:
    """The file's text."""
    return json.dumps(values_schema(), indent=2, sort_keys=False) + "\n"


def main() -> int:
    """Rewrite deploy/helm/gpuwatch/values.schema.json."""
    SCHEMA_PATH.write_text(render(), encoding="utf-8")
    sys.stdout.write(f"wrote {SCHEMA_PATH}\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
