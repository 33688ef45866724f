"""Structural validators of the two NVIDIA config formats the plan emits, written from
the tools' own Go types (read at the commits in tests/plan/apply_examples/SOURCES.md):

- mig-parted, api/spec/v1/spec.go (`Spec.UnmarshalJSON`, `MigConfigSpec.UnmarshalJSON`)
  and pkg/types (`MigConfig`, `ParseMigProfile`): `version` must be "v1"; `mig-configs`
  is a non-empty map of non-empty lists; an entry's fields are device-filter (a string
  or list of strings), devices ("all" or a list of GPU indices), mig-enabled (bool) and
  mig-devices (profile -> count >= 0), devices and mig-enabled required, mig-devices
  required when enabled and empty when not; no other field.
- the device plugin, api/config/v1 (config.go, flags.go, sharing.go, replicas.go,
  resources.go, consts.go): `version` "v1"; flags.migStrategy none | single | mixed;
  sharing.timeSlicing / sharing.mps with renameByDefault and failRequestsGreaterThanOne
  (bools) and a non-empty `resources` list of {name (nvidia.com/<DNS subdomain>, at most
  63 characters), rename, devices ("all", a count > 0 or a list), replicas (int >= 2)}.

Each returns the problems found, as "path: what" (an empty list: valid).
"""

from __future__ import annotations

import re
from typing import Any

_PROFILE = re.compile(r"^(\d+c\.)?\d+g\.\d+gb(\+[a-z]+)*$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_FLAGS = {
    "migStrategy", "failOnInitError", "mpsRoot", "nvidiaDriverRoot", "nvidiaDevRoot",
    "gdrcopyEnabled", "gdsEnabled", "mofedEnabled", "useNodeFeatureAPI",
    "deviceDiscoveryStrategy", "plugin", "gfd",
}  # fmt: skip
_PLUGIN_FLAGS = {
    "passDeviceSpecs", "deviceListStrategy", "deviceIDStrategy", "cdiAnnotationPrefix",
    "nvidiaCTKPath", "containerDriverRoot", "sharedDevicesAllocationPolicy",
}  # fmt: skip


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def validate_mig_parted(doc: Any) -> list[str]:
    """Problems of a mig-parted config file (module docstring)."""
    if not isinstance(doc, dict):
        return ["$: not a mapping"]
    errors = [f"$.{k}: unexpected field" for k in doc if k not in ("version", "mig-configs")]
    if doc.get("version") != "v1":
        errors.append(f"$.version: unknown version {doc.get('version')!r}")
    configs = doc.get("mig-configs")
    if not isinstance(configs, dict) or not configs:
        return [*errors, "$.mig-configs: at least one entry is required"]
    for name, entries in configs.items():
        where = f"$.mig-configs.{name}"
        if not isinstance(name, str):
            errors.append(f"{where}: the name is not a string")
        if not isinstance(entries, list) or not entries:
            errors.append(f"{where}: at least one entry is required")
            continue
        for i, entry in enumerate(entries):
            errors.extend(_mig_entry(entry, f"{where}[{i}]"))
    return errors


def _mig_entry(entry: Any, where: str) -> list[str]:
    if not isinstance(entry, dict):
        return [f"{where}: not a mapping"]
    allowed = ("device-filter", "devices", "mig-enabled", "mig-devices")
    errors = [f"{where}.{k}: unexpected field" for k in entry if k not in allowed]
    errors += [f"{where}.{k}: missing required field" for k in allowed[1:3] if k not in entry]
    devices = entry.get("devices")
    if (
        "devices" in entry
        and devices != "all"
        and not (isinstance(devices, list) and all(_is_int(d) and d >= 0 for d in devices))
    ):
        errors.append(f"{where}.devices: not 'all' nor a list of GPU indices: {devices!r}")
    flt = entry.get("device-filter")
    if "device-filter" in entry and not (
        isinstance(flt, str) or (isinstance(flt, list) and all(isinstance(f, str) for f in flt))
    ):
        errors.append(f"{where}.device-filter: not a string or a list of strings")
    enabled = entry.get("mig-enabled")
    if "mig-enabled" in entry and not isinstance(enabled, bool):
        errors.append(f"{where}.mig-enabled: not a bool")
    devs = entry.get("mig-devices")
    if enabled is True and devs is None:
        errors.append(f"{where}.mig-devices: required when mig-enabled is true")
    if enabled is False and devs:
        errors.append(f"{where}.mig-devices: MIG devices included when mig-enabled is false")
    if devs is not None:
        if not isinstance(devs, dict):
            return [*errors, f"{where}.mig-devices: not a mapping"]
        for profile, count in devs.items():
            if not isinstance(profile, str) or not _PROFILE.match(profile):
                errors.append(f"{where}.mig-devices: not a MIG profile: {profile!r}")
            if not _is_int(count) or count < 0:
                errors.append(f"{where}.mig-devices.{profile}: not a count >= 0: {count!r}")
    return errors


def validate_device_plugin(doc: Any) -> list[str]:
    """Problems of a device plugin config file (module docstring)."""
    if not isinstance(doc, dict):
        return ["$: not a mapping"]
    allowed = ("version", "flags", "resources", "sharing", "imex")
    errors = [f"$.{k}: unexpected field" for k in doc if k not in allowed]
    if doc.get("version", "v1") != "v1":
        errors.append(f"$.version: unknown version {doc.get('version')!r}")
    flags = doc.get("flags", {})
    if not isinstance(flags, dict):
        errors.append("$.flags: not a mapping")
    else:
        errors += [f"$.flags.{k}: unexpected field" for k in flags if k not in _FLAGS]
        if flags.get("migStrategy", "none") not in ("none", "single", "mixed"):
            errors.append(f"$.flags.migStrategy: {flags['migStrategy']!r}")
        if "failOnInitError" in flags and not isinstance(flags["failOnInitError"], bool):
            errors.append("$.flags.failOnInitError: not a bool")
        plugin = flags.get("plugin", {})
        if isinstance(plugin, dict):
            errors += [
                f"$.flags.plugin.{k}: unexpected field" for k in plugin if k not in _PLUGIN_FLAGS
            ]
    sharing = doc.get("sharing", {})
    if not isinstance(sharing, dict):
        return [*errors, "$.sharing: not a mapping"]
    for kind, replicated in sharing.items():
        if kind not in ("timeSlicing", "mps"):
            errors.append(f"$.sharing.{kind}: unexpected field")
            continue
        errors.extend(_replicated(replicated, f"$.sharing.{kind}"))
    return errors


def _replicated(spec: Any, where: str) -> list[str]:
    if not isinstance(spec, dict):
        return [f"{where}: not a mapping"]
    allowed = ("renameByDefault", "failRequestsGreaterThanOne", "resources")
    errors = [f"{where}.{k}: unexpected field" for k in spec if k not in allowed]
    errors += [
        f"{where}.{k}: not a bool"
        for k in allowed[:2]
        if k in spec and not isinstance(spec[k], bool)
    ]
    resources = spec.get("resources")
    if not isinstance(resources, list) or not resources:
        return [*errors, f"{where}.resources: no resources specified"]
    for i, resource in enumerate(resources):
        at = f"{where}.resources[{i}]"
        if not isinstance(resource, dict):
            errors.append(f"{at}: not a mapping")
            continue
        errors += [
            f"{at}.{k}: unexpected field"
            for k in resource
            if k not in ("name", "rename", "devices", "replicas")
        ]
        for key in ("name", "rename"):
            if key in resource and not _resource_name(resource[key]):
                errors.append(f"{at}.{key}: not a resource name: {resource[key]!r}")
        if "name" not in resource:
            errors.append(f"{at}: no resource name specified")
        replicas = resource.get("replicas")
        if isinstance(replicas, bool) or not (isinstance(replicas, int) and replicas >= 2):
            errors.append(f"{at}.replicas: number of replicas must be >= 2: {replicas!r}")
        devices = resource.get("devices", "all")
        if not (
            devices == "all"
            or (_is_int(devices) and devices > 0)
            or (isinstance(devices, list) and all(isinstance(d, (int, str)) for d in devices))
        ):
            errors.append(f"{at}.devices: {devices!r}")
    return errors


def _resource_name(name: Any) -> bool:
    if not isinstance(name, str):
        return False
    full = name if name.startswith("nvidia.com/") else "nvidia.com/" + name
    return len(full) <= 63 and bool(_DNS_SUBDOMAIN.match(full.split("/", 1)[1]))
