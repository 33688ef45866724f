"""The Dockerfile built with podman on a Debian python3 base and run as the chart runs it:
read-only root filesystem, user 65532 (attribution off) or uid 0 with every capability
dropped (attribution on), the simulated demo fleet's metrics over HTTP."""

from __future__ import annotations

import json
import os
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import free_port
from tests.image.conftest import Podman, build_args, debian_mirror

# The gpuwatch layer (/opt/gpuwatch: the virtual environment) measured 107 MB on Debian's
# Python 3.11; a pip cache or a build tree left in it would show well above this.
MAX_APP_LAYER_BYTES = 150_000_000
PER_GPU_FAMILIES = (
    "gpuwatch_gpu_up",
    "gpuwatch_gpu_info",
    "gpuwatch_gpu_utilization_ratio",
    "gpuwatch_gpu_memory_used_bytes",
    "gpuwatch_gpu_power_watts",
    "gpuwatch_gpu_temperature_celsius",
)


def _scrape(url: str, podman: Podman, name: str, deadline_s: float = 60) -> str:
    deadline = time.monotonic() + deadline_s
    while True:
        try:
            with urllib.request.urlopen(url, timeout=5) as response:
                return str(response.read().decode("utf-8"))
        except (urllib.error.URLError, ConnectionError):
            state = podman.run("inspect", "--format", "{{.State.Status}}", name).stdout.strip()
            if state != "running" or time.monotonic() > deadline:
                logs = podman.run("logs", name, check=False)
                pytest.fail(f"no /metrics from the container ({state}):\n{logs.stderr[-4000:]}")
            time.sleep(0.5)


def test_image_serves_the_demo_fleet_read_only_as_65532(podman: Podman, image: str) -> None:
    port = free_port()
    name = f"gpuwatch-test-{os.getpid()}-{port}"
    podman.run(
        "run",
        "--detach",
        "--name",
        name,
        "--network=host",
        "--read-only",
        "--user",
        "65532",
        image,
        "run",
        "--simulate",
        "demo",
        "--listen",
        f"127.0.0.1:{port}",
    )
    try:
        text = _scrape(f"http://127.0.0.1:{port}/metrics", podman, name)
        assert podman.run("exec", name, "id", "-u").stdout.strip() == "65532"
        touched = podman.run("exec", name, "touch", "/opt/gpuwatch/x", check=False)
        assert touched.returncode != 0
        assert "Read-only file system" in touched.stderr

        families = {f.name: f for f in text_string_to_metric_families(text)}
        gpu_families = [n for n in families if n.startswith("gpuwatch_gpu_")]
        assert len(gpu_families) >= 20, gpu_families
        for family in PER_GPU_FAMILIES:
            gpus = {s.labels["gpu"] for s in families[family].samples if "gpu" in s.labels}
            assert gpus == {"0", "1", "2", "3"}, (family, gpus)
        assert [s.value for s in families["gpuwatch_gpu_up"].samples] == [1.0] * 4

        started = time.monotonic()
        podman.run("stop", "--time", "20", name)
        stopped_in = time.monotonic() - started
        state = json.loads(podman.run("inspect", "--format", "{{json .State}}", name).stdout)
        # SIGTERM ends the agent itself: no SIGKILL after the grace period (exit 137)
        assert state["ExitCode"] == 0, state
        assert stopped_in < 15, stopped_in
    finally:
        podman.run("rm", "--force", name, check=False)


def test_image_serves_the_demo_as_uid_0_without_capabilities(podman: Podman, image: str) -> None:
    """The chart's agent container with attribution on: runAsUser 0 (runAsGroup 65532),
    capabilities drop ALL, allowPrivilegeEscalation false, readOnlyRootFilesystem."""
    port = free_port()
    name = f"gpuwatch-test-root-{os.getpid()}-{port}"
    podman.run(
        "run",
        "--detach",
        "--name",
        name,
        "--network=host",
        "--read-only",
        "--user",
        "0:65532",
        "--cap-drop=ALL",
        "--security-opt=no-new-privileges",
        image,
        "run",
        "--simulate",
        "demo",
        "--listen",
        f"127.0.0.1:{port}",
    )
    try:
        text = _scrape(f"http://127.0.0.1:{port}/metrics", podman, name)
        # the agent (the container's pid 1) as the kernel sees it
        status = dict(
            line.split(":", 1)
            for line in podman.run("exec", name, "cat", "/proc/1/status").stdout.splitlines()
        )
        assert status["Uid"].split() == ["0"] * 4
        assert status["Gid"].split() == ["65532"] * 4
        for field in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"):
            assert int(status[field], 16) == 0, (field, status[field])
        assert status["NoNewPrivs"].strip() == "1"
        touched = podman.run("exec", name, "touch", "/opt/gpuwatch/x", check=False)
        assert "Read-only file system" in touched.stderr

        families = {f.name: f for f in text_string_to_metric_families(text)}
        assert [s.value for s in families["gpuwatch_gpu_up"].samples] == [1.0] * 4
        podman.run("stop", "--time", "20", name)
        state = json.loads(podman.run("inspect", "--format", "{{json .State}}", name).stdout)
        assert state["ExitCode"] == 0, state
    finally:
        podman.run("rm", "--force", name, check=False)


def test_image_metadata_and_size(podman: Podman, image: str, base_image: str) -> None:
    inspected = json.loads(podman.run("image", "inspect", image).stdout)[0]
    config = inspected["Config"]
    assert config["User"] == "65532:65532"
    assert config["Entrypoint"] == ["gpuwatch"]
    assert config["Cmd"] == ["run"]
    assert "9842/tcp" in config["ExposedPorts"]
    # the build stage's pip settings (this machine's CA bundle) stay out of the image
    assert not [e for e in config["Env"] if e.startswith("PIP_")], config["Env"]
    assert "PIP_" not in podman.run("history", "--no-trunc", image).stdout
    assert "PATH=/opt/gpuwatch/bin:" in " ".join(config["Env"])

    base = json.loads(podman.run("image", "inspect", base_image).stdout)[0]
    added = int(inspected["Size"]) - int(base["Size"])
    assert 0 < added < MAX_APP_LAYER_BYTES, added

    help_text = podman.run("run", "--rm", "--network=none", image, "report", "--help").stdout
    assert "usage: gpuwatch report" in help_text


def test_build_hands_pip_settings_to_the_build_only() -> None:
    args = list(
        build_args("localhost/b:1", {"PIP_CERT": "/srv/ca.pem", "PIP_INDEX_URL": "https://m/s"})
    )
    assert args[args.index("--build-arg") + 1] == "PYTHON_IMAGE=localhost/b:1"
    assert "PIP_CERT=/srv/ca.pem" in args
    assert "PIP_INDEX_URL=https://m/s" in args
    assert "/srv/ca.pem:/srv/ca.pem:ro" in args  # a bundle outside /etc/ssl/certs is mounted
    assert "/etc/ssl/certs:/etc/ssl/certs:ro" in args
    plain = list(build_args("localhost/b:1", {}))
    assert not [a for a in plain if a.startswith("PIP_")]


def test_debian_mirror_reads_deb822_and_one_line_sources(tmp_path: Path) -> None:
    parts = tmp_path / "sources.list.d"
    parts.mkdir()
    (parts / "debian.sources").write_text(
        "Types: deb\n# http://snapshot.example/\nURIs: http://mirror.example/debian-security\n"
        "Suites: bookworm-security\nComponents: main\n\n"
        "Types: deb-src deb\nURIs: http://mirror.example/debian\n"
        "Suites: bookworm bookworm-updates\nComponents: main\n",
        encoding="utf-8",
    )
    (parts / "other.sources.disabled").write_text(
        "Types: deb\nURIs: http://wrong.example/\nSuites: bookworm\n", encoding="utf-8"
    )
    assert debian_mirror(tmp_path) == "http://mirror.example/debian"

    (tmp_path / "sources.list").write_text(
        "# deb http://commented.example/debian bookworm main\n"
        "deb [arch=amd64 signed-by=/k.gpg] http://one.example/debian bookworm main\n",
        encoding="utf-8",
    )
    assert debian_mirror(tmp_path) == "http://one.example/debian"


def test_the_host_proc_mount_shows_host_pids_without_capabilities(
    podman: Podman, image: str
) -> None:
    """The chart's `host-proc` volume (the host's /proc read-only at /host/proc) under the
    agent container's posture: uid 0, no capability, its own PID namespace. A host
    process's cgroup file is readable there, and not under the container's own /proc:
    what `kubernetes.proc_root = "/host/proc"` rests on (docs/kubernetes.md)."""
    pid = os.getpid()
    result = podman.run(
        "run",
        "--rm",
        "--read-only",
        "--user",
        "0:65532",
        "--cap-drop=ALL",
        "--security-opt=no-new-privileges",
        "--volume=/proc:/host/proc:ro",
        "--entrypoint=/bin/sh",
        image,
        "-c",
        f"grep CapEff /proc/self/status; test ! -e /proc/{pid} && echo own-proc-lacks-it; "
        f"cat /host/proc/{pid}/cgroup",
    )
    lines = result.stdout.splitlines()
    assert int(lines[0].split()[1], 16) == 0
    assert lines[1] == "own-proc-lacks-it"
    host = Path(f"/proc/{pid}/cgroup").read_text(encoding="utf-8").splitlines()
    # one line per hierarchy, as the host shows it (paths relative to a cgroup namespace)
    assert [line.split(":", 2)[:2] for line in lines[2:]] == [
        line.split(":", 2)[:2] for line in host
    ]
