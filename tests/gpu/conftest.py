"""Real-GPU fixtures: every test here is skipped where NVML (the NVIDIA driver) is absent."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pynvml
import pytest


@pytest.fixture(scope="session")
def real_nvml() -> Iterator[Any]:
    """The real pynvml module, initialised; skips the test when there is no NVIDIA driver."""
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as exc:
        pytest.skip(f"no NVIDIA driver here ({exc}): real-GPU tests run only on a GPU host")
    try:
        if pynvml.nvmlDeviceGetCount() == 0:
            pytest.skip("NVML found no GPU")
        yield pynvml
    finally:
        pynvml.nvmlShutdown()
