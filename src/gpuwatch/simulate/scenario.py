"""Scenarios: a simulated fleet described in TOML, validated by pydantic.

A scenario is data only. `load_scenario("demo")` reads a built-in one (shipped in
``gpuwatch/simulate/scenarios/*.toml``; `scenario_names()` lists them); any other
argument is a path to a ``.toml`` file. Errors raise `ScenarioError` (a `ValueError`)
naming the file and the offending field, e.g.
``demo.toml: gpus[0].processes[1].memory: ...``.

Scenario format
===============

Times are seconds of scenario time (0 = when the stand-in starts), fractions are
0-1, rates are MiB/s, sizes are bytes or strings with a unit (``"30 GiB"``,
``"512 MiB"``, ``"72 GB"``; ``KiB/MiB/GiB/TiB`` are binary, ``KB/MB/GB/TB`` decimal).
Every table rejects unknown keys. A complete example (valid as it stands)::

    name = "example"                   # optional: defaults to the file name
    description = "what this fleet shows"
    seed = 0                           # changes every jittered or drawn value
    # identity = "demo"                # derive GPU identities and noise from another
                                       # name: a variant of that scenario (demo-dra)

    [driver]                           # optional; these are the defaults
    version = "570.133.20"             # nvmlSystemGetDriverVersion
    nvml_version = "12.570.133.20"     # nvmlSystemGetNVMLVersion
    cuda_version = 12080               # nvmlSystemGetCudaDriverVersion (12.8)
    process_struct_bytes = 24          # 32: an R535 driver, whose *RunningProcesses_v3
                                       # write 32-byte entries (binding >= 12.535.161
                                       # reads 24) and which lacks the symbol
                                       # nvmlDeviceGetRunningProcessDetailList

    [[gpus]]                           # one table per GPU, in index order
    preset = "h100-sxm"                # a key of presets.toml (`PRESETS`)
    # Identity is derived from the scenario name (or its `identity`) and index unless
    # overridden:
    # uuid = "GPU-...", serial = "1654...", pci_bus_id = "00000000:18:00.0",
    # minor_number = 3 (/dev/nvidia3; default: the indexes in reverse order)
    power_limit_w = 700                # enforced limit (default: the preset's)
    ecc_errors = { corrected = 0, uncorrected = 0 }   # aggregate counts at t = 0

    [gpus.activity]                    # default: idle (every level 0)
    vary_every = 60                    # seconds per draw of a [lo, hi] level
    jitter = 0.02                      # +-2 % noise, redrawn every simulated second

    [gpus.activity.levels]             # or inline: levels = { util = 0.97, sm = 0.9 }
    util = 0.97                        # a kernel is running (utilization .gpu)
    sm = 0.9                           # GPM SM active
    occupancy = 0.5                    # GPM SM occupancy
    tensor = 0.6                       # GPM tensor active
    dram = 0.5                         # GPM DRAM bandwidth; utilization .memory (busy
                                       # time) is its square root, a different measure
    pcie_tx_mib_s = 600
    pcie_rx_mib_s = 2400
    nvlink_tx_mib_s = 1500
    nvlink_rx_mib_s = 1500
    # power_w = 300                    # pins the power instead of following activity

    [[gpus.activity.periodic]]         # a 120 s pause every 1200 s, first at 1080 s
    every = 1200
    duration = 120
    offset = 1080
    levels = { pcie_rx_mib_s = 150 }   # levels not given are 0

    [[gpus.activity.segments]]         # replaces the top level in [start, end)
    start = 3600
    end = 7200                         # omit for "until the end"
    levels = { util = [0.3, 0.8], sm = [0.1, 0.35] }   # one draw per vary_every window
    # a segment may have its own [[gpus.activity.segments.periodic]] windows

    [[gpus.processes]]
    pid = 4242
    name = "python3 train.py"          # what nvmlSystemGetProcessName returns
    kind = "compute"                   # or "graphics"
    memory = "72 GiB"                  # or memory_fraction = 0.9 (of total - reserved)
    start = 0                          # running in [start, end)
    end = 86400                        # optional
    share = 1.0                        # weight in the GPU's activity (0: holds memory only)
    memory_visible = true              # false: usedGpuMemory None (no privileges)
    # name_encoding = "latin-1"        # the command line's bytes: "café" is then not
                                       # UTF-8, and pynvml's strict decoding fails on it

    [[gpus]]                           # MIG (A100, H100, H200): instances carry the
    preset = "a100-sxm4-80gb"          # activity and processes; mig_mode = true with
    mig_mode = true                    # no instances is MIG on and empty
    [[gpus.mig]]
    profile = "3g.40gb"                # "<slices>g.<GB>gb"; memory defaults from it
    gpu_instance_id = 2                # default: position + 1
    compute_instance_id = 0
    memory = "40192 MiB"               # optional; uuid = "MIG-..." optional too

    [gpus.mig.activity]                # same format as gpus.activity
    levels = { util = 0.8, sm = 0.6 }

    [[gpus.mig.processes]]             # same format as gpus.processes
    pid = 7001
    name = "python3 finetune.py"
    memory = "30 GiB"

    [[gpus.mig_changes]]               # MIG mode set at runtime (nvidia-smi -mig): the
    at = 600                           # pending mode from `at`, the current one from
    enabled = false                    # `applied` (a GPU reset; omit: stays pending).
    applied = 660                      # With changes, MIG starts as mig_mode (default
                                       # off) and gpus.processes run while it is off

    [faults]                           # all optional
    function_not_found = ["nvmlDeviceGetMemoryInfo_v2"]   # C symbols the driver lacks

    [[faults.gpu_lost]]                # every call on the GPU fails from `at` (to `until`)
    gpu = 0
    at = 7200
    error = "gpu_is_lost"              # or "unknown"; until = 7300 makes it transient

    [[faults.not_supported]]           # [[faults.no_permission]] has the same keys
    gpu = 1                            # omit for every GPU and the system calls
    functions = ["nvmlDeviceGetTotalEnergyConsumption"]
    start = 0                          # optional window; end = ... too

    [[faults.errors]]                  # any NVML error, with the keys of not_supported:
    error = "timeout"                  # NVML_ERROR_<NAME> in lower case: unknown,
    functions = ["nvmlDeviceGetPowerUsage"]   # gpu_is_lost, timeout, not_found,
    gpu = 1                            # insufficient_power, reset_required, ...
    start = 30
    end = 40

    [[faults.slow_calls]]              # the call sleeps (injected `sleep`) this long
    function = "nvmlDeviceGetPcieThroughput"
    seconds = 0.5
    gpu = 1                            # optional

    [[faults.driver_error]]            # every call fails, nvmlInit too
    start = 300
    error = "driver_not_loaded"        # default "lib_rm_version_mismatch": for good (no end)
    end = 330                          # driver_not_loaded only
    requires_reinit = true             # after `end`, fail until nvmlInit succeeds again

    [[faults.xid]]                     # delivered once per event set by nvmlEventSetWait
    gpu = 1
    at = 60
    xid = 48                           # 48/94/95 also count an uncorrected ECC error

    [[workloads]]                      # what runs where, for the sizing model; same keys as
    gpu_index = 0                      # the config's [[workloads]] (docs/analysis.md), and
    model = "llama-3.1-8b"             # they hold whatever --config is given
    context = 8192
    batch = 16

    [[token_servers]]                  # a vLLM /metrics on loopback, counting tokens at
    gpu_index = 0                      # these rates x the GPU's SM activity (tokens/s)
    prompt_tokens_per_second = 20000
    generation_tokens_per_second = 4000
    prefix_cache_hit_ratio = 0.25      # optional: served as vllm:prompt_tokens_by_source
    gpu_memory_utilization = 0.9       # optional: the KV cache pool vLLM would size
    block_size = 16                    # (vllm:cache_config_info, vllm:kv_cache_usage_perc)

    [[prices]]                         # static billing prices, after the config's
    gpu_model = "NVIDIA H100 80GB HBM3"   # ([[billing.static]] keys, docs/billing.md)
    usd_per_hour = 6.88
    per_gpu = true

How values follow activity: power goes from the preset's idle floor toward its limit
with ``0.7 sm + 0.3 tensor + 0.25 dram`` (capped at the enforced limit, which then
sets SwPowerCap), temperature follows power, clocks are the idle clocks when nothing
runs and the maximum otherwise. See `gpuwatch.simulate.stand_in` for each call.
"""

from __future__ import annotations

import tomllib
from collections.abc import Iterable, Iterator
from importlib import resources
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from gpuwatch.billing import StaticPrice
from gpuwatch.core.units import MIB
from gpuwatch.simulate.faults import Faults
from gpuwatch.simulate.gpus import DriverInfo, GpuConfig, ProcessConfig
from gpuwatch.simulate.pods import NodeConfig, PodConfig, PodContainer
from gpuwatch.simulate.slurm_node import SlurmNodeConfig
from gpuwatch.workloads import WorkloadDeclaration


class ScenarioError(ValueError):
    """A scenario could not be found, read or validated; the message says where."""


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class SimulatedTokenServer(_Model):
    """An inference server's /metrics the simulator serves on loopback for a GPU."""

    gpu_index: int = Field(ge=0)
    kind: Literal["vllm"] = "vllm"
    prompt_tokens_per_second: float = Field(default=20_000.0, ge=0.0)  # at full SM activity
    generation_tokens_per_second: float = Field(default=4_000.0, ge=0.0)
    model_name: str = "meta-llama/Llama-3.1-8B-Instruct"
    interval_seconds: float = Field(default=15.0, ge=1.0)  # the token source's scrape period
    prefix_cache_hit_ratio: float = Field(default=0.0, ge=0.0, le=1.0)  # of prompt tokens
    gpu_memory_utilization: float = Field(default=0.9, gt=0.0, le=1.0)  # sizes the KV pool
    block_size: int = Field(default=16, ge=1, le=1024)  # tokens per KV cache block


class Scenario(_Model):
    """A simulated fleet: GPUs with workloads over time, and faults."""

    name: str = Field(min_length=1)
    description: str = ""
    seed: int = 0
    # the name the GPUs' UUIDs, serials and noise derive from (default: `name`): a variant
    # of another scenario (demo-dra of demo) keeps its GPUs identical, value for value
    identity: str | None = Field(default=None, min_length=1)

    @property
    def identity_name(self) -> str:
        """`identity`, else `name`."""
        return self.identity or self.name

    driver: DriverInfo = DriverInfo()
    gpus: tuple[GpuConfig, ...] = ()
    faults: Faults = Faults()
    workloads: tuple[WorkloadDeclaration, ...] = ()  # hold with any --config
    token_servers: tuple[SimulatedTokenServer, ...] = ()
    prices: tuple[StaticPrice, ...] = ()  # static billing prices, after the config's
    pods: tuple[PodConfig, ...] = ()  # a simulated Kubernetes node (gpuwatch.simulate.pods)
    kubernetes: NodeConfig = NodeConfig()  # how the agent sees that node
    slurm: SlurmNodeConfig = SlurmNodeConfig()  # real Slurm jobs' processes on these GPUs

    @model_validator(mode="after")
    def _consistent(self) -> Scenario:
        problems = list(self._problems())
        if problems:
            raise ValueError("; ".join(problems))
        return self

    def _problems(self) -> Iterator[str]:
        for path, index in self.faults.gpu_indices():
            if index >= len(self.gpus):
                yield f"{path}: GPU {index} does not exist (the scenario has {len(self.gpus)})"
        uuids: set[str] = set()
        names_by_pid: dict[int, str] = {}
        for i, gpu in enumerate(self.gpus):
            where = f"gpus[{i}]"
            yield from _gpu_problems(where, gpu)
            for uuid in [gpu.uuid, *(m.uuid for m in gpu.mig)]:
                if uuid is not None and uuid in uuids:
                    yield f"{where}: uuid {uuid} is used twice"
                uuids.add(uuid or "")
            for path, proc in _all_processes(where, gpu):
                known = names_by_pid.setdefault(proc.pid, proc.name)
                if known != proc.name:
                    yield f"{path}.name: pid {proc.pid} is already named {known!r}"
        yield from _pod_problems(self.pods, self.gpus, set(names_by_pid))


def _pod_problems(
    pods: tuple[PodConfig, ...], gpus: tuple[GpuConfig, ...], pids: set[int]
) -> Iterator[str]:
    seen_pids: dict[int, str] = {}
    names: set[tuple[str, str]] = set()
    claims: dict[tuple[str, str], set[tuple[int, int | None]]] = {}
    for i, pod in enumerate(pods):
        if (pod.namespace, pod.name) in names:
            yield f"pods[{i}]: {pod.namespace}/{pod.name} is declared twice"
        names.add((pod.namespace, pod.name))
        for j, container in enumerate(pod.containers):
            where = f"pods[{i}].containers[{j}]"
            for k, device in enumerate(container.devices):
                if device.gpu >= len(gpus):
                    yield f"{where}.devices[{k}].gpu: GPU {device.gpu} does not exist"
                elif device.mig is not None and device.mig >= len(gpus[device.gpu].mig):
                    yield f"{where}.devices[{k}].mig: GPU {device.gpu} has no MIG {device.mig}"
            for claim, gpu_set in _claim_gpus(container).items():
                known = claims.setdefault((pod.namespace, claim), gpu_set)
                if known != gpu_set:
                    yield (
                        f"{where}.devices: claim {claim!r} names {_devices(gpu_set)} here, "
                        f"{_devices(known)} elsewhere in {pod.namespace}"
                    )
            for pid in container.pids:
                if pid not in pids:
                    yield f"{where}.pids: pid {pid} is no process of the scenario"
                elif pid in seen_pids:
                    yield f"{where}.pids: pid {pid} is already in {seen_pids[pid]}"
                seen_pids.setdefault(pid, where)


def _claim_gpus(container: PodContainer) -> dict[str, set[tuple[int, int | None]]]:
    """The (GPU, MIG position) devices each DRA claim of a container names."""
    found: dict[str, set[tuple[int, int | None]]] = {}
    for device in container.devices:
        if device.claim is not None:
            found.setdefault(device.claim, set()).add((device.gpu, device.mig))
    return found


def _devices(found: set[tuple[int, int | None]]) -> str:
    return ", ".join(
        f"GPU {gpu}" + ("" if mig is None else f" MIG {mig}")
        for gpu, mig in sorted(found, key=lambda d: (d[0], -1 if d[1] is None else d[1]))
    )


def _all_processes(where: str, gpu: GpuConfig) -> Iterator[tuple[str, ProcessConfig]]:
    for j, proc in enumerate(gpu.processes):
        yield f"{where}.processes[{j}]", proc
    for k, mig in enumerate(gpu.mig):
        for j, proc in enumerate(mig.processes):
            yield f"{where}.mig[{k}].processes[{j}]", proc


def _gpu_problems(where: str, gpu: GpuConfig) -> Iterator[str]:
    preset = gpu.device
    usable = preset.memory_bytes - preset.reserved_bytes
    if gpu.mig_changes:
        yield from _mig_change_problems(where, gpu, usable)
        return
    if gpu.mig_enabled:
        if preset.mig_max == 0:
            yield f"{where}.mig: {preset.name} has no MIG"
            return
        if len(gpu.mig) > preset.mig_max:
            yield f"{where}.mig: at most {preset.mig_max} MIG devices"
        if gpu.processes:
            yield f"{where}.processes: with MIG on, list processes under gpus.mig"
        if sum(m.slices for m in gpu.mig) > 7:
            yield f"{where}.mig: more than 7 compute slices in all"
        if sum(m.memory_bytes() for m in gpu.mig) > usable:
            yield f"{where}.mig: instance memory exceeds the GPU's"
        ids = [m.gpu_instance_id or k + 1 for k, m in enumerate(gpu.mig)]
        if len(set(ids)) != len(ids):
            yield f"{where}.mig: gpu_instance_id values must be unique"
        for k, mig in enumerate(gpu.mig):
            yield from _memory_problems(f"{where}.mig[{k}]", mig.processes, mig.memory_bytes())
    elif gpu.mig:
        yield f"{where}.mig: instances listed but mig_mode is false"
    else:
        yield from _memory_problems(where, gpu.processes, usable)


def _mig_change_problems(where: str, gpu: GpuConfig, usable: int) -> Iterator[str]:
    """A GPU whose MIG mode changes: top-level processes run while MIG is off."""
    if gpu.device.mig_max == 0:
        yield f"{where}.mig_changes: {gpu.device.name} has no MIG"
        return
    times = [c.at for c in gpu.mig_changes]
    if times != sorted(times):
        yield f"{where}.mig_changes: list the changes in time order"
    if len(gpu.mig) > gpu.device.mig_max:
        yield f"{where}.mig: at most {gpu.device.mig_max} MIG devices"
    yield from _memory_problems(where, gpu.processes, usable)
    for k, mig in enumerate(gpu.mig):
        yield from _memory_problems(f"{where}.mig[{k}]", mig.processes, mig.memory_bytes())


def _memory_problems(where: str, processes: Iterable[ProcessConfig], usable: int) -> Iterator[str]:
    procs = list(processes)
    for proc in procs:
        held = sum(p.memory_bytes(usable) for p in procs if p.running(proc.start))
        if held > usable:
            yield (
                f"{where}.processes: {held // MIB} MiB held at t={proc.start:g} s exceeds "
                f"the {usable // MIB} MiB available"
            )
            return


# -- loading ---------------------------------------------------------------------------


def _builtin_dir() -> Any:
    return resources.files("gpuwatch.simulate").joinpath("scenarios")


def scenario_names() -> list[str]:
    """The built-in scenario names, sorted."""
    return sorted(
        entry.name.removesuffix(".toml")
        for entry in _builtin_dir().iterdir()
        if entry.name.endswith(".toml")
    )


def load_scenario(name_or_path: str | Path) -> Scenario:
    """A built-in scenario by name, or a scenario file by path; raises ScenarioError."""
    text_name = str(name_or_path)
    if text_name in scenario_names():
        entry = _builtin_dir().joinpath(f"{text_name}.toml")
        return parse_scenario(entry.read_text("utf-8"), source=f"{text_name}.toml")
    path = Path(name_or_path)
    if not path.is_file():
        raise ScenarioError(
            f"unknown scenario {text_name!r}: not a built-in ({', '.join(scenario_names())}) "
            "and no such file"
        )
    try:
        text = path.read_text("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ScenarioError(f"{path}: cannot read: {exc}") from exc
    return parse_scenario(text, source=str(path), default_name=path.stem)


def parse_scenario(text: str, source: str = "<scenario>", default_name: str = "") -> Scenario:
    """A scenario from TOML text; `source` names it in error messages."""
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ScenarioError(f"{source}: not valid TOML: {exc}") from exc
    if "name" not in raw and default_name:
        raw["name"] = default_name
    try:
        return Scenario.model_validate(raw)
    except ValidationError as exc:
        raise ScenarioError(_describe(source, exc)) from exc


def _describe(source: str, exc: ValidationError) -> str:
    lines = []
    for error in exc.errors(include_url=False):
        path = _path(error["loc"])
        message = str(error["msg"]).removeprefix("Value error, ")
        lines.append(f"{source}: {path + ': ' if path else ''}{message}")
    return "\n".join(lines)


def _path(loc: tuple[int | str, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part.startswith(("function-", "tagged-union", "float", "tuple")):
            continue  # pydantic's union-branch labels
        else:
            out += f".{part}" if out else part
    return out
