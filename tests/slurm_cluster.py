"""A real one-node Slurm for the tests: Debian's munged, slurmctld and slurmd.

`SlurmCluster.start(root)` writes a munge key, `slurm.conf` and `gres.conf` under `root`
(state, spool, logs and PID files there too), creates `/dev/nvidia0..3` where they are
absent (the GRES `File=` must exist; `AutoDetect=off`), starts the three daemons in the
foreground as children of the test process and waits until the node is idle. `stop()`
cancels every job, ends each daemon by its own PID and removes the device nodes it made.
The clients find the cluster through `SLURM_CONF` (`env`), as Slurm's commands do.

The tests need root (slurmd runs jobs as their user; `mknod`), and fail (never skip)
when the Debian packages are missing: `make slurm` installs them.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.conftest import free_port, require_binary

GPUS = 4
"""GRES gpus of the node (`Gres=gpu:4`): `/dev/nvidia0..3`, the scenario's four H100s."""
_NVIDIA_MAJOR = 195
_START_TIMEOUT_S = 30.0

_GRES_IDX = re.compile(r"GRES=gpu(?::[^(\s]*)?\(IDX:([0-9,\-]+)\)")


def parse_index_ranges(text: str) -> tuple[int, ...]:
    """`0-1,3` -> (0, 1, 3): Slurm's list of GRES indexes."""
    out: list[int] = []
    for part in text.split(","):
        low, _, high = part.partition("-")
        out.extend(range(int(low), int(high or low) + 1))
    return tuple(out)


def _conf(root: Path, host: str, ports: tuple[int, int], munge_socket: Path, cgroups: bool) -> str:
    ctld_port, slurmd_port = ports
    proctrack, task = ("cgroup", "cgroup") if cgroups else ("linuxproc", "none")
    return f"""\
ClusterName=gpuwatch-test
SlurmctldHost={host}(127.0.0.1)
SlurmctldPort={ctld_port}
SlurmdPort={slurmd_port}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={munge_socket}
StateSaveLocation={root}/state
SlurmdSpoolDir={root}/spool
SlurmctldPidFile={root}/slurmctld.pid
SlurmdPidFile={root}/slurmd.pid
SlurmctldLogFile={root}/slurmctld.log
SlurmdLogFile={root}/slurmd.log
SlurmdParameters=config_overrides
GresTypes=gpu
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/builtin
ProctrackType=proctrack/{proctrack}
TaskPlugin=task/{task}
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
FirstJobId={1000 if cgroups else 1}
ReturnToService=2
MessageTimeout=10
NodeName={host} NodeAddr=127.0.0.1 CPUs=8 RealMemory=2000 Gres=gpu:{GPUS} State=UNKNOWN
PartitionName=debug Nodes={host} Default=YES State=UP MaxTime=INFINITE
"""


@dataclass
class SlurmCluster:
    """A running one-node cluster; `env` is the clients' environment (`SLURM_CONF`)."""

    root: Path
    host: str
    conf: Path
    env: dict[str, str]
    _daemons: list[subprocess.Popen[bytes]] = field(default_factory=list)
    _made_devices: list[Path] = field(default_factory=list)
    _cgroups_before: set[Path] = field(default_factory=set)

    @classmethod
    def start(cls, root: Path, *, cgroups: bool = False) -> SlurmCluster:
        """Start munged, slurmctld and slurmd with all their state under `root`; `cgroups`:
        `proctrack/cgroup` and `task/cgroup` with `ConstrainDevices=yes` (cgroup v1), so a
        job sees only its GPUs' device nodes and `CUDA_VISIBLE_DEVICES` counts from 0."""
        binaries = {
            name: require_binary(name, installs="Debian's slurmctld, slurmd, slurm-client, munge")
            for name in ("munged", "mungekey", "slurmctld", "slurmd", "sbatch", "scontrol")
        }
        if os.geteuid() != 0:
            pytest.fail("the Slurm tests run slurmd and mknod: run them as root")
        host = socket.gethostname().split(".")[0]
        for sub in ("state", "spool", "out", "munge"):
            (root / sub).mkdir(parents=True, exist_ok=True)
        (root / "munge").chmod(0o700)
        key = root / "munge" / "munge.key"
        subprocess.run([binaries["mungekey"], "--create", f"--keyfile={key}"], check=True)
        munge_socket = root / "munge" / "munge.socket"
        conf = root / "slurm.conf"
        ports = (free_port(), free_port())
        conf.write_text(_conf(root, host, ports, munge_socket, cgroups), encoding="utf-8")
        if cgroups:
            version = "v2" if Path("/sys/fs/cgroup/cgroup.controllers").exists() else "v1"
            (root / "cgroup.conf").write_text(
                f"CgroupPlugin=cgroup/{version}\nCgroupAutomount=no\nConstrainDevices=yes\n",
                encoding="utf-8",
            )
        (root / "gres.conf").write_text(
            f"AutoDetect=off\nName=gpu File=/dev/nvidia[0-{GPUS - 1}]\n", encoding="utf-8"
        )
        env = {**os.environ, "SLURM_CONF": str(conf)}
        cluster = cls(root, host, conf, env, _cgroups_before=_slurm_cgroups(host))
        try:
            cluster._make_devices()
            cluster._spawn(
                "munged",
                [
                    binaries["munged"],
                    "--force",
                    "--foreground",
                    f"--socket={munge_socket}",
                    f"--key-file={key}",
                    f"--pid-file={root}/munge/munged.pid",
                    f"--seed-file={root}/munge/munged.seed",
                    f"--log-file={root}/munge/munged.log",
                ],
            )
            cluster._wait(munge_socket.exists, "munged's socket")
            cluster._spawn("slurmctld", [binaries["slurmctld"], "-D", "-i", "-f", str(conf)])
            cluster._spawn("slurmd", [binaries["slurmd"], "-D", "-f", str(conf)])
            cluster._wait(cluster._node_idle, "the node to be idle")
        except BaseException:
            cluster.stop()
            raise
        return cluster

    def _make_devices(self) -> None:
        for minor in range(GPUS):
            path = Path(f"/dev/nvidia{minor}")
            if not path.exists():
                os.mknod(path, 0o600 | 0o020000, os.makedev(_NVIDIA_MAJOR, minor))
                self._made_devices.append(path)

    def _spawn(self, name: str, argv: list[str]) -> None:
        with (self.root / f"{name}.stdout").open("wb") as out:
            proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=self.env)
        self._daemons.append(proc)

    def _wait(self, ready: Callable[[], bool], what: str) -> None:
        deadline = time.monotonic() + _START_TIMEOUT_S
        while time.monotonic() < deadline:
            dead = [p for p in self._daemons if p.poll() is not None]
            if dead:
                pytest.fail(f"a daemon exited ({dead[0].returncode}): see the logs in {self.root}")
            if ready():
                return
            time.sleep(0.2)
        pytest.fail(f"waited {_START_TIMEOUT_S:.0f} s for {what}: see the logs in {self.root}")

    def _node_idle(self) -> bool:
        out = self.run(["sinfo", "-h", "-N", "-o", "%t"], check=False)
        return out.strip() == "idle"

    def run(self, argv: Sequence[str], *, check: bool = True) -> str:
        """A client command against this cluster; its stdout."""
        done = subprocess.run(
            list(argv), env=self.env, capture_output=True, text=True, check=False, timeout=30
        )
        if check and done.returncode != 0:
            raise AssertionError(f"{' '.join(argv)} exited {done.returncode}: {done.stderr}")
        return done.stdout

    def sbatch(self, *options: str, wrap: str) -> str:
        """Submit a batch job (`--wrap`); its job ID."""
        out = self.run(
            ["sbatch", "--parsable", f"--output={self.root}/out/%j.out", *options, "--wrap", wrap]
        )
        return out.strip().split(";")[0]

    def show_job(self, job_id: str) -> str:
        """`scontrol show job -d JOBID`."""
        return self.run(["scontrol", "show", "job", "-d", job_id])

    def job_state(self, job_id: str) -> str:
        """The job's state word (RUNNING, PENDING, COMPLETED...); "" once forgotten."""
        shown = self.run(["scontrol", "show", "job", job_id], check=False)
        match = re.search(r"JobState=(\S+)", shown)
        return match.group(1) if match else ""

    def gres_indexes(self, job_id: str) -> tuple[int, ...]:
        """The GPU indexes Slurm assigned the running job, read back from `scontrol -d`."""
        match = _GRES_IDX.search(self.show_job(job_id))
        assert match is not None, self.show_job(job_id)
        return parse_index_ranges(match.group(1))

    def wait_running(self, job_id: str, *, timeout_s: float = 30.0) -> None:
        """Wait until the job runs (its processes exist)."""
        self._wait_state(job_id, {"RUNNING"}, timeout_s)
        self._wait(lambda: bool(self.job_pids(job_id)), f"job {job_id}'s processes")

    def wait_ended(self, job_id: str, *, timeout_s: float = 30.0) -> None:
        """Wait until the job has no process left."""
        self._wait_state(job_id, {"CANCELLED", "COMPLETED", "FAILED", ""}, timeout_s)
        self._wait(lambda: not self.job_pids(job_id), f"job {job_id}'s processes to end")

    def _wait_state(self, job_id: str, states: set[str], timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while (state := self.job_state(job_id)) not in states:
            if time.monotonic() > deadline:
                pytest.fail(f"job {job_id} is {state}, not {sorted(states)}: {self.root}")
            time.sleep(0.2)

    def job_pids(self, job_id: str) -> tuple[int, ...]:
        """The job's processes (`scontrol listpids`), slurmstepd excluded."""
        out = self.run(["scontrol", "listpids", job_id], check=False)
        pids = [int(line.split()[0]) for line in out.splitlines()[1:] if line.split()]
        return tuple(p for p in pids if _comm(p) not in ("", "slurmstepd"))

    def scancel(self, job_id: str) -> None:
        """Cancel one job."""
        self.run(["scancel", job_id])

    def stop(self) -> None:
        """Cancel every job, end the daemons (by their PIDs), remove the device nodes."""
        if self._daemons and self._daemons[0].poll() is None:
            self.run(["scancel", "--full", "--user", "root"], check=False)
            deadline = time.monotonic() + 10
            while self.run(["squeue", "-h"], check=False).strip():
                if time.monotonic() > deadline:
                    break
                time.sleep(0.2)
        for proc in reversed(self._daemons):
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
        self._daemons.clear()
        for top in _slurm_cgroups(self.host) - self._cgroups_before:
            _remove_cgroup(top)  # slurmd leaves its (empty) slurm_<host> hierarchy behind
        for path in self._made_devices:
            path.unlink(missing_ok=True)
        self._made_devices.clear()


def _comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text(encoding="utf-8").strip()
    except OSError:
        return ""


def _slurm_cgroups(host: str) -> set[Path]:
    """The `slurm_<host>` cgroup folders slurmd makes under each v1 controller (or v2)."""
    root = Path("/sys/fs/cgroup")
    return set(root.glob(f"*/slurm_{host}")) | set(root.glob(f"slurm_{host}"))


def _remove_cgroup(top: Path) -> None:
    """rmdir a cgroup folder and its children, deepest first (cgroups go only by rmdir)."""
    for path in sorted((p for p in top.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts)):
        path.rmdir()
    top.rmdir()
