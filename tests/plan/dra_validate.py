"""A structural validator of NVIDIA's DRA driver's opaque claim configuration, written from
the driver's own Go types (kubernetes-sigs/dra-driver-nvidia-gpu at commit
95932046683719c43b6a0dd9613c2e5aad5d6703, `api/nvidia.com/resource/v1beta1/`):

- api.go: the group `resource.nvidia.com`, version `v1beta1`, kinds GpuConfig,
  MigDeviceConfig, VfioDeviceConfig, ...; configs are decoded by `StrictDecoder`
  (`SerializerOptions{Strict: true}`): an unknown or duplicate field is an error;
- gpuconfig.go: `GpuConfig{TypeMeta, Sharing *GpuSharing "sharing,omitempty"}`;
- sharing.go: `GpuSharing{Strategy "strategy", TimeSlicingConfig "timeSlicingConfig",
  MpsConfig "mpsConfig"}`, strategies `TimeSlicing` and `MPS`; `GetTimeSlicingConfig`
  refuses an mpsConfig with TimeSlicing and `GetMpsConfig` a timeSlicingConfig with MPS;
  `TimeSlicingConfig{Interval "interval"}`; `MpsConfig{defaultActiveThreadPercentage
  (*int), defaultPinnedDeviceMemoryLimit (Quantity), defaultPerDevicePinnedMemoryLimit
  (map of Quantity), multiUser (*bool)}`;
- validate.go: the strategy must be one of the two, and its feature gate on
  (`TimeSlicingSettings` for TimeSlicing, `MPSSupport` for MPS: both alpha and off by
  default, pkg/featuregates/featuregates.go); the interval one of Default, Short, Medium,
  Long; the active thread percentage within 0-100.

`validate_gpu_config` returns the problems, as "path: what" (empty: valid);
`feature_gates` the driver feature gates a valid config needs.
"""

from __future__ import annotations

import re
from typing import Any

API_VERSION = "resource.nvidia.com/v1beta1"
DRIVER = "gpu.nvidia.com"
STRATEGY_GATES = {"TimeSlicing": "TimeSlicingSettings", "MPS": "MPSSupport"}
INTERVALS = ("Default", "Short", "Medium", "Long")
_QUANTITY = re.compile(r"^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+|[KMGTPE]i|[numkMGTPE])?$")
_MPS_FIELDS = {
    "defaultActiveThreadPercentage",
    "defaultPinnedDeviceMemoryLimit",
    "defaultPerDevicePinnedMemoryLimit",
    "multiUser",
}


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _unknown(doc: dict[str, Any], known: set[str], path: str) -> list[str]:
    return [f"{path}.{name}: unknown field (strict decoding)" for name in doc if name not in known]


def _mps(config: Any, path: str) -> list[str]:
    if not isinstance(config, dict):
        return [f"{path}: must be an object"]
    problems = _unknown(config, _MPS_FIELDS, path)
    percent = config.get("defaultActiveThreadPercentage")
    if percent is not None and (not _is_int(percent) or not 0 <= percent <= 100):
        problems.append(f"{path}.defaultActiveThreadPercentage: an integer 0-100")
    limit = config.get("defaultPinnedDeviceMemoryLimit")
    if limit is not None and not (isinstance(limit, str) and _QUANTITY.match(limit)):
        problems.append(f"{path}.defaultPinnedDeviceMemoryLimit: a quantity")
    per_device = config.get("defaultPerDevicePinnedMemoryLimit")
    if per_device is not None and not (
        isinstance(per_device, dict)
        and all(isinstance(v, str) and _QUANTITY.match(v) for v in per_device.values())
    ):
        problems.append(f"{path}.defaultPerDevicePinnedMemoryLimit: a map of quantities")
    user = config.get("multiUser")
    if user is not None and not isinstance(user, bool):
        problems.append(f"{path}.multiUser: a boolean")
    return problems


def _sharing(sharing: Any) -> list[str]:
    path = "sharing"
    if not isinstance(sharing, dict):
        return [f"{path}: must be an object"]
    problems = _unknown(sharing, {"strategy", "timeSlicingConfig", "mpsConfig"}, path)
    strategy = sharing.get("strategy")
    if strategy not in STRATEGY_GATES:
        return [*problems, f"{path}.strategy: one of {sorted(STRATEGY_GATES)}"]
    if strategy == "TimeSlicing":
        if "mpsConfig" in sharing:
            problems.append(f"{path}.mpsConfig: not with the TimeSlicing strategy")
        config = sharing.get("timeSlicingConfig")
        if config is not None:
            if not isinstance(config, dict):
                return [*problems, f"{path}.timeSlicingConfig: must be an object"]
            problems += _unknown(config, {"interval"}, f"{path}.timeSlicingConfig")
            if config.get("interval", "Default") not in INTERVALS:
                problems.append(f"{path}.timeSlicingConfig.interval: one of {list(INTERVALS)}")
    else:
        if "timeSlicingConfig" in sharing:
            problems.append(f"{path}.timeSlicingConfig: not with the MPS strategy")
        if sharing.get("mpsConfig") is not None:
            problems += _mps(sharing["mpsConfig"], f"{path}.mpsConfig")
    return problems


def validate_gpu_config(doc: Any) -> list[str]:
    """Problems of an opaque `parameters` object meant as the driver's GpuConfig."""
    if not isinstance(doc, dict):
        return ["parameters: must be an object"]
    problems = _unknown(doc, {"apiVersion", "kind", "sharing"}, "parameters")
    if doc.get("apiVersion") != API_VERSION:
        problems.append(f"apiVersion: must be {API_VERSION}")
    if doc.get("kind") != "GpuConfig":
        problems.append("kind: must be GpuConfig")
    if doc.get("sharing") is not None:
        problems += _sharing(doc["sharing"])
    return problems


def feature_gates(doc: dict[str, Any]) -> set[str]:
    """The driver feature gates a valid GpuConfig needs on (validate.go)."""
    sharing = doc.get("sharing") or {}
    gate = STRATEGY_GATES.get(sharing.get("strategy", ""))
    return {gate} if gate else set()
