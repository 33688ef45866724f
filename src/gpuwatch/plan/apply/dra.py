"""DRA's objects for the planned MIG and shared GPUs whose workloads hold their GPUs
through NVIDIA's DRA driver (`dra-claims.yaml`), in place of the device plugin's config.

A planned GPU is DRA's when every unit on it held its GPU through a claim of
`gpu.nvidia.com` over the lookback (`WorkloadNeed.dra`: the Prometheus source reads
`gpuwatch_gpu_pod_info`'s `resource` label); a node is when all its planned GPUs are.
Objects (`resource.k8s.io/v1`, GA in Kubernetes 1.34), with the names
kubernetes-sigs/dra-driver-nvidia-gpu gives them at commit 95932046
(`deployments/helm/.../templates/deviceclass-*.yaml`, `cmd/gpu-kubelet-plugin/mig.go`,
`api/nvidia.com/resource/v1beta1/`):

- each unit on a MIG GPU: a ResourceClaimTemplate in its namespace requesting one device
  of DeviceClass `mig.nvidia.com` whose `profile` attribute is the planned profile (a CEL
  selector on `device.attributes['gpu.nvidia.com'].profile`): one MIG device per pod;
- each shared GPU: ONE ResourceClaim in the units' namespace requesting one device of
  DeviceClass `gpu.nvidia.com`, with the driver's opaque `GpuConfig`
  (`resource.nvidia.com/v1beta1`) sharing it by `TimeSlicing` (or `MPS`); the pods of
  exactly the units the plan put together reference it (annotation `gpuwatch/units`),
  so the claim pins which pods share the GPU, which device-plugin time-slicing (any pod
  asking for `nvidia.com/gpu.shared` on the node) cannot.

A unit without one namespace that is a valid Kubernetes name, or units of several
namespaces on one GPU (a claim is namespaced: a pod references only claims of its own
namespace), get no object; `skipped` counts them. Whole GPUs keep what they request. No I/O.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Literal

from gpuwatch.kube.dra import NVIDIA_GPU_DRIVER
from gpuwatch.plan.apply.layout import Layout, Node, PlannedGpu
from gpuwatch.plan.apply.yaml_text import YamlValue, dump
from gpuwatch.plan.model import WorkloadNeed

RESOURCE_API_VERSION = "resource.k8s.io/v1"
GPU_DEVICE_CLASS = "gpu.nvidia.com"  # type == 'gpu' (deviceclass-gpu.yaml)
MIG_DEVICE_CLASS = "mig.nvidia.com"  # type == 'mig' (deviceclass-mig.yaml)
PARAMETERS_API_VERSION = "resource.nvidia.com/v1beta1"  # api.go: GroupName / Version
GPU_CONFIG_KIND = "GpuConfig"
UNITS_ANNOTATION = "gpuwatch/units"
NAME_MAX_CHARS = 63

DraSharing = Literal["TimeSlicing", "MPS"]

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_NOT_NAME = re.compile(r"[^a-z0-9]+")
_PROFILE = re.compile(r"^(\d+c\.)?\d+g\.\d+gb(\+[a-z]+)*$")


def is_dra(gpu: PlannedGpu) -> bool:
    """Every unit on the planned GPU held its GPU through a `gpu.nvidia.com` claim."""
    return bool(gpu.units) and all(unit.dra for unit in gpu.units)


def is_dra_node(node: Node) -> bool:
    """All the node's planned GPUs are DRA's (a node with none is not)."""
    return bool(node.gpus) and all(is_dra(gpu) for gpu in node.gpus)


def without_dra_nodes(layout: Layout) -> Layout:
    """The layout less its DRA nodes: what the device plugin's config is for."""
    return replace(layout, nodes=tuple(n for n in layout.nodes if not is_dra_node(n)))


def object_name(prefix: str, text: str, key: str) -> str:
    """A DNS-label name (at most 63 characters): `prefix`, `text` lower-cased with every
    other character as '-', and 8 hex digits of the SHA-1 of `key` so two units whose
    names differ only in what was replaced stay apart."""
    digest = hashlib.sha1(key.encode("utf-8", "surrogatepass")).hexdigest()[:8]  # noqa: S324 -- a name, not a secret
    body = _NOT_NAME.sub("-", f"{prefix}-{text}".lower()).strip("-")
    return body[: NAME_MAX_CHARS - 9].rstrip("-") + "-" + digest


def _namespace(units: tuple[WorkloadNeed, ...]) -> str | None:
    spaces = {unit.namespace for unit in units}
    if len(spaces) != 1:
        return None
    (space,) = spaces
    return space if space and len(space) <= NAME_MAX_CHARS and _DNS_LABEL.match(space) else None


def mig_claim_template(unit: WorkloadNeed, namespace: str, profile: str) -> dict[str, YamlValue]:
    """A ResourceClaimTemplate: one MIG device of `profile` per pod of `unit`."""
    expression = f"device.attributes['{NVIDIA_GPU_DRIVER}'].profile == '{profile}'"
    return {
        "apiVersion": RESOURCE_API_VERSION,
        "kind": "ResourceClaimTemplate",
        "metadata": {
            "name": object_name(f"gpuwatch-mig-{profile}", unit.label, unit.key),
            "namespace": namespace,
            "annotations": {UNITS_ANNOTATION: unit.label},
        },
        "spec": {
            "spec": {
                "devices": {
                    "requests": [
                        {
                            "name": "mig",
                            "exactly": {
                                "deviceClassName": MIG_DEVICE_CLASS,
                                "selectors": [{"cel": {"expression": expression}}],
                            },
                        }
                    ]
                }
            }
        },
    }


def gpu_config(sharing: DraSharing) -> dict[str, YamlValue]:
    """The driver's opaque GpuConfig sharing one GPU by `sharing` (its defaults)."""
    settings: dict[str, YamlValue] = (
        {"strategy": "TimeSlicing", "timeSlicingConfig": {"interval": "Default"}}
        if sharing == "TimeSlicing"
        else {"strategy": "MPS", "mpsConfig": {}}
    )
    return {"apiVersion": PARAMETERS_API_VERSION, "kind": GPU_CONFIG_KIND, "sharing": settings}


def shared_claim(
    gpu: PlannedGpu, namespace: str, name: str, sharing: DraSharing = "TimeSlicing"
) -> dict[str, YamlValue]:
    """ONE ResourceClaim for the units the plan put on `gpu`, shared by `sharing`."""
    return {
        "apiVersion": RESOURCE_API_VERSION,
        "kind": "ResourceClaim",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "annotations": {UNITS_ANNOTATION: " + ".join(unit.label for unit in gpu.units)},
        },
        "spec": {
            "devices": {
                "requests": [{"name": "gpu", "exactly": {"deviceClassName": GPU_DEVICE_CLASS}}],
                "config": [
                    {
                        "requests": ["gpu"],
                        "opaque": {"driver": NVIDIA_GPU_DRIVER, "parameters": gpu_config(sharing)},
                    }
                ],
            }
        },
    }


POD_CLAIM_NAME = "gpu"
"""The name a unit's pods give the claim in `spec.resourceClaims` (and their containers
in `resources.claims`)."""


@dataclass(frozen=True, slots=True)
class DraObjects:
    """The objects; each unit's entry of its pods' `spec.resourceClaims`, by unit key; how
    many MIG units or shared GPUs got none (namespace)."""

    objects: tuple[dict[str, YamlValue], ...]
    skipped: int
    pod_claims: dict[str, dict[str, str]]


def _metadata_name(obj: dict[str, YamlValue]) -> str:
    metadata = obj["metadata"]
    assert isinstance(metadata, dict)
    return str(metadata["name"])


def _dra_gpus(layout: Layout) -> Iterator[tuple[Node, int, PlannedGpu]]:
    for node in layout.nodes:
        if is_dra_node(node):
            for index, gpu in enumerate(node.gpus):
                yield node, index, gpu


def dra_objects(layout: Layout, sharing: DraSharing = "TimeSlicing") -> DraObjects:
    """Every DRA object of the plan's DRA nodes (module docstring)."""
    objects: list[dict[str, YamlValue]] = []
    pod_claims: dict[str, dict[str, str]] = {}
    skipped = 0
    for node, index, gpu in _dra_gpus(layout):
        placement = gpu.placement
        if placement.mode == "mig":
            by_key = {unit.key: unit for unit in gpu.units}
            for key, profile in zip(placement.units, placement.mig_profiles, strict=True):
                unit = by_key.get(key)
                space = None if unit is None else _namespace((unit,))
                if unit is None or space is None or not _PROFILE.match(profile):
                    skipped += 1
                    continue
                objects.append(mig_claim_template(unit, space, profile))
                pod_claims[unit.key] = {
                    "name": POD_CLAIM_NAME,
                    "resourceClaimTemplateName": _metadata_name(objects[-1]),
                }
        elif placement.mode == "shared" and len(gpu.units) > 1:
            space = _namespace(gpu.units)
            if space is None:
                skipped += 1
                continue
            keys = ",".join(unit.key for unit in gpu.units)
            name = object_name("gpuwatch-shared", f"{node.name}-{index}", keys)
            objects.append(shared_claim(gpu, space, name, sharing))
            for unit in gpu.units:
                pod_claims[unit.key] = {"name": POD_CLAIM_NAME, "resourceClaimName": name}
    return DraObjects(tuple(objects), skipped, pod_claims)


def render(layout: Layout, sharing: DraSharing = "TimeSlicing") -> str:
    """`dra-claims.yaml`: a v1 List of the objects (`kubectl apply -f` takes it)."""
    found = dra_objects(layout, sharing)
    document: dict[str, YamlValue] = {
        "apiVersion": "v1",
        "kind": "List",
        "items": list(found.objects),
    }
    return dump(
        document,
        (
            "gpuwatch plan: DRA claims (resource.k8s.io/v1) for the MIG and shared GPUs of",
            "nodes whose workloads hold GPUs through NVIDIA's DRA driver (gpu.nvidia.com).",
            "Each unit's pods reference its claim template, or its GPU's shared claim, in",
            "spec.resourceClaims; the gpuwatch/units annotation names the units.",
            f"Units or shared GPUs without one valid namespace (no object): {found.skipped}",
        ),
    )
