"""A simulated fleet behind a faithful stand-in for the `pynvml` module.

    from gpuwatch.simulate import SimulatedNvml, load_scenario
    nv = SimulatedNvml(load_scenario("demo"), clock=clock)
    nv.nvmlInit()
    handle = nv.nvmlDeviceGetHandleByIndex(0)

Modules: `presets` (real GPU specifications), `scenario` (the TOML format, models and
loading), `timeline` (activity over time), `faults`, `device` (what each simulated GPU
reports), `gpm`, `events`, and `stand_in` (`SimulatedNvml`).
"""

from gpuwatch.simulate.presets import PRESETS, DevicePreset
from gpuwatch.simulate.scenario import Scenario, ScenarioError, load_scenario, scenario_names
from gpuwatch.simulate.stand_in import SimulatedNvml

__all__ = [
    "PRESETS",
    "DevicePreset",
    "Scenario",
    "ScenarioError",
    "SimulatedNvml",
    "load_scenario",
    "scenario_names",
]
