"""A simulated Slurm node's GPU processes: real processes of real Slurm jobs.

The contract (`[slurm] enabled = true` in a scenario, the built-in `slurm`): every live
process under `proc_root` whose environment names GPUs by global GRES index
(`SLURM_STEP_GPUS`, else `SLURM_JOB_GPUS`) is a compute process on those GPUs, as NVML
would list a CUDA process there; a job whose processes name no GPU holds its GRES and
runs nothing. GRES index g is the GPU whose minor number is g (`/dev/nvidia<g>`, as
`gres.conf`'s `File=/dev/nvidia[0-3]` orders them), not NVML's index. The processes run
no kernel: NVML keeps no utilization sample for them (NotFound), as for a held notebook.

`/proc` is rescanned at most once per `RESCAN_SECONDS` of real time (the stand-in is asked
once per GPU and call); between scans a listed process that has ended (no
`<proc_root>/<pid>` any more, or a zombie) is dropped at once, as NVML drops an exited process.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from gpuwatch.core.units import MIB
from gpuwatch.simulate.processes import SimProcess

RESCAN_SECONDS = 0.5
"""Real seconds between two scans of `proc_root`."""
CONTEXT_BYTES = 512 * MIB
"""GPU memory each job process holds (a CUDA context)."""


class SlurmNodeConfig(BaseModel):
    """`[slurm]` of a scenario: whether real Slurm jobs' processes are its GPU processes."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    enabled: bool = False
    proc_root: str = "/proc"


def named_gpus(raw: bytes) -> tuple[int, ...]:
    """The global GPU indexes a NUL-separated environment names (none: ())."""
    env = dict(item.partition(b"=")[::2] for item in raw.split(b"\0") if b"=" in item)
    named = env.get(b"SLURM_STEP_GPUS", env.get(b"SLURM_JOB_GPUS"))
    if not named:
        return ()
    out: set[int] = set()
    try:
        for part in named.decode("ascii").split(","):
            low, _, high = part.partition("-")
            out.update(range(int(low), int(high or low) + 1))
    except ValueError:
        return ()
    return tuple(sorted(out))


class SlurmNodeProcesses:
    """The live processes of `proc_root` that name GPUs, by global index."""

    def __init__(self, proc_root: Path, *, monotonic: Callable[[], float] = time.monotonic) -> None:
        self._root = proc_root
        self._monotonic = monotonic
        self._lock = threading.Lock()
        self._scanned_at = -math.inf
        self._on: dict[int, tuple[SimProcess, ...]] = {}
        self._names: dict[int, str] = {}

    def on_gpu(self, global_index: int) -> tuple[SimProcess, ...]:
        """The processes naming GPU `global_index`, as of the latest scan."""
        self._rescan()
        return tuple(p for p in self._on.get(global_index, ()) if self._alive(p.pid))

    def _alive(self, pid: int) -> bool:
        """The process exists and is no zombie (an exited process holds no GPU context)."""
        try:
            stat = (self._root / str(pid) / "stat").read_text("ascii", "replace")
        except OSError:
            return False
        return stat.rpartition(")")[2].split()[:1] not in (["Z"], ["X"])

    def name(self, pid: int) -> str | None:
        """A listed process's name (its `comm`), None when not listed."""
        self._rescan()
        return self._names.get(pid) if self._alive(pid) else None

    def _rescan(self) -> None:
        with self._lock:
            now = self._monotonic()
            if now - self._scanned_at < RESCAN_SECONDS:
                return
            self._scanned_at = now
            on: dict[int, list[SimProcess]] = {}
            names: dict[int, str] = {}
            for entry in self._root.iterdir():
                if not entry.name.isdigit():
                    continue
                try:
                    gpus = named_gpus((entry / "environ").read_bytes())
                    if not gpus:
                        continue
                    name = (entry / "comm").read_text("utf-8", "replace").strip()
                except OSError:
                    continue  # gone, or not ours to read
                pid = int(entry.name)
                names[pid] = name
                proc = SimProcess(
                    pid, name, "compute", CONTEXT_BYTES, -math.inf, math.inf, 1.0, True
                )
                for gpu in gpus:
                    on.setdefault(gpu, []).append(proc)
            self._on = {gpu: tuple(procs) for gpu, procs in on.items()}
            self._names = names
