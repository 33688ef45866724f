"""Every nvidia-ml-py that pyproject.toml allows runs the adapter: the real old releases
from PyPI, loaded side by side, each over the stand-in."""

from __future__ import annotations

import ast
import inspect
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pynvml
import pytest

import gpuwatch.nvml
from gpuwatch.core.clock import ManualClock
from gpuwatch.core.snapshot import GpuSample
from gpuwatch.nvml import NvmlSampler
from gpuwatch.nvml.binding import FUNCTIONS, missing_functions
from gpuwatch.simulate import SimulatedNvml, load_scenario
from tests.bindings.fetch import VERSIONS, fetch, load
from tests.support.old_binding import OldBinding

REPO_ROOT = Path(__file__).resolve().parents[2]
NVML_PACKAGE = Path(gpuwatch.nvml.__file__).parent


@pytest.fixture(scope="session")
def bindings() -> dict[str, ModuleType]:
    missing = fetch()
    if missing:
        pytest.fail(f"nvidia-ml-py {missing} not downloaded: run `make bindings` (needs PyPI)")
    return {version: load(version) for version in VERSIONS}


def adapter_attributes() -> set[str]:
    """Every attribute the adapter reads off the binding (`nv.X`, `self._nv.X`)."""
    names = set()
    for path in NVML_PACKAGE.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.Attribute):
                continue
            owner = node.value
            if (isinstance(owner, ast.Name) and owner.id == "nv") or (
                isinstance(owner, ast.Attribute) and owner.attr == "_nv"
            ):
                names.add(node.attr)
    return names


def test_the_floor_in_pyproject_is_the_oldest_release_tested() -> None:
    text = (REPO_ROOT / "pyproject.toml").read_text()
    assert f'"nvidia-ml-py>={VERSIONS[0]}"' in text


def test_every_binding_function_the_adapter_calls_is_declared() -> None:
    used = adapter_attributes()
    functions = {
        name
        for name in used
        if name.startswith("nvml") and inspect.isfunction(getattr(pynvml, name, None))
    }
    assert functions <= set(FUNCTIONS), "add these to gpuwatch.nvml.binding.FUNCTIONS"
    assert len(functions) > 30  # the scan found the adapter's calls


def test_each_release_has_or_stubs_everything_the_adapter_reads(
    bindings: dict[str, ModuleType],
) -> None:
    used = adapter_attributes()
    for version, module in bindings.items():
        absent = {name for name in used if not hasattr(module, name)}
        assert absent <= set(missing_functions(module)), (version, absent)
    assert set(missing_functions(bindings["12.535.77"])) == {
        "nvmlDeviceGetTemperatureV",
        "nvmlDeviceGetComputeRunningProcesses_v2",
        "nvmlDeviceGetGraphicsRunningProcesses_v2",
    }
    assert missing_functions(bindings["12.560.30"]) == ("nvmlDeviceGetTemperatureV",)
    assert missing_functions(bindings["12.570.86"]) == ()


def sample_through(module: ModuleType, scenario: str | Path, ticks: int = 3) -> Iterator[GpuSample]:
    clock = ManualClock()
    stand_in = SimulatedNvml(load_scenario(scenario), clock=clock, sleep=lambda s: None)
    sampler = NvmlSampler(OldBinding(stand_in, module), clock, watch_xid=False)
    sampler.open()
    try:
        for _ in range(ticks):
            clock.advance(1.0)
            yield from sampler.sample()
    finally:
        sampler.close()


@pytest.mark.parametrize("version", VERSIONS)
def test_the_adapter_samples_the_demo_fleet_with_each_release(
    bindings: dict[str, ModuleType], version: str
) -> None:
    current = list(sample_through(pynvml, "demo"))
    old = list(sample_through(bindings[version], "demo"))
    assert [g.up for g in old] == [True] * len(current)
    for before, now in zip(current, old, strict=True):
        assert now.temperature_celsius == before.temperature_celsius  # via GetTemperature
        assert now.temperature_celsius is not None
        assert now.processes == before.processes


R535_FLEET = """
name = "r535"
[driver]
version = "535.183.01"
nvml_version = "12.535.183.01"
process_struct_bytes = 32
[[gpus]]
preset = "a100-sxm4-80gb"
[[gpus.processes]]
pid = 11
name = "a"
memory = "1 GiB"
[[gpus.processes]]
pid = 12
name = "b"
memory = "2 GiB"
[[gpus.processes]]
pid = 13
name = "c"
kind = "graphics"
memory = "3 GiB"
"""


@pytest.mark.parametrize("version", [*VERSIONS, "installed"])
@pytest.mark.parametrize("struct_bytes", [24, 32])
def test_processes_are_right_for_each_release_and_driver_layout(
    bindings: dict[str, ModuleType], version: str, struct_bytes: int, tmp_path: Path
) -> None:
    path = tmp_path / "fleet.toml"
    path.write_text(R535_FLEET.replace("= 32", f"= {struct_bytes}"))
    module = pynvml if version == "installed" else bindings[version]
    gpus = list(sample_through(module, path, ticks=1))
    processes = gpus[0].processes
    assert processes is not None
    assert [(p.pid, p.kind, p.memory_used_bytes) for p in processes] == [
        (11, "compute", 1024**3),
        (12, "compute", 2 * 1024**3),
        (13, "graphics", 3 * 1024**3),
    ]
