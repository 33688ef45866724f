"""Renders the chart once per session per value set under ci/."""

from __future__ import annotations

from pathlib import Path

import helm_python
import pytest

from tests.helm.chart import Rendered, assemble, render, value_sets


@pytest.fixture(scope="session")
def chart(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The chart laid out with the folders its symlinks reach."""
    helm_python.disable_logging()
    return assemble(tmp_path_factory.mktemp("chart"))


@pytest.fixture(scope="session")
def rendered(chart: Path) -> dict[str, Rendered]:
    """Every ci/ value set rendered by real Helm, by file stem."""
    return {name: render(chart, values) for name, values in value_sets().items()}
