"""The install hints name this project: its distribution and where it was installed from."""

from __future__ import annotations

import sys
import tomllib
from importlib import metadata
from pathlib import Path

from gpuwatch.core.install import DISTRIBUTION, install_hint, installed_from

ROOT = Path(__file__).resolve().parent.parent


def test_the_distribution_is_not_pypis_gpuwatch() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert project["name"] == DISTRIBUTION != "gpuwatch"  # PyPI's `gpuwatch` is another GPU monitor
    dist = metadata.distribution(DISTRIBUTION)
    assert dist.version == metadata.version(DISTRIBUTION)
    assert "gpuwatch = gpuwatch.cli:main" in (dist.read_text("entry_points.txt") or "")


def test_the_hint_installs_from_this_checkout_into_this_environment() -> None:
    assert installed_from() == ROOT  # the suite runs on `pip install -e .` of this checkout
    assert install_hint("plan") == f"{sys.executable} -m pip install '{ROOT}[plan]'"
