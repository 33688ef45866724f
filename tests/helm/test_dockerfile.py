"""The Dockerfile: hadolint-clean, multi-stage, non-root, the README's install, the CLI
as entry point; .dockerignore sends only what the install needs."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DOCKERFILE = REPO / "Dockerfile"


def _hadolint(path: Path) -> subprocess.CompletedProcess[str]:
    binary = shutil.which("hadolint") or str(Path(sys.executable).parent / "hadolint")
    return subprocess.run(
        [binary, "--no-color", str(path)], capture_output=True, text=True, check=False
    )


def test_hadolint_is_clean() -> None:
    result = _hadolint(DOCKERFILE)
    assert result.returncode == 0, result.stdout + result.stderr


def test_hadolint_finds_a_bad_dockerfile(tmp_path: Path) -> None:
    bad = tmp_path / "Dockerfile"
    bad.write_text("FROM python:latest\nRUN pip install requests\nUSER root\n", encoding="utf-8")
    result = _hadolint(bad)
    assert result.returncode != 0
    assert "DL3007" in result.stdout  # :latest
    assert "DL3013" in result.stdout  # unpinned pip install


def test_image_shape() -> None:
    lines = [ln.strip() for ln in DOCKERFILE.read_text(encoding="utf-8").splitlines()]
    froms = [ln for ln in lines if ln.startswith("FROM ")]
    assert len(froms) == 2
    assert froms[0].endswith(" AS build")
    assert "ARG PYTHON_IMAGE=python:3.12-slim-bookworm" in lines
    final = lines[lines.index(froms[1]) :]
    assert "USER 65532:65532" in final
    assert 'ENTRYPOINT ["gpuwatch"]' in final
    # Nothing is built or installed in the final stage: no pip, no apt, no compiler.
    runs = " ".join(ln for ln in final if ln.startswith(("RUN", "&&")))
    for word in ("pip", "apt-get", "gcc", "build-essential"):
        assert word not in runs
    assert "pip install --no-cache-dir ." in " ".join(lines)  # the README's `pip install .`


def test_dockerignore_sends_only_the_install() -> None:
    rules = (REPO / ".dockerignore").read_text(encoding="utf-8").split()
    assert rules[rules.index("*") :][:4] == ["*", "!pyproject.toml", "!README.md", "!src/"]
