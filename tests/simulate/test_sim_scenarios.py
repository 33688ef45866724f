"""Scenario files and presets: every built-in loads, bad files name the field."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from gpuwatch.simulate import PRESETS, ScenarioError, load_scenario, scenario_names
from gpuwatch.simulate.scenario import parse_scenario

MIB = 1024 * 1024


def test_builtin_scenarios_are_listed_sorted() -> None:
    names = scenario_names()
    assert names == sorted(names)
    assert {"demo", "dgx-h100", "faults"} <= set(names)


@pytest.mark.parametrize("name", scenario_names())
def test_every_builtin_scenario_loads(name: str) -> None:
    scenario = load_scenario(name)
    assert scenario.name == name
    assert scenario.description
    assert scenario.gpus


def test_dgx_h100_has_eight_gpus_and_64_processes() -> None:
    scenario = load_scenario("dgx-h100")
    assert [g.preset for g in scenario.gpus] == ["h100-sxm"] * 8
    assert [len(g.processes) for g in scenario.gpus] == [8] * 8


@pytest.mark.parametrize(
    ("preset", "name", "memory_mib", "power_w"),
    [
        ("h100-sxm", "NVIDIA H100 80GB HBM3", 81559, 700),
        ("h200", "NVIDIA H200", 143771, 700),
        ("a100-sxm4-80gb", "NVIDIA A100-SXM4-80GB", 81920, 400),
        ("a100-sxm4-40gb", "NVIDIA A100-SXM4-40GB", 40960, 400),
        ("l40s", "NVIDIA L40S", 46068, 350),
        ("l4", "NVIDIA L4", 23034, 72),
        ("a10g", "NVIDIA A10G", 23028, 300),
        ("t4", "Tesla T4", 15360, 70),
        ("rtx4090", "NVIDIA GeForce RTX 4090", 24564, 450),
        ("rtx3090", "NVIDIA GeForce RTX 3090", 24576, 350),
    ],
)
def test_presets_match_what_nvml_reports(
    preset: str, name: str, memory_mib: int, power_w: float
) -> None:
    p = PRESETS[preset]
    assert p.name == name
    assert p.memory_bytes == memory_mib * MIB
    assert p.power_limit_w == power_w
    assert 100 <= p.reserved_mib <= 1024
    assert p.source


def test_only_hopper_has_gpm_and_only_a100_h100_h200_have_mig() -> None:
    assert {k for k, p in PRESETS.items() if p.gpm} == {"h100-sxm", "h200"}
    assert {k for k, p in PRESETS.items() if p.mig_max} == {
        "h100-sxm",
        "h200",
        "a100-sxm4-80gb",
        "a100-sxm4-40gb",
    }
    assert all(p.mig_max in (0, 7) for p in PRESETS.values())
    geforce = [p for p in PRESETS.values() if p.brand == "geforce"]
    assert geforce
    assert not any(p.ecc or p.serial or p.remapped_rows for p in geforce)


def test_a_file_path_loads_and_defaults_the_name(write_scenario: Callable[..., Path]) -> None:
    path = write_scenario('[[gpus]]\npreset = "l4"\n', "my-fleet.toml")
    scenario = load_scenario(path)
    assert scenario.name == "my-fleet"
    assert scenario.gpus[0].device.name == "NVIDIA L4"


def test_unknown_scenario_says_so() -> None:
    with pytest.raises(ScenarioError, match=r"unknown scenario 'nope'.*demo"):
        load_scenario("nope")


def test_scenario_error_is_a_value_error() -> None:
    assert issubclass(ScenarioError, ValueError)


def test_bad_file_names_the_file_and_the_field(write_scenario: Callable[..., Path]) -> None:
    path = write_scenario('[[gpus]]\npreset = "h100x"\n', "bad.toml")
    with pytest.raises(ScenarioError) as info:
        load_scenario(path)
    message = str(info.value)
    assert str(path) in message
    assert "gpus[0].preset" in message
    assert "h100x" in message


def _pod(device: str) -> str:
    """Two L4s and a pod whose one container holds `device`."""
    return (
        '[[gpus]]\npreset = "l4"\n[[gpus]]\npreset = "l4"\n[[pods]]\nnamespace = "n"\n'
        f'name = "p"\n[[pods.containers]]\nname = "c"\ndevices = [{device}]\n'
    )


@pytest.mark.parametrize(
    ("text", "where"),
    [
        (
            '[[gpus]]\npreset = "l4"\n[[gpus.processes]]\npid = 1\nname = "x"\nmemory = "lots"\n',
            "gpus[0].processes[0].memory",
        ),
        (
            '[[gpus]]\npreset = "l4"\n[[gpus.processes]]\npid = 1\nname = "x"\nmemory = "30 GiB"\n',
            "gpus[0].processes: 30720 MiB",
        ),
        (
            '[[gpus]]\npreset = "l4"\n[gpus.activity]\nlevels = { sm = 1.5 }\n',
            "gpus[0].activity.levels.sm",
        ),
        (
            '[[gpus]]\npreset = "l4"\n[gpus.activity]\nlevels = { sm = [0.5, 0.2] }\n',
            "gpus[0].activity.levels.sm",
        ),
        ('[[gpus]]\npreset = "l4"\ncolour = "red"\n', "gpus[0].colour"),
        (
            '[[gpus]]\npreset = "l4"\n[[faults.xid]]\ngpu = 3\nat = 1\nxid = 79\n',
            "faults.xid[0].gpu",
        ),
        ('[[gpus]]\npreset = "l4"\n[[gpus.mig]]\nprofile = "1g.10gb"\n', "gpus[0].mig"),
        (
            '[[gpus]]\npreset = "l4"\n[[gpus.activity.segments]]\nstart = 10\nend = 100\n'
            "[[gpus.activity.segments]]\nstart = 50\n",
            "gpus[0].activity.segments",
        ),
        ('[faults]\nfunction_not_found = ["DeviceGetX"]\n', "faults.function_not_found"),
        (_pod('{ gpu = 0, claim = "c" }'), "pods[0].containers[0].devices[0]: claim is given"),
        (_pod('{ gpu = 0, form = "dra" }'), "pods[0].containers[0].devices[0]: claim is given"),
        (_pod('{ gpu = 0, form = "dra", claim = "c", replica = 1 }'), "has no replica"),
        (
            _pod('{ gpu = 0, form = "dra", claim = "c" }')
            + '[[pods]]\nnamespace = "n"\nname = "q"\n[[pods.containers]]\nname = "c"\n'
            'devices = [{ gpu = 1, form = "dra", claim = "c" }]\n',
            "pods[1].containers[0].devices: claim 'c' names GPU 1 here, GPU 0 elsewhere in n",
        ),
        ("[[gpus]\n", "not valid TOML"),
    ],
)
def test_invalid_scenarios_are_rejected_with_the_field(text: str, where: str) -> None:
    with pytest.raises(ScenarioError, match=r"^bad\.toml: ") as info:
        parse_scenario(text, source="bad.toml", default_name="bad")
    assert where in str(info.value)


def test_sizes_accept_units() -> None:
    scenario = parse_scenario(
        '[[gpus]]\npreset = "h100-sxm"\n'
        '[[gpus.processes]]\npid = 1\nname = "a"\nmemory = "1.5 GiB"\n'
        '[[gpus.processes]]\npid = 2\nname = "b"\nmemory = "2 GB"\n'
        '[[gpus.processes]]\npid = 3\nname = "c"\nmemory = 4096\n',
        default_name="sizes",
    )
    assert [p.memory for p in scenario.gpus[0].processes] == [1536 * MIB, 2 * 10**9, 4096]


def test_scenarios_are_frozen() -> None:
    scenario = load_scenario("demo")
    with pytest.raises(ValueError, match="frozen"):
        scenario.name = "other"


def test_the_documented_example_is_a_valid_scenario() -> None:
    import gpuwatch.simulate.scenario as module

    doc = module.__doc__ or ""
    block = doc.split("valid as it stands)::\n\n", 1)[1].split("\n\nHow values", 1)[0]
    text = "\n".join(line.removeprefix("    ") for line in block.splitlines())
    scenario = parse_scenario(text, source="example")
    assert scenario.name == "example"
    assert [g.preset for g in scenario.gpus] == ["h100-sxm", "a100-sxm4-80gb"]
    assert scenario.gpus[1].mig_enabled
    assert len(scenario.faults.xid) == 1
