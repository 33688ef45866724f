"""`/proc/<pid>/cgroup` to the pod UID and container ID a process runs in.

Shapes (REFERENCE.md, "Kubernetes attribution"), for cgroup v1 (`N:controllers:path`
lines) and v2 (one `0::path` line):

- cgroupfs driver: `/kubepods/<qos>/pod<uid>/<container id>`, Guaranteed pods without
  the QoS level: `/kubepods/pod<uid>/<container id>`;
- systemd driver: `.../kubepods-<qos>-pod<uid_with_underscores>.slice/
  cri-containerd-<id>.scope` (also `crio-<id>.scope`, `docker-<id>.scope`);
- under a cgroup namespace, paths relative to the reader, with `../` parts.

The pod segment is matched anywhere in the path; the container ID is the segment
after it, with the runtime prefix and `.scope` suffix removed. Pure: no I/O.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_UID = r"[0-9a-f]{8}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{12}"
_POD = re.compile(rf"pod({_UID})(?:\.slice)?$")
_CONTAINER = re.compile(
    r"^(?:(?:cri-containerd|crio|docker|cri-o|containerd)-)?([0-9a-f]{64})(?:\.scope)?$"
)


@dataclass(frozen=True, slots=True)
class PodCgroup:
    """The pod (UID with dashes) and, when the path names one, the container ID."""

    pod_uid: str
    container_id: str | None


def parse_cgroup_path(path: str) -> PodCgroup | None:
    """The pod of one cgroup path, or None when the path is in no pod."""
    segments = [s for s in path.strip().split("/") if s and s not in (".", "..")]
    for i, segment in enumerate(segments):
        match = _POD.search(segment)
        if match is None:
            continue
        uid = match.group(1).replace("_", "-")
        container = None
        if i + 1 < len(segments):
            found = _CONTAINER.match(segments[i + 1])
            container = found.group(1) if found else None
        return PodCgroup(uid, container)
    return None


def parse_cgroup(text: str) -> PodCgroup | None:
    """The pod of a process from its `/proc/<pid>/cgroup` text; None when it is in no
    pod. The v2 line is preferred; else the first v1 line that names a pod (one with a
    container ID over one without)."""
    found: list[PodCgroup] = []
    for line in text.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        ref = parse_cgroup_path(parts[2])
        if ref is None:
            continue
        if parts[0] == "0" and parts[1] == "":
            return ref
        found.append(ref)
    with_container = [r for r in found if r.container_id is not None]
    if with_container:
        return with_container[0]
    return found[0] if found else None
