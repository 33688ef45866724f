"""The kubelet's /var/log/pods layout to pod names; names are data."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from gpuwatch.kube.podlogs import PodName, parse_pod_dir, scan_pod_logs

UID = "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"
UID2 = "11111111-2222-3333-4444-555555555555"


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        (f"team-a_trainer-0_{UID}", ("team-a", "trainer-0", UID)),
        (
            f"kube-system_nvidia-device-plugin-x7k2p_{UID}",
            ("kube-system", "nvidia-device-plugin-x7k2p", UID),
        ),
        (f"ns_pod_with_underscores_{UID}", ("ns", "pod_with_underscores", UID)),
        (f"ns_pod_{UID}x", None),
        (f"_pod_{UID}", None),
        (f"ns__{UID}", None),
        ("no-underscores", None),
    ],
)
def test_folder_names(name: str, expected: tuple[str, str, str] | None) -> None:
    assert parse_pod_dir(name) == expected


def test_scan_reads_pods_and_containers(tmp_path: Path) -> None:
    (tmp_path / f"team-a_trainer-0_{UID}" / "trainer").mkdir(parents=True)
    (tmp_path / f"team-a_trainer-0_{UID}" / "sidecar").mkdir()
    (tmp_path / f"team-a_trainer-0_{UID}" / "stray.log").write_text("x")
    (tmp_path / "not-a-pod").mkdir()
    assert scan_pod_logs(tmp_path) == {
        UID: PodName("team-a", "trainer-0", ("sidecar", "trainer")),
    }


def test_names_with_any_bytes_never_break(tmp_path: Path) -> None:
    root = os.fsencode(tmp_path)
    pod = root + b'/ns_caf\xe9-"quoted"\n_' + UID2.encode()
    os.makedirs(pod + b"/c\xff{}")  # noqa: PTH103 - bytes paths
    pods = scan_pod_logs(tmp_path)
    assert pods[UID2].pod == 'caf\\xe9-"quoted"\n'
    assert pods[UID2].containers == ("c\\xff{}",)
    # the names encode as UTF-8 (prometheus-client's exposition does)
    assert pods[UID2].pod.encode("utf-8")


def test_missing_root_raises(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        scan_pod_logs(tmp_path / "absent")
