"""Fixtures for the stand-in tests."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest


@pytest.fixture
def write_scenario(tmp_path: Path) -> Callable[..., Path]:
    """Write TOML text to a scenario file and return its path."""

    def write(text: str, name: str = "custom.toml") -> Path:
        path = tmp_path / name
        path.write_text(text)
        return path

    return write
