"""A simulated fleet behind a faithful stand-in for the `pynvml` module.

    from gpuwatch.simulate import SimulatedNvml, load_scenario
    nv = SimulatedNvml(load_scenario("demo"), clock=clock)
    nv.nvmlInit()
    handle = nv.nvmlDeviceGetHandleByIndex(0)

Modules: `presets` (real GPU specifications), `scenario` (the TOML format, the
scenario-wide checks and loading), `gpus` (a scenario's `[[gpus]]` and `[driver]`
tables), `pods` (`[[pods]]`), `timeline` (activity over time), `faults`, `noise`,
`device` (what each simulated GPU reports), `processes` (its processes and their
utilization samples), `gpm`, `events`, `stand_in` (`SimulatedNvml`), and the services a
scenario brings: `vllm_server`, `kubelet`, `cluster`, `services`, `endpoints`.

What must not live here: code the agent runs on a real host (the stand-in is injected
as the `pynvml` module, never imported by nvml/, collectors/ or export/), helpers only
tests use (tests/). Layer: with collectors, export and history, above config; only the
CLI's `--simulate` and the tests import it.
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
