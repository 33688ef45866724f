"""The image, built for real: Debian's podman and runc build the project's Dockerfile on a
Python base made from Debian's packages (the official python image cannot be pulled here).

Both steps are session-scoped and cached: the base (`localhost/debian-py:bookworm`, from
debootstrap, about a minute) is made only when podman does not have it yet, and the build
of `gpuwatch:test` reuses podman's layer cache when pyproject.toml, README.md and src/ are
unchanged. `make test` installs the tools (`make image-tools`); a missing tool fails the
session, never skips it.
"""

from __future__ import annotations

import fcntl
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT

BASE_IMAGE = "localhost/debian-py:bookworm"
IMAGE = "localhost/gpuwatch:test"
SUITE = "bookworm"  # the official image's python:3.12-slim-bookworm is on this release
RUNC = "/usr/sbin/runc"  # crun fails on this kind of machine's hybrid cgroup layout
CACHE = REPO_ROOT / ".cache" / "image"
APT_SOURCES = Path("/etc/apt")


@dataclass(frozen=True)
class Podman:
    """Rootful podman with runc and cgroupfs, under our own containers.conf."""

    env: dict[str, str]

    def argv(self, *args: str) -> list[str]:
        return ["podman", "--runtime", RUNC, "--cgroup-manager=cgroupfs", *args]

    def run(
        self, *args: str, check: bool = True, timeout: float = 120
    ) -> subprocess.CompletedProcess[str]:
        result = subprocess.run(
            self.argv(*args),
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        if check and result.returncode != 0:
            pytest.fail(
                f"podman {' '.join(args)} exited {result.returncode}:\n"
                f"{result.stdout[-4000:]}\n{result.stderr[-4000:]}"
            )
        return result

    def exists(self, image: str) -> bool:
        return self.run("image", "exists", image, check=False).returncode == 0


def debian_mirror(apt_dir: Path = APT_SOURCES) -> str:
    """The Debian archive apt's sources name (one-line .list or deb822 .sources): the URI of
    the first `deb` entry with a plain release suite (not -updates, -security)."""
    files = [apt_dir / "sources.list"]
    parts = apt_dir / "sources.list.d"
    if parts.is_dir():
        files += sorted(p for p in parts.iterdir() if p.suffix in (".list", ".sources"))
    for path in files:
        if not path.is_file():
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        if path.suffix == ".sources":
            for stanza in text.split("\n\n"):
                fields: dict[str, str] = {}
                for line in stanza.splitlines():
                    if ":" in line and not line.lstrip().startswith("#"):
                        key, _, value = line.partition(":")
                        fields[key.strip().lower()] = value.strip()
                if fields.get("enabled", "yes").lower() == "no":
                    continue
                if "deb" not in fields.get("types", "").split():
                    continue
                suites = fields.get("suites", "").split()
                uris = fields.get("uris", "").split()
                if uris and any("-" not in s and "/" not in s for s in suites):
                    return uris[0]
        else:
            for line in text.splitlines():
                words = re.sub(r"\[[^]]*\]", " ", line.split("#", 1)[0]).split()  # [options]
                plain = len(words) >= 3 and "-" not in words[2] and "/" not in words[2]
                if plain and words[0] == "deb":
                    return words[1]
    pytest.fail(f"no Debian archive among apt's sources in {apt_dir}")


def host_pip_settings() -> dict[str, str]:
    """The index and CA bundle this machine's pip uses (environment over configuration
    files, as pip itself resolves them), to hand to the build stage as build arguments.
    Local file:// indexes and find-links cannot be reached inside the build and are left
    out; pip's default index needs no argument."""
    listing = subprocess.run(
        [sys.executable, "-m", "pip", "config", "list"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout
    found: dict[str, str] = {}
    for line in listing.splitlines():  # global, user, site files, then the environment
        key, _, value = line.partition("=")
        value = value.strip().strip("'\"")
        name = key.rsplit(".", 1)[-1]
        if name in ("index-url", "cert"):
            found[name] = value
    settings: dict[str, str] = {}
    index = found.get("index-url", "")
    if index.startswith(("http://", "https://")):
        settings["PIP_INDEX_URL"] = index
    cert = found.get("cert", "")
    if cert and Path(cert).is_file():
        settings["PIP_CERT"] = cert
    return settings


@pytest.fixture(scope="session")
def podman(tmp_path_factory: pytest.TempPathFactory) -> Podman:
    if os.geteuid() != 0:
        pytest.fail("the image test runs rootful podman and debootstrap: run it as root")
    for tool in ("podman", "debootstrap", RUNC):
        if shutil.which(tool) is None:
            pytest.fail(f"{tool} is not installed: run `make image-tools` (Debian's packages)")
    conf = tmp_path_factory.mktemp("podman") / "containers.conf"
    # podman's default nofile ulimit cannot be set inside this kind of VM
    conf.write_text("[containers]\ndefault_ulimits = []\n", encoding="utf-8")
    return Podman(env={**os.environ, "CONTAINERS_CONF": str(conf)})


@pytest.fixture(scope="session")
def base_image(podman: Podman) -> str:
    """A Debian bookworm root filesystem with Debian's python3 and venv, imported into
    podman once per machine. No `python` symlink: the Dockerfile must call python3."""
    CACHE.mkdir(parents=True, exist_ok=True)
    with (CACHE / "base.lock").open("w") as lock:  # two sessions at once debootstrap once
        fcntl.flock(lock, fcntl.LOCK_EX)
        if podman.exists(BASE_IMAGE):
            return BASE_IMAGE
        rootfs = Path(tempfile.mkdtemp(prefix="debian-py-", dir="/var/tmp"))
        try:
            boot = subprocess.run(
                [
                    "debootstrap",
                    "--variant=minbase",
                    "--include=python3,python3-venv,ca-certificates",
                    SUITE,
                    str(rootfs),
                    debian_mirror(),
                ],
                capture_output=True,
                text=True,
                timeout=900,
                check=False,
            )
            if boot.returncode != 0:
                pytest.fail(f"debootstrap exited {boot.returncode}:\n{boot.stdout[-4000:]}")
            tar = subprocess.Popen(["tar", "-C", str(rootfs), "-c", "."], stdout=subprocess.PIPE)
            assert tar.stdout is not None
            with tar.stdout:
                imported = subprocess.run(
                    podman.argv("import", "-", BASE_IMAGE),
                    env=podman.env,
                    stdin=tar.stdout,
                    capture_output=True,
                    text=True,
                    timeout=600,
                    check=False,
                )
            assert tar.wait(timeout=60) == 0
            if imported.returncode != 0:
                pytest.fail(f"podman import exited {imported.returncode}:\n{imported.stderr}")
        finally:
            shutil.rmtree(rootfs, ignore_errors=True)
    return BASE_IMAGE


def build_args(base: str, pip: dict[str, str]) -> Sequence[str]:
    args = [
        "build",
        "--network=host",
        "--build-arg",
        f"PYTHON_IMAGE={base}",
        "-v",
        "/etc/ssl/certs:/etc/ssl/certs:ro",
    ]
    for name, value in sorted(pip.items()):
        args += ["--build-arg", f"{name}={value}"]
    cert = pip.get("PIP_CERT")
    if cert and not cert.startswith("/etc/ssl/certs/"):
        args += ["-v", f"{cert}:{cert}:ro"]
    return [*args, "-t", IMAGE, str(REPO_ROOT)]


@pytest.fixture(scope="session")
def image(podman: Podman, base_image: str) -> str:
    """`gpuwatch:test` built from the working tree's Dockerfile on the Debian base."""
    podman.run(*build_args(base_image, host_pip_settings()), timeout=900)
    return IMAGE
