"""Why the kubelet cannot be read, said in the log and in `gpuwatch_attribution_*`: a real
gRPC server on a unix socket plays the kubelet, with the kubelet's own permissions, and
the client runs in a subprocess as a non-root uid, or as uid 0 with every capability
dropped as the chart runs it where attribution is on (the tests run as root)."""

from __future__ import annotations

import json
import logging
import os
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client.exposition import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from gpuwatch.agent import Agent
from gpuwatch.collectors.attribution import AttributionCollector
from gpuwatch.config import AgentConfig, Config
from gpuwatch.core.clock import ManualClock
from gpuwatch.kube.config import KubernetesConfig
from gpuwatch.kube.podresources import (
    ContainerAllocation,
    ContainerDevices,
    PodAllocation,
    probe_socket,
)
from gpuwatch.simulate.kubelet import ALLOCATABLE_DISABLED, SimulatedKubelet
from tests.conftest import REPO_ROOT, make_agent, scenario_agent, simulated

NOBODY = 65532  # the distroless "nonroot" uid
U = "2fc0195c-3848-d59d-2cca-b96e3887fa21"
POD = PodAllocation(
    "team-a",
    "trainer-0",
    (ContainerAllocation("trainer", (ContainerDevices("nvidia.com/gpu", (f"GPU-{U}",)),)),),
)

# One refresh of the production collector as uid/gid argv[3], no supplementary groups:
# it imports as root (the interpreter lives under root's 0700 home here), then drops to
# that uid with setgroups/setgid/setuid, which also drops every capability of a non-zero
# uid. With argv[4] == "drop-caps" it then drops every capability as a container runtime
# does for `capabilities: {drop: [ALL]}`, `allowPrivilegeEscalation: false` (the kernel
# calls runc makes: the bounding set, ambient and no_new_privs before the uid switch,
# then capset effective, permitted and inheritable to 0), so uid 0 keeps only its
# ownership. It reports the kernel's own view of its capabilities (/proc/self/status).
CLIENT = """
import ctypes, json, logging, os, sys
from pathlib import Path
from gpuwatch.core.clock import ManualClock
from gpuwatch.collectors.attribution import AttributionCollector
from gpuwatch.export.attribution_families import attribution_health_families
from gpuwatch.kube.config import KubernetesConfig

uid = int(sys.argv[3])
drop_caps = sys.argv[4:] == ["drop-caps"]
libc = ctypes.CDLL(None, use_errno=True)
libc.prctl.argtypes = [ctypes.c_int] + [ctypes.c_ulong] * 4
def prctl(option, arg):
    if libc.prctl(option, arg, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), f"prctl({option}, {arg})")
if drop_caps:  # while CAP_SETPCAP is still there
    for cap in range(int(Path("/proc/sys/kernel/cap_last_cap").read_text()) + 1):
        prctl(24, cap)  # PR_CAPBSET_DROP
    prctl(47, 4)  # PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL
    prctl(38, 1)  # PR_SET_NO_NEW_PRIVS
os.setgroups([])
os.setgid(uid)
os.setuid(uid)
if drop_caps:
    header = (ctypes.c_uint32 * 2)(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3, this pid
    data = (ctypes.c_uint32 * 6)()  # two {effective, permitted, inheritable}, all 0
    if libc.capset(header, data) != 0:
        raise OSError(ctypes.get_errno(), "capset")
status = dict(
    line.split(":", 1) for line in Path("/proc/self/status").read_text().splitlines()
)
fields = ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb", "NoNewPrivs")
kernel = {k: status[k].strip() for k in fields}

lines = []
handler = logging.Handler()
handler.emit = lambda record: lines.append(record.getMessage())
logging.getLogger("gpuwatch").addHandler(handler)
logging.getLogger("gpuwatch").setLevel(logging.INFO)
config = KubernetesConfig(
    enabled=True, pod_resources_socket=Path(sys.argv[1]), pod_logs_dir=Path(sys.argv[2]),
    timeout_seconds=2.0,
)
collector = AttributionCollector(config, ManualClock())
collector.refresh()
families = {
    s.name: (s.labels, s.value)
    for f in attribution_health_families(collector.reason) for s in f.samples
}
print(json.dumps({
    "uid": os.getuid(),
    "kernel": kernel,
    "groups": [os.getgid(), *os.getgroups()],
    "reason": collector.reason,
    "success": collector.result.success,
    "pods": len(collector.current_listing().pods) if collector.current_listing() else 0,
    "log": lines,
    "families": families,
}))
"""


def _as_uid(
    uid: int, socket_path: Path, logs: Path, *, drop_caps: bool = False
) -> dict[str, object]:
    """The CLIENT script's report, run as `uid` (gid `uid`, no supplementary groups),
    with every capability dropped when `drop_caps`."""
    extra = ["drop-caps"] if drop_caps else []
    done = subprocess.run(
        [sys.executable, "-c", CLIENT, str(socket_path), str(logs), str(uid), *extra],
        cwd=REPO_ROOT,
        env={"PATH": os.environ.get("PATH", ""), "PYTHONDONTWRITEBYTECODE": "1"},
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr.decode()
    report: dict[str, object] = json.loads(done.stdout)
    assert report["uid"] == uid
    assert report["groups"] == [uid]
    return report


@pytest.fixture
def node() -> Iterator[Path]:
    """A short world-searchable folder (unix socket paths stay under 108 bytes)."""
    if os.geteuid() != 0:
        pytest.skip(
            "not running as root: the kubelet's layout needs a root-owned socket and "
            "folder, and the client switches to another uid and drops capabilities "
            "(the tests run as root, here and in CI)"
        )
    with tempfile.TemporaryDirectory(prefix="gw-") as folder:
        root = Path(folder)
        root.chmod(0o755)
        yield root


def _kubelet_layout(
    root: Path, folder_mode: int, socket_mode: int, *, folder_owner: int = 0
) -> SimulatedKubelet:
    """`root/pod-resources/kubelet.sock` served by a real gRPC server, the socket
    root-owned, the folder owned by `folder_owner` (the kubelet's: root), with the given
    modes (the kubelet's own: folder 0750, socket srwxr-xr-x)."""
    (root / "pods").mkdir()  # the pod-log folder, empty
    folder = root / "pod-resources"
    folder.mkdir()
    kubelet = SimulatedKubelet(folder / "kubelet.sock", [POD])
    kubelet.start()
    os.chown(folder, folder_owner, folder_owner)
    folder.chmod(folder_mode)
    kubelet.socket_path.chmod(socket_mode)
    return kubelet


def test_kubelet_folder_0750_denies_a_non_root_agent_and_says_so(node: Path) -> None:
    kubelet = _kubelet_layout(node, 0o750, 0o755)
    try:
        report = _as_uid(NOBODY, kubelet.socket_path, node / "pods")
        assert report["reason"] == "permission_denied"
        assert report["success"] is False
        assert report["families"] == {
            "gpuwatch_attribution_up": [{}, 0.0],
            "gpuwatch_attribution_reason_info": [{"reason": "permission_denied"}, 1.0],
        }
        log = report["log"]
        assert isinstance(log, list)
        assert len(log) == 1
        assert "permission_denied" in log[0]
        assert "Permission denied" in log[0]  # the system's own words, not swallowed
        assert "UNAVAILABLE" in log[0]  # and what gRPC said
        assert "uid 0" in log[0]  # what to do
        # root (the kubelet's owner) reads the same socket
        assert _as_uid(0, kubelet.socket_path, node / "pods")["reason"] == "ok"
    finally:
        kubelet.stop()


NO_CAPABILITIES = {
    "CapInh": "0000000000000000",
    "CapPrm": "0000000000000000",
    "CapEff": "0000000000000000",
    "CapBnd": "0000000000000000",
    "CapAmb": "0000000000000000",
    "NoNewPrivs": "1",
}


def test_uid_0_without_capabilities_reads_the_kubelets_0750_folder(node: Path) -> None:
    """The chart with attribution on (runAsUser 0, drop ALL, no privilege escalation):
    uid 0 owns the kubelet's root:root 0750 folder and root-owned socket, so the owner's
    permission bits let it in with no CAP_DAC_OVERRIDE; a non-zero uid without
    capabilities is denied the same folder."""
    kubelet = _kubelet_layout(node, 0o750, 0o755)
    try:
        folder = kubelet.socket_path.parent.stat()
        assert (folder.st_uid, folder.st_gid, folder.st_mode & 0o7777) == (0, 0, 0o750)
        root = _as_uid(0, kubelet.socket_path, node / "pods", drop_caps=True)
        assert root["kernel"] == NO_CAPABILITIES  # the kernel agrees: nothing left
        assert (root["reason"], root["success"], root["pods"]) == ("ok", True, 1)
        assert root["log"] == []
        assert root["families"] == {
            "gpuwatch_attribution_up": [{}, 1.0],
            "gpuwatch_attribution_reason_info": [{"reason": "ok"}, 1.0],
        }
        nobody = _as_uid(NOBODY, kubelet.socket_path, node / "pods", drop_caps=True)
        assert nobody["kernel"] == NO_CAPABILITIES
        assert (nobody["reason"], nobody["success"]) == ("permission_denied", False)
    finally:
        kubelet.stop()


def test_uid_0_without_capabilities_is_held_to_the_permission_bits(node: Path) -> None:
    """The control that the capabilities really are gone: a 0700 folder owned by
    another uid keeps out uid 0 without CAP_DAC_OVERRIDE / CAP_DAC_READ_SEARCH, while
    uid 0 with its capabilities goes through. So the test above passes on ownership."""
    kubelet = _kubelet_layout(node, 0o700, 0o755, folder_owner=NOBODY)
    try:
        bare = _as_uid(0, kubelet.socket_path, node / "pods", drop_caps=True)
        assert bare["kernel"] == NO_CAPABILITIES
        assert (bare["reason"], bare["success"]) == ("permission_denied", False)
        full = _as_uid(0, kubelet.socket_path, node / "pods")
        assert full["kernel"] != NO_CAPABILITIES
        assert (full["reason"], full["pods"]) == ("ok", 1)
    finally:
        kubelet.stop()


def test_root_owned_socket_without_write_permission_is_permission_denied(node: Path) -> None:
    kubelet = _kubelet_layout(node, 0o755, 0o755)  # folder open, socket srwxr-xr-x
    try:
        report = _as_uid(NOBODY, kubelet.socket_path, node / "pods")
        assert report["reason"] == "permission_denied"
        log = report["log"]
        assert isinstance(log, list)
        assert "connect: Permission denied" in log[0]
    finally:
        kubelet.stop()


def test_an_open_socket_serves_the_same_non_root_uid(node: Path) -> None:
    """The control: the subprocess as uid 65532 reads a socket it may write to."""
    kubelet = _kubelet_layout(node, 0o755, 0o777)
    try:
        report = _as_uid(NOBODY, kubelet.socket_path, node / "pods")
        assert (report["reason"], report["success"], report["pods"]) == ("ok", True, 1)
        assert report["log"] == []
    finally:
        kubelet.stop()


@pytest.fixture
def sock_dir() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="gw-") as folder:
        (Path(folder) / "pods").mkdir()  # the pod-log folder, empty
        yield Path(folder)


def _collector(socket_path: Path) -> AttributionCollector:
    config = KubernetesConfig(
        enabled=True,
        pod_resources_socket=socket_path,
        pod_logs_dir=socket_path.parent / "pods",
        timeout_seconds=2.0,
    )
    return AttributionCollector(config, ManualClock())


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]


def test_no_socket_is_said_once_then_recovery(
    sock_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="gpuwatch")
    collector = _collector(sock_dir / "kubelet.sock")
    assert collector.reason is None
    for _ in range(3):
        collector.refresh()
    assert collector.reason == "no_socket"
    assert collector.result.success is False
    warnings = _warnings(caplog)
    assert len(warnings) == 1  # once per change, not every refresh
    assert "no_socket" in warnings[0]
    assert "stat: No such file or directory" in warnings[0]
    assert "hostPath" in warnings[0]
    kubelet = SimulatedKubelet(sock_dir / "kubelet.sock", [POD])
    kubelet.start()
    try:
        collector.refresh()
        assert collector.reason == "ok"
        assert collector.result.success is True
        assert "kubelet pod-resources answers again" in caplog.messages
    finally:
        collector.close()
        kubelet.stop()


def test_missing_folder_is_no_socket(sock_dir: Path) -> None:
    collector = _collector(sock_dir / "pod-resources" / "kubelet.sock")
    collector.refresh()
    assert collector.reason == "no_socket"


def test_a_socket_nobody_listens_on_is_unavailable(
    sock_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A kubelet that died leaves its socket file: connect(2) is refused."""
    path = sock_dir / "kubelet.sock"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as dead:
        dead.bind(str(path))
    assert path.exists()
    assert probe_socket(path) == ("unavailable", "connect: Connection refused")
    collector = _collector(path)
    collector.refresh()
    assert collector.reason == "unavailable"
    assert "nothing accepts on the socket" in _warnings(caplog)[0]


def test_a_plain_file_is_no_socket(sock_dir: Path) -> None:
    path = sock_dir / "kubelet.sock"
    path.write_text("")
    assert probe_socket(path) == ("no_socket", "stat: not a socket")
    collector = _collector(path)
    collector.refresh()
    assert collector.reason == "no_socket"


def test_a_reason_change_is_logged_again(sock_dir: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = sock_dir / "kubelet.sock"
    collector = _collector(path)
    collector.refresh()
    kubelet = SimulatedKubelet(path, [POD])
    kubelet.start()
    kubelet.exhausted = True  # the kubelet's rate limit: RESOURCE_EXHAUSTED
    try:
        collector.refresh()
        collector.refresh()
        assert collector.reason == "error"
        warnings = _warnings(caplog)
        assert len(warnings) == 2
        assert "no_socket" in warnings[0]
        assert "error" in warnings[1]
        assert "RESOURCE_EXHAUSTED" in warnings[1]
    finally:
        collector.close()
        kubelet.stop()


def test_allocatable_gate_off_degrades_to_list(
    sock_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A 1.21/1.22 kubelet answers GetAllocatableResources UNKNOWN: List alone is used,
    the kubelet's message is logged once, its recovery once."""
    caplog.set_level(logging.INFO, logger="gpuwatch")
    kubelet = SimulatedKubelet(
        sock_dir / "kubelet.sock",
        [POD],
        (ContainerDevices("nvidia.com/gpu", (f"GPU-{U}",)),),
        allocatable_disabled=True,
    )
    kubelet.start()
    collector = _collector(sock_dir / "kubelet.sock")
    try:
        for _ in range(3):
            collector.refresh()
            assert collector.result.success is True
            assert collector.reason == "ok"
        listing = collector.current_listing()
        assert listing is not None
        assert listing.pods == (POD,)
        assert listing.allocatable is None
        warnings = _warnings(caplog)
        assert len(warnings) == 1
        assert f"UNKNOWN: {ALLOCATABLE_DISABLED}" in warnings[0]
        assert "List alone" in warnings[0]
        kubelet.allocatable_disabled = False
        collector.refresh()
        listing = collector.current_listing()
        assert listing is not None
        assert listing.allocatable is not None
        assert "kubelet GetAllocatableResources answers again" in caplog.messages
    finally:
        collector.close()
        kubelet.stop()


def _samples(agent: Agent) -> dict[str, list[tuple[dict[str, str], float]]]:
    text = generate_latest(agent.registry).decode()
    found: dict[str, list[tuple[dict[str, str], float]]] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name.startswith("gpuwatch_attribution_"):
                found.setdefault(s.name, []).append((s.labels, s.value))
    return found


def test_attribution_off_is_disabled_without_an_up_series() -> None:
    agent, clock = make_agent("demo")
    try:
        clock.advance(1.0)
        agent.tick()
        assert _samples(agent) == {
            "gpuwatch_attribution_reason_info": [({"reason": "disabled"}, 1.0)]
        }
    finally:
        agent.stop()


def test_the_agent_exports_the_reason(sock_dir: Path) -> None:
    nv, clock = simulated("demo")
    kube = KubernetesConfig(
        enabled=True,
        pod_resources_socket=sock_dir / "kubelet.sock",
        pod_logs_dir=sock_dir / "pods",
    )
    agent = scenario_agent(Config(agent=AgentConfig(hostname="h")), nv, clock, kubernetes=kube)
    kubelet = SimulatedKubelet(sock_dir / "kubelet.sock", [POD])
    try:
        assert _samples(agent)["gpuwatch_attribution_up"] == [({}, 0.0)]  # not asked yet
        agent.refresh_attribution()
        clock.advance(1.0)
        agent.tick()
        found = _samples(agent)
        assert found["gpuwatch_attribution_up"] == [({}, 0.0)]
        assert found["gpuwatch_attribution_reason_info"] == [({"reason": "no_socket"}, 1.0)]
        assert found["gpuwatch_attribution_stale"] == [({}, 1.0)]
        kubelet.start()
        agent.refresh_attribution()
        clock.advance(1.0)
        agent.tick()
        found = _samples(agent)
        assert found["gpuwatch_attribution_up"] == [({}, 1.0)]
        assert found["gpuwatch_attribution_reason_info"] == [({"reason": "ok"}, 1.0)]
        assert found["gpuwatch_attribution_stale"] == [({}, 0.0)]
    finally:
        agent.stop()
        kubelet.stop()
