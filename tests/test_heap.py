"""`trim_heap`: glibc's malloc_trim(0) once after start-up, nothing elsewhere."""

from __future__ import annotations

import ctypes
import platform

import pytest

from gpuwatch.cli.heap import trim_heap


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="malloc_trim is glibc's")
def test_trim_heap_gives_freed_memory_back() -> None:
    blocks = [ctypes.create_string_buffer(4096) for _ in range(20_000)]  # ~80 MiB of heap
    del blocks
    assert trim_heap() is True


def test_trim_heap_without_malloc_trim(monkeypatch: pytest.MonkeyPatch) -> None:
    class NoTrim:
        def __init__(self, name: object) -> None:
            pass

    monkeypatch.setattr(ctypes, "CDLL", NoTrim)
    assert trim_heap() is False
