"""The Pod Security Standards "baseline" profile as checks on a pod spec.

From https://kubernetes.io/docs/concepts/security/pod-security-standards/ (baseline):
HostProcess, host namespaces (hostNetwork, hostPID, hostIPC), privileged containers,
capabilities beyond the baseline list, hostPath volumes, host ports, AppArmor,
SELinux, /proc mount type, seccomp Unconfined, unsafe sysctls. Each violation is one
string naming the field, so a test can say exactly which value set needs which exception.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

BASELINE_CAPABILITIES = frozenset(
    {
        "AUDIT_WRITE",
        "CHOWN",
        "DAC_OVERRIDE",
        "FOWNER",
        "FSETID",
        "KILL",
        "MKNOD",
        "NET_BIND_SERVICE",
        "SETFCAP",
        "SETGID",
        "SETPCAP",
        "SETUID",
        "SYS_CHROOT",
    }
)
SAFE_SYSCTLS = frozenset(
    {
        "kernel.shm_rmid_forced",
        "net.ipv4.ip_local_port_range",
        "net.ipv4.ip_unprivileged_port_start",
        "net.ipv4.tcp_syncookies",
        "net.ipv4.ping_group_range",
        "net.ipv4.ip_local_reserved_ports",
        "net.ipv4.tcp_keepalive_time",
        "net.ipv4.tcp_fin_timeout",
        "net.ipv4.tcp_keepalive_intvl",
        "net.ipv4.tcp_keepalive_probes",
    }
)
SELINUX_TYPES = frozenset(
    {"", "container_t", "container_init_t", "container_kvm_t", "container_engine_t"}
)
CONTAINER_LISTS = ("initContainers", "containers", "ephemeralContainers")


def _security_contexts(pod: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    yield "spec.securityContext", pod.get("securityContext") or {}
    for kind in CONTAINER_LISTS:
        for container in pod.get(kind) or []:
            yield (
                f"spec.{kind}[{container['name']}].securityContext",
                container.get("securityContext") or {},
            )


def baseline_violations(pod: dict[str, Any]) -> list[str]:
    """Every field of a pod spec that the baseline profile refuses."""
    found: list[str] = []
    for field in ("hostNetwork", "hostPID", "hostIPC"):
        if pod.get(field):
            found.append(f"spec.{field}")
    for name, context in _security_contexts(pod):
        if (context.get("windowsOptions") or {}).get("hostProcess"):
            found.append(f"{name}.windowsOptions.hostProcess")
        if context.get("privileged"):
            found.append(f"{name}.privileged")
        added = set((context.get("capabilities") or {}).get("add") or [])
        found += [
            f"{name}.capabilities.add: {cap}" for cap in sorted(added - BASELINE_CAPABILITIES)
        ]
        if context.get("procMount", "Default") != "Default":
            found.append(f"{name}.procMount")
        if (context.get("seccompProfile") or {}).get("type") == "Unconfined":
            found.append(f"{name}.seccompProfile.type")
        apparmor = (context.get("appArmorProfile") or {}).get("type")
        if apparmor not in (None, "RuntimeDefault", "Localhost"):
            found.append(f"{name}.appArmorProfile.type")
        selinux = context.get("seLinuxOptions") or {}
        if selinux.get("type", "") not in SELINUX_TYPES or "user" in selinux or "role" in selinux:
            found.append(f"{name}.seLinuxOptions")
    for sysctl in (pod.get("securityContext") or {}).get("sysctls") or []:
        if sysctl["name"] not in SAFE_SYSCTLS:
            found.append(f"spec.securityContext.sysctls: {sysctl['name']}")
    for volume in pod.get("volumes") or []:
        if "hostPath" in volume:
            found.append(f"spec.volumes[{volume['name']}].hostPath")
    for kind in CONTAINER_LISTS:
        for container in pod.get(kind) or []:
            for port in container.get("ports") or []:
                if port.get("hostPort"):
                    found.append(f"spec.{kind}[{container['name']}].ports.hostPort")
    return found
