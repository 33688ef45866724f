"""The fleet plan as a library call: `make_plan` loads the lookback from the host's
history or a Prometheus-compatible API, turns it into units (`usage.py`), prices the GPU
models the fleet runs at what it pays (`fleet_price_overrides`) and solves
(`solve.py`). `gpuwatch plan` (`gpuwatch.cli.plan`) and the report's "What the fleet should be"
both call it; nothing here parses flags or prints.
"""

from __future__ import annotations

import dataclasses
import statistics
from collections.abc import Sequence

from gpuwatch.alerts.messages import format_utc
from gpuwatch.config import Config
from gpuwatch.core.text import counted, duration_adjective, plain_name
from gpuwatch.history.store import HistoryStoreError
from gpuwatch.plan import local
from gpuwatch.plan import prometheus as prom
from gpuwatch.plan.buying import (
    FLEET_PRICE_SOURCE,
    Buying,
    SpareNodes,
    billing_overrides,
    buyable,
    spare_note,
    whole_nodes,
)
from gpuwatch.plan.model import Plan, PlanOptions, WorkloadNeed
from gpuwatch.plan.policy import min_saving, quota_notes, with_extra_cost
from gpuwatch.plan.render import PlanReport
from gpuwatch.plan.servers import with_servers
from gpuwatch.plan.solve import solve
from gpuwatch.plan.usage import workload_needs
from gpuwatch.promapi.client import PrometheusError, PrometheusOptions
from gpuwatch.sizing import GpuCatalog, GpuCatalogEntry, build_gpu_catalog


class PlanSourceError(Exception):
    """The source or the solver failed: one line, exit 1."""


class PlanNoDataError(PlanSourceError):
    """The lookback holds no GPU data: no plan (never a "$0" one), one line, exit 1."""


def fleet_price_overrides(needs: Sequence[WorkloadNeed]) -> list[GpuCatalogEntry]:
    """Catalog overrides that price each GPU model the fleet runs at what the fleet pays
    for it (the median of its units' $/GPU-h), so that a GPU the plan keeps costs what it
    costs today; models the fleet does not run keep the catalog's reference rent."""
    paid: dict[str, list[float]] = {}
    for need in needs:
        if need.current_gpu_id is not None and need.current_usd_per_hour > 0:
            per_gpu = need.current_usd_per_hour / need.gpus_now
            paid.setdefault(need.current_gpu_id, []).extend([per_gpu] * need.gpus_now)
    # an override of a part the catalog has (the needs' ids come from it), so the
    # completeness check of a new part does not apply: a config-added GPU is priced too
    return [
        GpuCatalogEntry.model_validate(
            {
                "id": gpu_id,
                "rent_usd_per_hour": statistics.median(prices),
                "sources": {"rent_usd_per_hour": FLEET_PRICE_SOURCE},
            },
            context={"builtin": True},
        )
        for gpu_id, prices in sorted(paid.items())
    ]


def make_plan(
    config: Config,
    options: PlanOptions,
    *,
    days: float,
    end_epoch: float,
    prometheus: PrometheusOptions | None = None,
    generated: str = "",
) -> PlanReport:
    """Load the lookback from the source, solve, and return the plan with its inputs.

    `generated`: when it is computed (wall clock, UTC text). Raises PlanSourceError (the
    source cannot be read, the solver is missing), PlanNoDataError (no GPU data in the
    lookback)."""
    start = end_epoch - days * 86400.0
    if prometheus is None:
        try:
            usages = local.load_usage(config.agent.state_dir, start, end_epoch)
        except HistoryStoreError as exc:
            raise PlanSourceError(str(exc)) from None
        source = "local"
    else:
        try:
            usages = prom.load_usage(prometheus, days, end_epoch, config.analysis.lookback_seconds)
        except PrometheusError as exc:
            raise PlanSourceError(str(exc)) from None
        source = prometheus.display_url
    if not usages:
        raise PlanNoDataError(
            f"no GPU data in the {duration_adjective(days * 86400.0)} lookback "
            f"{format_utc(start)} to {format_utc(end_epoch)} from {plain_name(source)}: "
            "no plan"
        )
    reference = build_gpu_catalog(config.sizing.gpus)
    needs = tuple(workload_needs(usages, reference))
    if prometheus is None:  # the config's token sources describe this host only
        needs = with_servers(needs, usages, config.token_sources)
    try:
        buying = buyable(
            build_gpu_catalog(
                [
                    *config.sizing.gpus,
                    *billing_overrides(config.billing, reference),
                    *fleet_price_overrides(needs),
                ]
            ),
            needs,
            config.billing,
            options.candidate_gpu_ids,
        )
        plan = plan_with_policy(needs, buying, options)
    except ImportError as exc:  # SolverMissingError: the `plan` extra is not installed
        raise PlanSourceError(str(exc)) from None
    except (ValueError, RuntimeError) as exc:  # a price no GPU can have, HiGHS refusing one
        raise PlanSourceError(f"no plan: {plain_name(str(exc).splitlines()[0], 200)}") from None
    return PlanReport(plan, needs, options, days, source, generated, end_epoch, buying)


def plan_with_policy(needs: Sequence[WorkloadNeed], buying: Buying, options: PlanOptions) -> Plan:
    """Solve over the parts `buying` allows, then apply what the solver does not: the
    minimum saving per move, whole nodes (spare GPUs counted) and the quotas' notes."""
    plan = solve(needs, buying.catalog, options)
    spare = whole_nodes(plan, needs, buying)
    dropped: list[str] = []
    while spare:  # a part whose spare GPUs eat its saving is not bought: solve without it
        worse = _unprofitable(plan, needs, spare)
        if not worse:
            break
        dropped.extend(
            f"{part.gpu_id} not bought: sold by the node ({part.instance_type}, "
            f"{part.gpus_per_instance} GPUs), its spare GPUs cost more than its moves save"
            for part in spare
            if part.gpu_id in worse
        )
        buying = dataclasses.replace(
            buying, catalog=GpuCatalog(gpu for gpu in buying.catalog if gpu.id not in worse)
        )
        plan = solve(needs, buying.catalog, options)
        spare = whole_nodes(plan, needs, buying)
    if dropped:
        plan = with_extra_cost(plan, 0.0, dropped)
    plan = min_saving(plan, needs, options.min_saving_usd_per_month)
    spare = whole_nodes(plan, needs, buying)
    if spare:
        extra = sum(s.usd_per_hour for s in spare)
        plan = with_extra_cost(plan, extra, [spare_note(s) for s in spare])
    notes = [*quota_notes(plan, needs, options.quotas), *_kernel_busy_notes(needs, options)]
    return with_extra_cost(plan, 0.0, notes) if notes else plan


def _kernel_busy_notes(needs: Sequence[WorkloadNeed], options: PlanOptions) -> list[str]:
    """One sentence when units that could be time-sliced have no kernel-busy time."""
    unknown = sum(
        not n.reclaimable and n.memory_bytes is not None and n.kernel_busy_ratio is None
        for n in needs
    )
    if not unknown or not options.time_slicing:
        return []
    return [
        f"{counted(unknown, 'unit')} without kernel-busy time (NVML utilization; history "
        "written before it was kept): each counted as using all of its GPU's time when "
        "time-sliced"
    ]


def _unprofitable(plan: Plan, needs: Sequence[WorkloadNeed], spare: list[SpareNodes]) -> set[str]:
    """Parts whose GPUs in `plan`, spare ones included, cost more than their units do now."""
    now = {need.key: need.current_usd_per_hour for need in needs}
    out = set()
    for part in spare:
        placed = [p for p in plan.placements if p.gpu_id == part.gpu_id]
        paid = sum(now.get(key, 0.0) for p in placed for key in dict.fromkeys(p.units))
        if sum(p.usd_per_hour for p in placed) + part.usd_per_hour > paid:
            out.add(part.gpu_id)
    return out
