"""Reclaim, opt in (`[slurm] reclaim_mode`): warn the owner of a job that holds GPUs and
runs nothing on them, then cancel it, as HPC centres do by hand.

`Reclaimer.review(snapshot, listing)` runs on the Slurm list-interval job (never the
tick), after the squeue refresh. A job is a candidate while every GPU it holds is
allocated-idle in the snapshot (`hold_allocated_idle` true and the GPU's window verdict
`idle`, the rule behind `gpuwatch_gpu_job_allocated_idle`) and the listing is fresh. Its
clock starts at the first review that sees it so and restarts whenever one does not
(busy, unknown, a stale listing, an agent restart): nothing is ever done to a job that
was not allocated-idle at every review since. Each action happens once per idle spell:

- `warn` after `reclaim_warn_after_seconds`: a WARNING log line naming job, user and
  account, and (enforce) `scontrol update JobId=<id> Comment=<why>`, which the owner sees
  in `squeue`/`scontrol show job` and accounting keeps;
- `cancel` after `reclaim_cancel_after_seconds`: (enforce) `scancel <id>`.

`dry-run` logs and counts the same actions with `mode="dry-run"` and runs no command.
Commands run as argv lists (never a shell) with `SLURM_CONF` set and a timeout. A
cancelled job's "$ reclaimed" is its GPUs' $/h (each GPU's price split among its
holders) times the hours left of its time limit (squeue's `end_time` minus the wall
clock), at most `RECLAIM_CREDIT_CAP_HOURS`; counted on
`gpuwatch_slurm_reclaimed_usd_total{account, user}` in enforce mode only, and, per GPU
(its $/h share times those hours), in `recent()` for the snapshots, which carry it to
the history (`job_hours.reclaimed_usd`) on the hour of the snapshot that decided it.
"""

from __future__ import annotations

import logging
import re
import shlex
import subprocess
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from prometheus_client.core import CounterMetricFamily
from prometheus_client.metrics_core import Metric

from gpuwatch.core.jobs import WINDOW_IDLE_STATES, JobReclaim, JobRef
from gpuwatch.core.snapshot import FleetSnapshot
from gpuwatch.core.units import HOUR_SECONDS
from gpuwatch.slurm.config import SlurmConfig
from gpuwatch.slurm.evidence import SlurmJob

log = logging.getLogger(__name__)

RECLAIM_CREDIT_CAP_HOURS = 24.0
"""At most this many hours of a cancelled job's time left count as reclaimed (a job
without a time limit ends a year after it starts in squeue's answer)."""

RECLAIM_KEEP_SECONDS = 2 * HOUR_SECONDS
"""How long (snapshot time) a cancel's credit rides in the snapshots after it (`recent`)."""

ACTIONS = ("warn", "cancel", "warn_failed", "cancel_failed")
_JOB_ID = re.compile(r"^[0-9]+$")


@dataclass(frozen=True, slots=True)
class IdleJob:
    """A job every GPU of which is allocated-idle in one snapshot."""

    ref: JobRef
    gpus: int
    usd_per_hour: float  # its GPUs' prices, each split among the GPU's holders
    shares: tuple[tuple[str, float], ...] = ()  # (uuid, $/h share) of each GPU it holds


def idle_jobs(snapshot: FleetSnapshot) -> dict[str, IdleJob]:
    """The snapshot's jobs that hold GPUs and are allocated-idle on every one of them."""
    if snapshot.jobs is None:
        return {}
    states = {v.uuid: v.state for v in snapshot.verdicts}
    prices = {g.uuid: g.price.usd_per_hour for g in snapshot.cost.gpus if g.price is not None}
    idle: dict[str, tuple[JobRef, int, float, tuple[tuple[str, float], ...]]] = {}
    busy: set[str] = set()
    for gpu in snapshot.jobs.gpus:
        share = prices.get(gpu.uuid, 0.0) / max(len(gpu.allocations), 1)
        for hold in gpu.allocations:
            job_id = hold.job.job_id
            if hold.allocated_idle is True and states.get(gpu.uuid) in WINDOW_IDLE_STATES:
                ref, count, usd, shares = idle.get(job_id, (hold.job, 0, 0.0, ()))
                idle[job_id] = (ref, count + 1, usd + share, (*shares, (gpu.uuid, share)))
            else:
                busy.add(job_id)
    return {j: IdleJob(*v) for j, v in idle.items() if j not in busy}


class Reclaimer:
    """Keeps each candidate's idle clock and acts on it; its counters are exported."""

    def __init__(
        self,
        config: SlurmConfig,
        slurm_conf: Path,
        environ: Mapping[str, str],
        *,
        wall_time: Callable[[], float] = time.time,
    ) -> None:
        """`wall_time`: Slurm's clock (its `end_time` is wall time, not simulated time)."""
        self._config = config
        self._mode = config.reclaim_mode
        self._env = {**environ, "SLURM_CONF": str(slurm_conf)}
        self._wall_time = wall_time
        self._lock = threading.Lock()
        self._since: dict[str, float] = {}
        self._warned: set[str] = set()
        self._cancelled: set[str] = set()
        self._actions = dict.fromkeys(ACTIONS, 0)
        self._reclaimed: dict[tuple[str, str], float] = {}
        self._credits: list[JobReclaim] = []  # per GPU, newest last

    def review(self, snapshot: FleetSnapshot | None, listing: Mapping[str, SlurmJob]) -> None:
        """One review: start, keep or restart each job's idle clock; act where due."""
        if self._mode == "off":
            return
        fresh = (
            snapshot is not None
            and snapshot.jobs is not None
            and snapshot.jobs.listed_at_seconds is not None
            and not snapshot.jobs.stale
        )
        candidates = idle_jobs(snapshot) if fresh and snapshot is not None else {}
        candidates = {j: c for j, c in candidates.items() if j in listing and _JOB_ID.match(j)}
        for job_id in set(self._since) - set(candidates):
            self._since.pop(job_id)
            self._warned.discard(job_id)
            self._cancelled.discard(job_id)
        if snapshot is None:
            return
        now = snapshot.timestamp_seconds
        for job_id, job in sorted(candidates.items()):
            idle_for = now - self._since.setdefault(job_id, now)
            if idle_for >= self._config.reclaim_warn_after_seconds and job_id not in self._warned:
                self._warned.add(job_id)
                self._warn(job, idle_for)
            if (
                idle_for >= self._config.reclaim_cancel_after_seconds
                and job_id not in self._cancelled
            ):
                self._cancelled.add(job_id)
                self._cancel(job, idle_for, listing[job_id], now)

    def _warn(self, job: IdleJob, idle_for: float) -> None:
        ref = job.ref
        left = self._config.reclaim_cancel_after_seconds - idle_for
        log.warning(
            "reclaim (%s): warning job %s of user %r, account %r: holds %d GPU(s) "
            "($%.2f/h) and has run nothing on them for %.0f min; cancelled in %.0f min "
            "unless a process starts on them",
            self._mode,
            ref.job_id,
            ref.user,
            ref.account,
            job.gpus,
            job.usd_per_hour,
            idle_for / 60,
            max(left, 0.0) / 60,
        )
        if self._mode == "enforce":
            comment = (
                f"gpuwatch: holds {job.gpus} GPU(s) and has run nothing on them for "
                f"{idle_for / 60:.0f} min; cancelled in {max(left, 0.0) / 60:.0f} min "
                "unless a process starts on them"
            )
            argv = [
                *shlex.split(self._config.scontrol_command),
                "update",
                f"JobId={ref.job_id}",
                f"Comment={comment}",
            ]
            if not self._run(argv, "warn"):
                return
        self._count("warn")

    def _cancel(self, job: IdleJob, idle_for: float, listed: SlurmJob, now: float) -> None:
        ref = job.ref
        hours = 0.0
        if listed.end_time_seconds is not None:
            hours = max(listed.end_time_seconds - self._wall_time(), 0.0) / HOUR_SECONDS
        credited = min(hours, RECLAIM_CREDIT_CAP_HOURS)
        usd = job.usd_per_hour * credited
        log.warning(
            "reclaim (%s): %s job %s of user %r, account %r: allocated-idle on %d GPU(s) "
            "for %.0f min; reclaims $%.2f ($%.2f/h for the %.2f h left of its time limit)",
            self._mode,
            "cancelling" if self._mode == "enforce" else "would cancel",
            ref.job_id,
            ref.user,
            ref.account,
            job.gpus,
            idle_for / 60,
            usd,
            job.usd_per_hour,
            min(hours, RECLAIM_CREDIT_CAP_HOURS),
        )
        if self._mode == "enforce":
            argv = [*shlex.split(self._config.scancel_command), ref.job_id]
            if not self._run(argv, "cancel"):
                return
            with self._lock:
                key = (ref.account, ref.user)
                self._reclaimed[key] = self._reclaimed.get(key, 0.0) + usd
                self._credits.extend(
                    JobReclaim(ref, uuid, now, share * credited) for uuid, share in job.shares
                )
        self._count("cancel")

    def _run(self, argv: list[str], action: str) -> bool:
        """Run a Slurm command (argv, no shell); False, one ERROR line and
        `<action>_failed` counted when it fails."""
        try:
            done = subprocess.run(
                argv,
                env=self._env,
                capture_output=True,
                text=True,
                timeout=self._config.timeout_seconds,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            log.error("reclaim: %s failed: %s", argv[0], exc)
            self._count(f"{action}_failed")
            return False
        if done.returncode != 0:
            last = (done.stderr.strip().splitlines() or [""])[-1][:200]
            log.error("reclaim: %s exited %d: %s", argv[0], done.returncode, last)
            self._count(f"{action}_failed")
            return False
        return True

    def _count(self, action: str) -> None:
        with self._lock:
            self._actions[action] += 1

    def recent(self, now: float) -> tuple[JobReclaim, ...]:
        """The per-GPU credits of cancels in the last `RECLAIM_KEEP_SECONDS` before `now`
        (snapshot time), for the snapshots; older ones are dropped."""
        with self._lock:
            self._credits = [c for c in self._credits if c.at_seconds >= now - RECLAIM_KEEP_SECONDS]
            return tuple(self._credits)

    def families(self) -> Iterator[Metric]:
        """`gpuwatch_slurm_reclaim_actions_total{action, mode}` and
        `gpuwatch_slurm_reclaimed_usd_total{account, user}`."""
        actions = CounterMetricFamily(
            "gpuwatch_slurm_reclaim_actions",
            "Reclaim actions on allocated-idle Slurm jobs since the agent started: warn, "
            "cancel, and the Slurm commands that failed; mode: dry-run (nothing run) or "
            "enforce.",
            labels=("action", "mode"),
        )
        reclaimed = CounterMetricFamily(
            "gpuwatch_slurm_reclaimed_usd",
            "USD reclaimed by cancelling allocated-idle jobs (enforce only): their GPUs' "
            "$/h times the hours left of their time limit, at most 24 h each.",
            labels=("account", "user"),
        )
        with self._lock:
            for action, count in self._actions.items():
                actions.add_metric([action, self._mode], float(count))
            for (account, user), usd in sorted(self._reclaimed.items()):
                reclaimed.add_metric([account, user], usd)
        yield actions
        yield reclaimed  # without samples until a job is cancelled in enforce mode
