"""`gpuwatch run --simulate`: the simulated fleet the agent samples instead of NVML.

The pynvml stand-in on a scenario, on a scaled clock, with the scenario's kubelet and
inference servers started here, or (`--services FILE`) those another process runs
(`python -m gpuwatch.simulate.services`), on their simulated time. `cli.run` imports
this module only with `--simulate`: a real host's agent never loads `gpuwatch.simulate`,
and the servers' code loads only when they run here.
"""

from __future__ import annotations

from pathlib import Path

from gpuwatch.cli.common import Fleet, UsageError
from gpuwatch.core.clock import ScaledClock
from gpuwatch.simulate import ScenarioError, SimulatedNvml, load_scenario
from gpuwatch.simulate.endpoints import EndpointsError, ExternalServices, load_endpoints


def simulated_fleet(scenario_name: str, speed: float | None, services_file: Path | None) -> Fleet:
    """The scenario's fleet at `speed` simulated seconds per second; with `services_file`,
    on the external services' time (and their speed)."""
    external = _external_services(scenario_name, services_file)
    if speed is not None and speed <= 0:
        raise UsageError("--speed must be positive")
    try:
        scenario = load_scenario(scenario_name)
    except ScenarioError as exc:
        raise UsageError(str(exc)) from None
    if external is None:
        # lazy: the scenario's servers (token servers, the gRPC kubelet) load only when
        # they run in this process, not with --services (the chart's memory benchmark)
        from gpuwatch.simulate.services import ScenarioServices  # noqa: PLC0415

        clock = ScaledClock(speed or 1.0)
        nv = SimulatedNvml(scenario, clock=clock)
        services = ScenarioServices(nv, clock)
        services.start()
        return Fleet(
            nv, clock, scenario.workloads, services, scenario.prices, scenario.slurm.enabled
        )
    if speed is not None and speed != external.speed:
        raise UsageError(f"--speed {speed:g}: the --services run at --speed {external.speed:g}")
    clock = external.clock()
    nv = SimulatedNvml(scenario, clock=clock, start_time=external.scenario_start)
    return Fleet(nv, clock, scenario.workloads, external, scenario.prices, scenario.slurm.enabled)


def _external_services(scenario_name: str, path: Path | None) -> ExternalServices | None:
    """The `--services` FILE's services; None without one."""
    if path is None:
        return None
    try:
        return load_endpoints(path, scenario_name)
    except EndpointsError as exc:
        raise UsageError(f"--services: {exc}") from None
