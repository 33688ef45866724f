"""The Slurm collector: which job (and step) holds each GPU of this node.

Two halves, as the pod attribution's, so slurmctld is never asked on the tick:

- `refresh()` runs every `slurm.list_interval_seconds` on the agent's scheduler: one
  `squeue --json --states=RUNNING -w <node>` (the jobs on this node with their GRES
  indexes, user, account, partition) and a re-read of `gres.conf` (GRES index -> device
  minor). Its outcome is `gpuwatch_collector_success{collector="slurm"}`, one log line per
  change of failure reason. A listing older than `STALE_LISTINGS` intervals is stale: its
  holds are kept and marked.
- `attribute(gpus)` runs in every tick: it reads `<proc_root>/<pid>/environ` of each
  process NVML lists on a GPU (cached per PID while it lives; else its `job_<id>` cgroup)
  and joins those jobs with the listing. A job holds a GPU when the listing gives it that
  GRES index, or when its processes' environment names it (a job started since the last
  listing); it runs there when one of its processes is on that GPU.

Nothing is copied per job onto the GPU series: `gpuwatch_gpu_job_info` is the join.
"""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from prometheus_client.metrics_core import Metric

from gpuwatch.analysis.activity import works_alone
from gpuwatch.collectors.listing import FailureReason, Listings
from gpuwatch.core.clock import Clock
from gpuwatch.core.failures import CollectorFailedError
from gpuwatch.core.jobs import GpuJobs, JobAllocationSample, JobAttribution, JobRef
from gpuwatch.core.snapshot import CollectorResult, FleetSnapshot, GpuSample
from gpuwatch.slurm.config import SlurmConfig
from gpuwatch.slurm.evidence import (
    JobProcess,
    SlurmJob,
    parse_environ,
    parse_gres_conf,
    parse_job_cgroup,
    slurm_conf_path,
)
from gpuwatch.slurm.queue import SqueueError, list_node_jobs
from gpuwatch.slurm.reclaim import Reclaimer

log = logging.getLogger(__name__)

STALE_LISTINGS = 3
"""A listing older than this many list intervals is stale: kept and marked."""

_UNREADABLE = "unreadable"
"""`_process`'s answer for a PID whose environment and cgroup cannot be read (not cached)."""


@dataclass(frozen=True, slots=True)
class JobListing:
    """What one refresh read: the node's running jobs and the GRES index -> minor map."""

    taken_at_seconds: float
    jobs: tuple[SlurmJob, ...]
    minors: tuple[int, ...] | None  # gres.conf's File= order; None: by minor number


@dataclass(frozen=True, slots=True)
class _Known:
    """What this tick knows: each readable GPU process's job, the PIDs whose job cannot be
    read, and the listed jobs' user, account and partition by job ID."""

    jobs: dict[int, JobProcess]
    unreadable: set[int]
    refs: dict[str, JobRef]


class SlurmCollector:
    """Lists the node's jobs off the tick; attributes GPUs to jobs in the tick."""

    name = "slurm"

    def __init__(
        self,
        config: SlurmConfig,
        clock: Clock,
        *,
        environ: Mapping[str, str] | None = None,
        list_interval_seconds: float | None = None,
        noise_floor_ratio: float = 0.01,
    ) -> None:
        """`environ`: where `SLURM_CONF` is looked up (default `os.environ`)."""
        self._config = config
        self._clock = clock
        self._environ = dict(os.environ if environ is None else environ)
        self._conf = slurm_conf_path(config.slurm_conf, self._environ)
        self._node = config.node_name or socket.gethostname().split(".")[0]
        self._interval = list_interval_seconds or config.list_interval_seconds
        self._noise_floor = noise_floor_ratio
        self._listings = Listings(self.name, clock, self._list)
        self._failure: FailureReason[str] = FailureReason()
        self._processes: dict[int, JobProcess | None] = {}  # readable PIDs only
        self._reclaimer = (
            None if config.reclaim_mode == "off" else Reclaimer(config, self._conf, self._environ)
        )

    @property
    def node(self) -> str:
        """The node name squeue is asked about."""
        return self._node

    @property
    def slurm_conf(self) -> Path:
        """The slurm.conf the agent found."""
        return self._conf

    @property
    def result(self) -> CollectorResult:
        """How the last refresh went (success 0 before the first)."""
        return self._listings.result

    def refresh(self) -> None:
        """Ask slurmctld once (blocking I/O: the scheduler's job)."""
        self._listings.refresh()

    def _list(self) -> JobListing:
        try:
            jobs = list_node_jobs(
                self._config.squeue_command,
                self._node,
                self._conf,
                self._environ,
                self._config.timeout_seconds,
            )
        except SqueueError as exc:
            if self._failure.fail(exc.reason):
                log.warning(
                    "squeue for node %s (SLURM_CONF=%s) failed: %s; job holds are kept, "
                    "marked stale after %d intervals",
                    self._node,
                    self._conf,
                    exc,
                    STALE_LISTINGS,
                )
            raise CollectorFailedError(str(exc)) from exc
        if self._failure.succeed():
            log.info("squeue for node %s answers again", self._node)
        return JobListing(self._clock.time(), jobs, self._gres_minors())

    def _gres_minors(self) -> tuple[int, ...] | None:
        try:
            text = (self._conf.parent / "gres.conf").read_text("utf-8", "replace")
        except OSError:
            return None
        return parse_gres_conf(text, self._node)

    def review(self, snapshot: FleetSnapshot | None) -> None:
        """Reclaim's review of the newest snapshot against the newest listing (after
        `refresh`, on the same job; blocking: scontrol and scancel)."""
        listing = self.current_listing()
        if self._reclaimer is not None:
            jobs = {} if listing is None else {j.job_id: j for j in listing.jobs}
            self._reclaimer.review(snapshot, jobs)

    def reclaim_families(self) -> Iterator[Metric]:
        """Reclaim's counters (none while `reclaim_mode` is off)."""
        if self._reclaimer is not None:
            yield from self._reclaimer.families()

    def current_listing(self) -> JobListing | None:
        """The newest listing (fresh or stale), else None."""
        return self._listings.current()

    def attribute(self, gpus: tuple[GpuSample, ...]) -> tuple[JobAttribution, CollectorResult]:
        """The tick's `JobAttribution` and the last refresh's result."""
        listing = self.current_listing()
        pids = {p.pid for g in gpus for p in g.processes or ()}
        read = {pid: self._process(pid) for pid in pids}
        self._processes = {pid: j for pid, j in read.items() if not isinstance(j, str)}
        known = {pid: j for pid, j in self._processes.items() if j is not None}
        unreadable = {pid for pid, j in read.items() if isinstance(j, str)}
        gres = _gres_of(gpus, None if listing is None else listing.minors)
        listed = () if listing is None else listing.jobs
        refs = {
            job.job_id: JobRef(job.job_id, job.user, job.account, job.partition) for job in listed
        }
        out: list[GpuJobs] = []
        for gpu in gpus:
            index = gres.get(gpu.identity.uuid)
            holders = [j.job_id for j in listed if index is not None and index in j.gpus]
            for proc in known.values():
                named = index is not None and proc.gpus is not None and index in proc.gpus
                if named and proc.job_id not in holders:
                    holders.append(proc.job_id)
            out.append(self._join(gpu, index, holders, _Known(known, unreadable, refs)))
        attribution = JobAttribution(
            None if listing is None else listing.taken_at_seconds,
            len(listed),
            tuple(out),
            stale=listing is not None
            and self._clock.time() - listing.taken_at_seconds > STALE_LISTINGS * self._interval,
            reclaimed=() if self._reclaimer is None else self._reclaimer.recent(self._clock.time()),
        )
        return attribution, self._listings.result

    def _join(
        self,
        gpu: GpuSample,
        index: int | None,
        holders: list[str],
        known: _Known,
    ) -> GpuJobs:
        """One GPU's holders joined with its processes; a process whose job cannot be read
        makes its holders' allocated-idle unknown (`pid_unmapped`), never 1."""
        processes = gpu.processes
        reason = None
        if processes is None:
            reason = "no_process_list"
        elif any(p.pid in known.unreadable for p in processes):
            reason = "pid_unmapped"
        allocations = []
        for job_id in holders:
            mine = [
                p
                for p in processes or ()
                if p.pid in known.jobs and known.jobs[p.pid].job_id == job_id
            ]
            allocations.append(
                JobAllocationSample(
                    gpu.identity.index,
                    gpu.identity.uuid,
                    known.refs.get(job_id, JobRef(job_id, "", "", "")),
                    -1 if index is None else index,
                    tuple(sorted({known.jobs[p.pid].step or "" for p in mine} - {""})),
                    tuple(sorted({p.pid for p in mine})),
                    reason,
                    works_alone(gpu, None, [None] * len(holders), self._noise_floor),
                )
            )
        unowned = tuple(
            sorted(
                p.pid
                for p in processes or ()
                if p.pid not in known.jobs or known.jobs[p.pid].job_id not in holders
            )
        )
        return GpuJobs(gpu.identity.index, gpu.identity.uuid, tuple(allocations), unowned)

    def _process(self, pid: int) -> JobProcess | str | None:
        """The PID's job (None: in no job), cached while the PID is listed; `_UNREADABLE`
        when neither its environment nor its cgroup can be read (retried every tick)."""
        if pid in self._processes:
            return self._processes[pid]
        root = Path(self._config.proc_root) / str(pid)
        readable = False
        try:
            found = parse_environ((root / "environ").read_bytes())
            readable = True
        except OSError:
            found = None
        if found is not None:
            return found
        try:
            found = parse_job_cgroup((root / "cgroup").read_text("utf-8", "replace"))
        except OSError:
            return None if readable else _UNREADABLE
        return found


def _gres_of(gpus: tuple[GpuSample, ...], minors: tuple[int, ...] | None) -> dict[str, int]:
    """Each GPU's GRES index by UUID: its minor number's position in gres.conf's `File=`
    list, else its rank among the GPUs' minor numbers (`AutoDetect`), else its NVML index."""
    by_minor = {g.identity.minor_number: g.identity.uuid for g in gpus}
    if minors is not None:
        return {by_minor[m]: i for i, m in enumerate(minors) if m in by_minor}
    if all(g.identity.minor_number is not None for g in gpus):
        ranked = sorted(gpus, key=lambda g: g.identity.minor_number or 0)
        return {g.identity.uuid: i for i, g in enumerate(ranked)}
    return {g.identity.uuid: g.identity.index for g in gpus}
