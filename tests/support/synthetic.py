"""A synthetic month of a gpuwatch fleet as Prometheus would have scraped it, with its truth.

`write_fleet(fleet, out, fmt)` writes every series the report reads (states, costs, idle
and held costs, idle seconds, energy, tokens, prices, identity, recommendations) for
`fleet.hosts` x `fleet.gpus_per_host` GPUs over `fleet.days` UTC days, one sample every
`fleet.interval_seconds` on an epoch-aligned grid (so samples fall exactly on midnight),
and returns a `Truth`: the exact per GPU-day and token-source-day figures the counters
carry. `families` keeps only those metric families (`PLAN_FAMILIES`: what `gpuwatch plan`
reads), for a benchmark that need not write, backfill and store the rest; the truth is
the same. Formats: `openmetrics` (for `promtool tsdb create-blocks-from openmetrics`) and
`prometheus` (text with millisecond timestamps, for VictoriaMetrics'
`/api/v1/import/prometheus`).

How the synthetic agents behave, so the truth is exact by construction:

- each sample closes the interval since the previous sample of the same agent run: cost
  accrues price x interval, idle (and held) cost and idle seconds when the sample's state
  is idle (held), energy at a per-state power, tokens on GPU 0 while busy;
- a run starts with every counter at 0 and `pending` state for 30 minutes; a restart is a
  new run (counters reset), so nothing accrues while an agent is down;
- a sample belongs to the UTC day of the interval it closes: a sample at exactly midnight
  belongs to the day before.

With `events=True` (and at least 3 hosts) the month also holds what breaks naive sums:
host 0 restarts mid-day, host 1 is down across a midnight and comes back restarted,
host 2 joins on the second day, and GPU 1 of host 0 is lost (gpu_up 0) for three hours.

Kubernetes pods (`pods=True`, at least 2 hosts and 2 GPUs per host; `POD_SHARES`): on
host 0, `ml-train/trainer-0` holds half of GPUs 0 and 1 and `ml-serve/vllm-0` a quarter
of GPU 0 (two namespaces on one GPU; the rest is charged to no pod); on host 1,
`ml-serve/vllm-1` holds all of GPU 0 from noon of the second day (a pod that appears
mid-month). A pod is charged its share of each interval's cost, and of its idle cost,
on the GPUs it holds; its counters start at 0 when it appears and reset with its agent
(host 0's restart), like the GPU's.
This module is test and benchmark tooling: the agent never imports it.
"""

from __future__ import annotations

import math
import random
import shutil
import sys
import tempfile
from collections.abc import Collection, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Literal, TextIO

from gpuwatch.core.units import DAY_SECONDS

PENDING_SECONDS = 1800
STATES = ("pending", "busy", "idle", "held", "underutilized")
MEMORY_GIB = {"pending": 1, "busy": 60, "underutilized": 20, "idle": 0, "held": 30}
WATTS = {"pending": 120.0, "busy": 650.0, "underutilized": 300.0, "idle": 70.0, "held": 90.0}
PROMPT_TOKENS_PER_SECOND = 2000
GENERATION_TOKENS_PER_SECOND = 500
SAVINGS_USD_PER_HOUR = 1.75
POD_SHARES: dict[int, tuple[tuple[str, str, dict[int, float], int], ...]] = {
    0: (("ml-train", "trainer-0", {0: 0.5, 1: 0.5}, 0),
        ("ml-serve", "vllm-0", {0: 0.25}, 0)),
    1: (("ml-serve", "vllm-1", {0: 1.0}, DAY_SECONDS + 12 * 3600),),
}  # fmt: skip
"""Per host: (namespace, pod, {GPU index: share of its cost}, appears this many seconds
after the period starts (0: before it))."""

PLAN_CLASSES: tuple[tuple[str, float, float, float | None], ...] = (
    ("inference-small", 0.12, 0.2, 14.0),
    ("inference-medium", 0.3, 0.45, 34.0),
    ("training", 0.92, 0.6, None),
    ("notebook", 0.05, 0.05, None),
)
"""With `plan_series`: each GPU runs one workload class, (name, SM activity while busy,
DRAM ratio while busy, measured need in GiB, None: judged on observed memory), chosen by
`plan_class`; activity and DRAM are x 0.3 while underutilized and 0 while idle or held.
Each GPU is held by one pod, `team-<host % 50>/w-<host>-<gpu>` (50 namespaces)."""

PLAN_FAMILIES = frozenset({
    "gpuwatch_gpu", "gpuwatch_gpu_up", "gpuwatch_gpu_state", "gpuwatch_gpu_price_usd_per_hour",
    "gpuwatch_gpu_activity_mean_ratio", "gpuwatch_gpu_dram_bandwidth_ratio",
    "gpuwatch_gpu_required_memory_bytes", "gpuwatch_gpu_need_basis_info",
    "gpuwatch_gpu_pod_info", "gpuwatch_gpu_utilization_ratio",
})  # fmt: skip
"""The families `gpuwatch plan --prometheus` reads (`plan/prometheus.py`), for
`write_fleet(..., families=PLAN_FAMILIES)` with `plan_series`."""

Format = Literal["openmetrics", "prometheus"]
_COUNTER_NAMES = ("cost", "idle_cost", "held_cost", "idle_seconds", "energy", "prompt",
                  "generation")  # fmt: skip


@dataclass(frozen=True, slots=True)
class SyntheticFleet:
    """The fleet and month to generate."""

    hosts: int = 3
    gpus_per_host: int = 2
    start: datetime = datetime(2026, 1, 1, tzinfo=UTC)
    days: int = 3
    interval_seconds: int = 60
    events: bool = True
    pods: bool = True
    seed: int = 9
    plan_series: bool = False  # also what `gpuwatch plan` reads (PLAN_CLASSES)

    @property
    def start_epoch(self) -> int:
        """Period start as Unix seconds."""
        return int(self.start.timestamp())

    @property
    def end_epoch(self) -> int:
        """Period end as Unix seconds."""
        return self.start_epoch + self.days * DAY_SECONDS


@dataclass(slots=True)
class DayTruth:
    """What one GPU's counters and states say about one day."""

    name: str = ""
    observed_seconds: float = 0.0
    class_seconds: dict[str, float] = field(
        default_factory=lambda: dict.fromkeys(("busy", "idle", "held", "unknown"), 0.0)
    )
    cost_usd: float = 0.0
    idle_cost_usd: float = 0.0
    held_cost_usd: float = 0.0
    energy_joules: float = 0.0
    memory_peak_bytes: float | None = None  # over the day's samples with the GPU up


@dataclass(slots=True)
class TokenTruth:
    """One host's token source on one day."""

    tokens: dict[str, float] = field(default_factory=lambda: {"prompt": 0.0, "generation": 0.0})
    cost_usd: float = 0.0


@dataclass(slots=True)
class PodTruth:
    """One pod on one day: what the cost split charged it, in USD."""

    cost_usd: float = 0.0
    idle_cost_usd: float = 0.0


@dataclass(slots=True)
class SlurmTruth:
    """One Slurm account (or user) on one host and day: its reclaim counter's growth
    (USD), its jobs' GPU-seconds and job IDs (its cost is its pod's: `pod_days`)."""

    reclaimed_usd: float = 0.0
    gpu_seconds: float = 0.0
    job_ids: set[str] = field(default_factory=set)


@dataclass(slots=True)
class Truth:
    """Exact figures of the generated period, keyed like the report's rows."""

    gpu_days: dict[tuple[str, str, date], DayTruth] = field(default_factory=dict)
    token_days: dict[tuple[str, str, date], TokenTruth] = field(default_factory=dict)
    pod_days: dict[tuple[str, str, str, date], PodTruth] = field(default_factory=dict)
    # (kind: account or user, host, name, day); the pods again, as Slurm jobs
    slurm_days: dict[tuple[str, str, str, date], SlurmTruth] = field(default_factory=dict)
    expected_gpu_seconds: float = 0.0
    samples: int = 0

    def total(self, attr: str) -> float:
        """Sum of one DayTruth attribute over every GPU-day."""
        return sum(float(getattr(day, attr)) for day in self.gpu_days.values())


@dataclass(frozen=True, slots=True)
class _Run:
    """One agent run: samples from `first` to `last` inclusive (Unix seconds)."""

    first: int
    last: int


def host_name(index: int) -> str:
    """The scrape `instance` of host `index`."""
    return f"host-{index:03d}:9842"


def gpu_uuid(host: int, gpu: int) -> str:
    """A stable, unique GPU UUID."""
    return f"GPU-{host:08x}-{gpu:04x}-4000-8000-{host * 1000 + gpu:012x}"


def price_usd_per_hour(host: int) -> float:
    """Per-GPU price of host `host` (varies by host so sums are not symmetric)."""
    return 2.0 + 0.37 * (host % 7)


def _runs(fleet: SyntheticFleet, host: int) -> list[_Run]:
    first = fleet.start_epoch - 2 * 3600  # agents run before the period: boundary samples exist
    last = fleet.end_epoch + 600
    if not fleet.events or fleet.hosts < 3:
        return [_Run(first, last)]
    s = fleet.start_epoch
    if host == 0:  # stops after 10:00, restarted, first sample of the new run at 10:20
        return [_Run(first, s + 10 * 3600), _Run(s + 10 * 3600 + 20 * 60, last)]
    if host == 1 and fleet.days >= 2:  # down 23:50 to 00:40 across the first midnight
        return [_Run(first, s + DAY_SECONDS - 10 * 60), _Run(s + DAY_SECONDS + 40 * 60, last)]
    if host == 2 and fleet.days >= 2:  # joins at 06:00 on the second day
        return [_Run(s + DAY_SECONDS + 6 * 3600, last)]
    return [_Run(first, last)]


def _lost(fleet: SyntheticFleet, host: int, gpu: int, t: int) -> bool:
    if not fleet.events or fleet.hosts < 3 or (host, gpu) != (0, 1):
        return False
    s = fleet.start_epoch + (DAY_SECONDS if fleet.days >= 2 else 0)
    return s + 2 * 3600 < t <= s + 5 * 3600


def _day_of(fleet: SyntheticFleet, t: int) -> date | None:
    """The day of the interval a sample at `t` closes; None outside the period."""
    if not fleet.start_epoch < t <= fleet.end_epoch:
        return None
    index = (t - 1 - fleet.start_epoch) // DAY_SECONDS
    return (fleet.start + timedelta(days=index)).date()


class _Writer:
    """Per-family temporary files, joined at the end (OpenMetrics wants families whole).

    A series is written in one call, its lines built from precomputed strings: a
    per-sample `write()` made generation too slow for 1,000 GPUs x 31 days."""

    def __init__(self, workdir: Path, fmt: Format, families: Collection[str] | None) -> None:
        self.workdir = workdir
        self.fmt = fmt
        self.families = None if families is None else frozenset(families)
        self.files: dict[str, TextIO] = {}
        self.types: dict[str, str] = {}

    def wants(self, family: str) -> bool:
        """Whether `family` is written (callers skip building what is not)."""
        return self.families is None or family in self.families

    def stamps(self, times: Iterable[int]) -> list[str]:
        """Timestamps as this format writes them (seconds, or milliseconds for `prometheus`)."""
        if self.fmt == "openmetrics":
            return [str(t) for t in times]
        return [f"{t}000" for t in times]

    def series(
        self, family: str, kind: str, labels: str, values: Sequence[str] | str, stamps: list[str]
    ) -> None:
        """One series: `values` (already formatted, or one value for every sample) at `stamps`."""
        if not self.wants(family):
            return
        out = self.files.get(family)
        if out is None:
            out = (self.workdir / f"{family}.txt").open("w", encoding="utf-8")
            self.files[family] = out
            self.types[family] = kind
        if not stamps:
            return
        suffix = {"counter": "_total", "info": "_info"}.get(kind, "")
        head = f"{family}{suffix}{{{labels}}} "
        if isinstance(values, str):
            prefix = f"{head}{values} "
            out.write(prefix + ("\n" + prefix).join(stamps) + "\n")
        else:
            out.write("".join([f"{head}{v} {t}\n" for v, t in zip(values, stamps, strict=True)]))

    def join(self, out: TextIO) -> None:
        for family, handle in self.files.items():
            handle.close()
            if self.fmt == "openmetrics":
                out.write(f"# TYPE {family} {self.types[family]}\n")
            with (self.workdir / f"{family}.txt").open(encoding="utf-8") as part:
                shutil.copyfileobj(part, out, 1 << 20)
        if self.fmt == "openmetrics":
            out.write("# EOF\n")


def _states(fleet: SyntheticFleet, host: int, gpu: int) -> Iterator[str]:
    """Endless 2-hour blocks of states for one GPU, seeded."""
    seed = fleet.seed * 1_000_003 + host * 1009 + gpu
    rng = random.Random(seed)
    weights = (0.45, 0.2, 0.15, 0.2)  # busy, idle, held, underutilized
    while True:
        yield rng.choices(("busy", "idle", "held", "underutilized"), weights)[0]


def write_fleet(
    fleet: SyntheticFleet,
    out: TextIO,
    fmt: Format = "openmetrics",
    families: Collection[str] | None = None,
) -> Truth:
    """Write the fleet's series to `out` in `fmt` (only `families`, when given); return the
    exact truth."""
    truth = Truth()
    iv = fleet.interval_seconds
    if DAY_SECONDS % iv:
        raise ValueError("interval_seconds must divide a day")
    with tempfile.TemporaryDirectory(prefix="gpuwatch-synthetic-") as tmp:
        writer = _Writer(Path(tmp), fmt, families)
        for host in range(fleet.hosts):
            samples = [_write_gpu(fleet, host, gpu, writer, truth)
                       for gpu in range(fleet.gpus_per_host)]  # fmt: skip
            _write_host(fleet, host, writer)
            _write_pods(fleet, host, samples, writer, truth)
        writer.join(out)
    return truth


def _write_host(fleet: SyntheticFleet, host: int, writer: _Writer) -> None:
    base = f'instance="{host_name(host)}",job="gpuwatch"'
    times = [t for run in _runs(fleet, host)
             for t in range(run.first, run.last + 1, fleet.interval_seconds)]  # fmt: skip
    writer.series("gpuwatch_rent_vs_buy_host_monthly_delta_usd", "gauge", base,
                  repr(100.0 * host - 150.0), writer.stamps(times))  # fmt: skip


@dataclass(slots=True)
class _Samples:
    """One GPU's samples over all its runs, column by column (counters as floats)."""

    times: list[int] = field(default_factory=list)
    states: list[str] = field(default_factory=list)
    lost: list[bool] = field(default_factory=list)
    memory: list[float] = field(default_factory=list)
    charged: list[tuple[float, float]] = field(default_factory=list)  # cost, idle cost
    counters: dict[str, list[float]] = field(
        default_factory=lambda: {name: [] for name in _COUNTER_NAMES}
    )


def plan_class(host: int, gpu: int) -> tuple[str, float, float, float | None]:
    """The workload class a GPU runs in a `plan_series` fleet (PLAN_CLASSES)."""
    return PLAN_CLASSES[(host * 7 + gpu * 3) % len(PLAN_CLASSES)]


def _write_plan_series(
    host: int, gpu: int, s: _Samples, writer: _Writer, *, base: str, kept: list[int]
) -> None:
    """The series `gpuwatch plan` reads, for the GPU's class (PLAN_CLASSES)."""
    _, activity, dram, measured_gib = plan_class(host, gpu)
    scale = {"busy": 1.0, "underutilized": 0.3}
    stamps = writer.stamps([s.times[i] for i in kept])
    settled = [i for i in kept if s.states[i] != "pending"]
    settled_stamps = writer.stamps([s.times[i] for i in settled])
    writer.series("gpuwatch_gpu_activity_mean_ratio", "gauge", base,
                  [repr(activity * scale.get(s.states[i], 0.0)) for i in settled],
                  settled_stamps)  # fmt: skip
    writer.series("gpuwatch_gpu_dram_bandwidth_ratio", "gauge", base,
                  [repr(dram * scale.get(s.states[i], 0.0)) for i in kept], stamps)  # fmt: skip
    # kernel-busy time (NVML utilization) as the activity: the least it can be
    writer.series("gpuwatch_gpu_utilization_ratio", "gauge", base,
                  [repr(activity * scale.get(s.states[i], 0.0)) for i in kept], stamps)  # fmt: skip
    peak = max((s.memory[i] for i in kept), default=0.0)
    writer.series("gpuwatch_gpu_required_memory_bytes", "gauge", f'{base},source="observed"',
                  repr(peak), stamps)  # fmt: skip
    basis = "observed"
    if measured_gib is not None:
        basis = "measured"
        writer.series("gpuwatch_gpu_required_memory_bytes", "gauge",
                      f'{base},source="measured"', repr(measured_gib * 2**30), stamps)  # fmt: skip
    writer.series("gpuwatch_gpu_need_basis_info", "gauge", f'{base},basis="{basis}"', "1.0",
                  stamps)  # fmt: skip
    pod = f'namespace="team-{host % 50}",pod="w-{host}-{gpu}",container="main"'
    writer.series("gpuwatch_gpu_pod_info", "gauge", f"{base},{pod}", "1.0", stamps)


def _write_gpu(
    fleet: SyntheticFleet, host: int, gpu: int, writer: _Writer, truth: Truth
) -> _Samples:
    s = _simulate(fleet, host, gpu, truth)
    instance = host_name(host)
    uuid = gpu_uuid(host, gpu)
    name = "NVIDIA H100 80GB HBM3"
    base = f'gpu="{gpu}",instance="{instance}",job="gpuwatch",uuid="{uuid}"'
    tok = f'instance="{instance}",job="gpuwatch",source="vllm"'
    stamps = writer.stamps(s.times)
    kept = [i for i, lost in enumerate(s.lost) if not lost]
    kept_stamps = [stamps[i] for i in kept]
    counters = ("gpuwatch_gpu_cost_usd", "gpuwatch_gpu_idle_cost_usd", "gpuwatch_gpu_held_cost_usd",
                "gpuwatch_gpu_energy_joules", "gpuwatch_gpu_idle_seconds", "gpuwatch_tokens",
                "gpuwatch_token_source_cost_usd")  # fmt: skip
    c = (
        {key: [repr(v) for v in values] for key, values in s.counters.items()}
        if any(writer.wants(family) for family in counters)
        else dict.fromkeys(s.counters, [""] * len(s.times))
    )
    writer.series("gpuwatch_gpu", "info", f'{base},name="{name}"', "1.0", stamps)
    writer.series("gpuwatch_gpu_up", "gauge", base,
                  ["0.0" if lost else "1.0" for lost in s.lost], stamps)  # fmt: skip
    writer.series("gpuwatch_gpu_price_usd_per_hour", "gauge", f'{base},source="static"',
                  repr(price_usd_per_hour(host)), stamps)  # fmt: skip
    writer.series("gpuwatch_gpu_cost_usd", "counter", base, c["cost"], stamps)
    writer.series("gpuwatch_gpu_idle_cost_usd", "counter", base, c["idle_cost"], stamps)
    writer.series("gpuwatch_gpu_held_cost_usd", "counter", base, c["held_cost"], stamps)
    writer.series("gpuwatch_gpu_energy_joules", "counter", base, c["energy"], stamps)
    if writer.wants("gpuwatch_gpu_memory_used_bytes"):
        writer.series("gpuwatch_gpu_memory_used_bytes", "gauge", base,
                      [repr(s.memory[i]) for i in kept], kept_stamps)  # fmt: skip
    writer.series("gpuwatch_gpu_idle_seconds", "counter", base,
                  [c["idle_seconds"][i] for i in kept], kept_stamps)  # fmt: skip
    for state in STATES:
        writer.series("gpuwatch_gpu_state", "gauge", f'{base},state="{state}"',
                      ["1.0" if s.states[i] == state else "0.0" for i in kept],
                      kept_stamps)  # fmt: skip
    if gpu == 1:
        writer.series("gpuwatch_gpu_recommendation_info", "gauge",
                      f'{base},current="h100-sxm",recommended="l40s"', "1.0", stamps)  # fmt: skip
        writer.series("gpuwatch_gpu_potential_savings_usd_per_hour", "gauge", base,
                      repr(SAVINGS_USD_PER_HOUR), stamps)  # fmt: skip
    if gpu == 0:
        writer.series("gpuwatch_tokens", "counter", f'{tok},kind="prompt"', c["prompt"], stamps)
        writer.series("gpuwatch_tokens", "counter", f'{tok},kind="generation"',
                      c["generation"], stamps)  # fmt: skip
        writer.series("gpuwatch_token_source_cost_usd", "counter", tok, c["cost"], stamps)
    if fleet.plan_series:
        _write_plan_series(host, gpu, s, writer, base=base, kept=kept)
    return s


def pods_of(fleet: SyntheticFleet, host: int) -> tuple[tuple[str, str, dict[int, float], int], ...]:
    """The pods on `host` (see POD_SHARES), their appearance as Unix seconds (0: with
    the agent)."""
    if not fleet.pods or fleet.hosts < 2 or fleet.gpus_per_host < 2:
        return ()
    last = (fleet.days - 1) * DAY_SECONDS  # a short fleet: the pod appears on its last day
    return tuple(
        (namespace, pod, shares, fleet.start_epoch + min(after, last) if after else 0)
        for namespace, pod, shares, after in POD_SHARES.get(host, ())
    )


def _write_pods(
    fleet: SyntheticFleet, host: int, samples: list[_Samples], writer: _Writer, truth: Truth
) -> None:
    """Each pod's cost and idle cost counters: its shares of its GPUs' charges per sample
    (every GPU of a host samples at the same times), reset with each agent run."""
    instance = host_name(host)
    times = samples[0].times if samples else []
    for namespace, pod, shares, since in pods_of(fleet, host):
        labels = f'instance="{instance}",job="gpuwatch",namespace="{namespace}",pod="{pod}"'
        kept: list[int] = []
        cost_values: list[str] = []
        idle_values: list[str] = []
        cost = idle = 0.0
        starts = {run.first for run in _runs(fleet, host)} | {since}
        for i, t in enumerate(times):
            if t < since:
                continue
            if t in starts or (t > since and not kept):
                cost = idle = 0.0  # the pod appears, or its agent restarted
            else:
                step = math.fsum(samples[g].charged[i][0] * share for g, share in shares.items())
                step_idle = math.fsum(
                    samples[g].charged[i][1] * share for g, share in shares.items()
                )
                cost += step
                idle += step_idle
                if (day := _day_of(fleet, t)) is not None:
                    pt = truth.pod_days.setdefault((instance, namespace, pod, day), PodTruth())
                    pt.cost_usd += step
                    pt.idle_cost_usd += step_idle
            if (day := _day_of(fleet, t)) is not None:
                truth.pod_days.setdefault((instance, namespace, pod, day), PodTruth())
            kept.append(i)
            cost_values.append(repr(cost))
            idle_values.append(repr(idle))
        stamps = writer.stamps(times[i] for i in kept)
        writer.series("gpuwatch_pod_cost_usd", "counter", labels, cost_values, stamps)
        writer.series("gpuwatch_pod_idle_cost_usd", "counter", labels, idle_values, stamps)
        values = (cost_values, idle_values)
        _write_slurm(fleet, host, (namespace, pod, shares), [times[i] for i in kept], values,
                     writer=writer, truth=truth)  # fmt: skip


RECLAIM_STEP_USD = 0.25
"""What the synthetic reclaim counter gains per sample of each job (reset like the rest)."""


def _write_slurm(
    fleet: SyntheticFleet,
    host: int,
    pod: tuple[str, str, dict[int, float]],
    times: list[int],
    values: tuple[list[str], list[str]],
    *,
    writer: _Writer,
    truth: Truth,
) -> None:
    """The pod again as Slurm job `pod` of account `namespace` and user `pod`: the
    account's and the user's cost counters are the pod's (`values`, at `times`), their held
    counters half the idle one (exact in binary, so the held growth is half the idle), a reclaim
    counter {account, user} gains RECLAIM_STEP_USD a sample (reset with each agent run),
    and a `gpuwatch_gpu_job_info` series per GPU it holds at the same samples."""
    namespace, name, shares = pod
    instance = host_name(host)
    target = f'instance="{instance}",job="gpuwatch"'
    stamps = writer.stamps(times)
    groups = {"account": namespace, "user": name}
    for kind, group in groups.items():
        labels = f'{target},{kind}="{group}"'
        writer.series(f"gpuwatch_slurm_{kind}_cost_usd", "counter", labels, values[0], stamps)
        writer.series(f"gpuwatch_slurm_{kind}_idle_cost_usd", "counter", labels, values[1],
                      stamps)  # fmt: skip
        held = [repr(float(v) / 2) for v in values[1]]
        writer.series(f"gpuwatch_slurm_{kind}_held_cost_usd", "counter", labels, held, stamps)
    starts = {run.first for run in _runs(fleet, host)}
    reclaimed = 0.0
    reclaims: list[str] = []
    for n, t in enumerate(times):
        day = _day_of(fleet, t)
        if n == 0 or t in starts:
            reclaimed = 0.0
        else:
            reclaimed += RECLAIM_STEP_USD
        for kind, group in groups.items():
            if day is None:
                continue
            st = truth.slurm_days.setdefault((kind, instance, group, day), SlurmTruth())
            st.gpu_seconds += fleet.interval_seconds * len(shares)
            st.job_ids.add(name)
            if n and t not in starts:
                st.reclaimed_usd += RECLAIM_STEP_USD
        reclaims.append(repr(reclaimed))
    writer.series("gpuwatch_slurm_reclaimed_usd", "counter",
                  f'{target},account="{namespace}",user="{name}"', reclaims, stamps)  # fmt: skip
    for gpu in shares:
        labels = (f'gpu="{gpu}",{target},uuid="{gpu_uuid(host, gpu)}",job_id="{name}",'
                  f'user="{name}",account="{namespace}",partition="gpu",step="0"')  # fmt: skip
        writer.series("gpuwatch_gpu_job_info", "gauge", labels, "1.0", stamps)


def _simulate(fleet: SyntheticFleet, host: int, gpu: int, truth: Truth) -> _Samples:
    """Run the GPU's agent runs: its samples, and its days added to `truth`."""
    iv = fleet.interval_seconds
    instance = host_name(host)
    uuid = gpu_uuid(host, gpu)
    name = "NVIDIA H100 80GB HBM3"
    step_cost = price_usd_per_hour(host) * iv / 3600.0
    blocks = _states(fleet, host, gpu)
    block_state: dict[int, str] = {}
    out = _Samples()
    columns = [out.counters[key] for key in _COUNTER_NAMES]
    first_seen: date | None = None
    for run in _runs(fleet, host):
        cost = idle_cost = held_cost = idle_seconds = energy = 0.0
        prompt = generation = 0.0
        for t in range(run.first, run.last + 1, iv):
            in_run = t - run.first
            block = t // 7200
            if block not in block_state:
                block_state[block] = next(blocks)
            state = "pending" if in_run < PENDING_SECONDS else block_state[block]
            lost = _lost(fleet, host, gpu, t)
            day = _day_of(fleet, t)
            memory = memory_used_bytes(state, t)
            first = t == run.first
            if not first:
                cost += step_cost
                energy += WATTS[state] * iv
                if state in ("idle", "held") and not lost:
                    idle_cost += step_cost
                    idle_seconds += iv
                if state == "held" and not lost:
                    held_cost += step_cost
                if gpu == 0 and state == "busy" and not lost:
                    prompt += PROMPT_TOKENS_PER_SECOND * iv
                    generation += GENERATION_TOKENS_PER_SECOND * iv
            if day is not None:
                if first_seen is None:
                    first_seen = day
                _account(truth, fleet, (instance, uuid, day), name, state, lost, first, step_cost)
                if not lost:
                    _peak(truth, (instance, uuid, day), memory)
                if gpu == 0:
                    tt = truth.token_days.setdefault((instance, "vllm", day), TokenTruth())
                    if not first:
                        tt.cost_usd += step_cost
                        if state == "busy" and not lost:
                            tt.tokens["prompt"] += PROMPT_TOKENS_PER_SECOND * iv
                            tt.tokens["generation"] += GENERATION_TOKENS_PER_SECOND * iv
            out.times.append(t)
            out.states.append(state)
            out.lost.append(lost)
            out.memory.append(memory)
            idle_step = step_cost if state in ("idle", "held") and not lost else 0.0
            out.charged.append((0.0, 0.0) if first else (step_cost, idle_step))
            for column, value in zip(
                columns, (cost, idle_cost, held_cost, idle_seconds, energy, prompt, generation),
                strict=True,
            ):  # fmt: skip
                column.append(value)
    if first_seen is not None:
        days_left = fleet.days - (first_seen - fleet.start.date()).days
        truth.expected_gpu_seconds += days_left * DAY_SECONDS
    return out


def memory_used_bytes(state: str, t: int) -> float:
    """Frame-buffer memory in use at `t`: by state, plus a wobble so peaks are unique."""
    return float(MEMORY_GIB[state] * 2**30 + (t // 60 % 997) * 4096)


def _peak(truth: Truth, key: tuple[str, str, date], memory: float) -> None:
    day = truth.gpu_days[key]
    day.memory_peak_bytes = (
        memory if day.memory_peak_bytes is None else max(day.memory_peak_bytes, memory)
    )


def _account(  # noqa: PLR0917
    truth: Truth,
    fleet: SyntheticFleet,
    key: tuple[str, str, date],
    name: str,
    state: str,
    lost: bool,
    first: bool,
    step_cost: float,
) -> None:
    iv = float(fleet.interval_seconds)
    day = truth.gpu_days.setdefault(key, DayTruth(name=name))
    truth.samples += 1
    day.observed_seconds += iv
    if lost:
        day.class_seconds["unknown"] += iv
    elif state in ("busy", "underutilized"):
        day.class_seconds["busy"] += iv
    elif state in ("idle", "held") and not first:
        day.class_seconds[state] += iv
    if first:
        return
    day.cost_usd += step_cost
    day.energy_joules += WATTS[state] * iv
    if state in ("idle", "held") and not lost:
        day.idle_cost_usd += step_cost
        if state == "held":
            day.held_cost_usd += step_cost


def main() -> None:
    """`python -m tests.support.synthetic HOSTS GPUS DAYS INTERVAL FORMAT > file`."""
    hosts, gpus, days, interval = (int(a) for a in sys.argv[1:5])
    fmt: Format = "prometheus" if sys.argv[5:6] == ["prometheus"] else "openmetrics"
    fleet = SyntheticFleet(hosts=hosts, gpus_per_host=gpus, days=days, interval_seconds=interval)
    truth = write_fleet(fleet, sys.stdout, fmt)
    print(f"# {truth.samples} GPU samples", file=sys.stderr)


if __name__ == "__main__":
    main()
