"""The fleet plan as a library call: `make_plan` loads the lookback from the host's
history or a Prometheus-compatible API, turns it into units (`usage.py`), prices the GPU
models the fleet runs at what it pays (`fleet_price_overrides`) and solves
(`solve.py`). `gpuwatch plan` (`gpuwatch.cli.plan`) and the report's "What the fleet should be"
both call it; nothing here parses flags or prints.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence

from gpuwatch.alerts.messages import format_utc
from gpuwatch.config import Config
from gpuwatch.core.text import duration_adjective, plain_name
from gpuwatch.history.store import HistoryStoreError
from gpuwatch.plan import local
from gpuwatch.plan import prometheus as prom
from gpuwatch.plan.model import PlanOptions, WorkloadNeed
from gpuwatch.plan.render import PlanReport
from gpuwatch.plan.solve import solve
from gpuwatch.plan.usage import workload_needs
from gpuwatch.promapi.client import PrometheusError, PrometheusOptions
from gpuwatch.sizing import GpuCatalogEntry, build_gpu_catalog


class PlanSourceError(Exception):
    """The source or the solver failed: one line, exit 1."""


class PlanNoDataError(PlanSourceError):
    """The lookback holds no GPU data: no plan (never a "$0" one), one line, exit 1."""


FLEET_PRICE_SOURCE = "the fleet's own price: the median $/GPU-h its GPUs of this model paid"


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
    try:
        catalog = build_gpu_catalog([*config.sizing.gpus, *fleet_price_overrides(needs)])
        plan = solve(needs, catalog, options)
    except ImportError as exc:  # SolverMissingError: the `plan` extra is not installed
        raise PlanSourceError(str(exc)) from None
    except (ValueError, RuntimeError) as exc:  # a price no GPU can have, HiGHS refusing one
        raise PlanSourceError(f"no plan: {plain_name(str(exc).splitlines()[0], 200)}") from None
    return PlanReport(plan, needs, options, days, source, generated, end_epoch)
