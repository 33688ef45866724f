"""`/proc/<pid>/cgroup` shapes to pod UID and container ID."""

from __future__ import annotations

import pytest

from gpuwatch.kube.cgroup import PodCgroup, parse_cgroup, parse_cgroup_path

UID = "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"
UID_ = UID.replace("-", "_")
CID = "3a" * 32


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # cgroup v2, systemd driver, containerd
        (
            f"0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{UID_}.slice/"
            f"cri-containerd-{CID}.scope\n",
            PodCgroup(UID, CID),
        ),
        # cgroup v2, systemd, CRI-O, BestEffort
        (
            f"0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod{UID_}.slice/"
            f"crio-{CID}.scope\n",
            PodCgroup(UID, CID),
        ),
        # Guaranteed pod, systemd: no QoS level
        (
            f"0::/kubepods.slice/kubepods-pod{UID_}.slice/docker-{CID}.scope\n",
            PodCgroup(UID, CID),
        ),
        # cgroup v1, cgroupfs driver
        (
            f"12:memory:/kubepods/burstable/pod{UID}/{CID}\n"
            f"11:cpu,cpuacct:/kubepods/burstable/pod{UID}/{CID}\n1:name=systemd:/\n",
            PodCgroup(UID, CID),
        ),
        # cgroup v1, cgroupfs, Guaranteed (no QoS level)
        (f"4:devices:/kubepods/pod{UID}/{CID}\n", PodCgroup(UID, CID)),
        # cgroup namespace: relative path with ../
        (
            f"0::/../../kubepods-besteffort-pod{UID_}.slice/cri-containerd-{CID}.scope\n",
            PodCgroup(UID, CID),
        ),
        # the pod's own cgroup (no container segment)
        (f"0::/kubepods/besteffort/pod{UID}\n", PodCgroup(UID, None)),
        # v1 with the pod only in a later controller: the one with a container wins
        (
            f"3:cpuset:/kubepods/pod{UID}\n2:memory:/kubepods/pod{UID}/{CID}\n",
            PodCgroup(UID, CID),
        ),
    ],
)
def test_pod_shapes(text: str, expected: PodCgroup) -> None:
    assert parse_cgroup(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "0::/user.slice/user-1000.slice/session-3.scope\n",
        "0::/\n",
        "12:memory:/docker/" + CID + "\n",
        "",
        "garbage without colons\n",
        "0::/kubepods/besteffort/podnot-a-uid/abc\n",
    ],
)
def test_not_in_a_pod(text: str) -> None:
    assert parse_cgroup(text) is None


def test_unknown_container_segment_keeps_the_pod() -> None:
    assert parse_cgroup_path(f"/kubepods/pod{UID}/crio-conmon-{CID}.scope") == PodCgroup(UID, None)
