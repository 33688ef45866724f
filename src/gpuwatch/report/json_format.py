"""The report as one JSON document (`--format json`, stdout when there is no `--out`).

Keys are snake_case with units (`_usd`, `_seconds`, `_ratio`); an absent figure is
`null`, never 0. Stable keys: `period`, `coverage_ratio`, `total_cost_usd`,
`idle_cost_usd`, `held_cost_usd`, `savings_usd_per_month`, `usd_per_million_tokens`
(`prompt`, `generation`, `all`) and `gpus` (`host`, `uuid`, `name`, `cost_usd`,
`idle_cost_usd`, `busy_ratio`, `state_seconds` (the cost classes' seconds),
`analysis_state_seconds` (busy, underutilized, idle, held, pending, unknown),
`mean_activity_ratio`, ...); docs/reports.md lists the rest.
"""

from __future__ import annotations

import json
from typing import Any

from gpuwatch.plan.render import plan_json
from gpuwatch.report.model import OwnedInputs
from gpuwatch.report.result import TOKEN_FIGURES, GpuLine, Report, Totals

SCHEMA_VERSION = 1


def _totals(totals: Totals) -> dict[str, Any]:
    return {
        "cost_usd": totals.cost_usd,
        "idle_cost_usd": totals.idle_cost_usd,
        "held_cost_usd": totals.held_cost_usd,
        "busy_ratio": totals.busy_ratio,
        "observed_seconds": totals.observed_seconds,
        "state_seconds": dict(totals.class_seconds),
        "analysis_state_seconds": {
            **totals.state_seconds,
            "unknown": totals.no_state_seconds,
        },
        "mean_activity_ratio": totals.mean_activity_ratio,
        "energy_joules": totals.energy_joules,
    }


def _gpu(gpu: GpuLine) -> dict[str, Any]:
    return {
        "host": gpu.host,
        "uuid": gpu.uuid,
        "name": gpu.name,
        "gpu_index": gpu.gpu_index,
        **_totals(gpu.totals),
        "price_sources": list(gpu.price_sources),
        "recommended_gpu": gpu.recommended_gpu,
        "savings_usd_per_hour": gpu.savings_usd_per_hour,
        "recommended_rule": gpu.recommended_rule,
        "need_basis": gpu.need_basis,
        "savings_usd_per_month": gpu.savings_usd_per_month,
    }


def _owned_inputs(inputs: OwnedInputs) -> dict[str, Any]:
    return {
        "capex_usd": inputs.capex_usd,
        "host_share": inputs.host_share,
        "life_years": inputs.life_years,
        "cost_of_capital": inputs.cost_of_capital,
        "ops_usd_per_year": inputs.ops_usd_per_year,
        "facility": inputs.facility,
        "pue_applied": inputs.pue_applied,
        "hosting_usd_per_kw_month": inputs.hosting_usd_per_kw_month,
        "it_power_watts": inputs.it_power_watts,
    }


def report_document(report: Report, generated: str = "") -> dict[str, Any]:
    """The report as JSON-able data; `generated`: when it was made (wall clock, UTC
    text), None when not given."""
    period = report.period
    totals = report.totals
    return {
        "schema_version": SCHEMA_VERSION,
        "period": {
            "label": period.label,
            "start": period.start.isoformat(),
            "end": period.end.isoformat(),
            "seconds": period.seconds,
            "month_to_date": period.month_to_date,
        },
        "source": report.source,
        "generated": generated or None,
        "coverage_ratio": report.coverage_ratio,
        "observed_gpu_seconds": report.observed_gpu_seconds,
        "expected_gpu_seconds": report.expected_gpu_seconds,
        "total_cost_usd": totals.cost_usd,
        "idle_cost_usd": totals.idle_cost_usd,
        "idle_cost_ratio": totals.idle_ratio,
        "held_cost_usd": totals.held_cost_usd,
        "savings_usd_per_month": report.savings_usd_per_month,
        "savings": None
        if report.savings is None
        else {
            "idle_usd_per_month": report.savings.idle_usd_per_month,
            "held_usd_per_month": report.savings.held_usd_per_month,
            "rightsizing_usd_per_month": report.savings.rightsizing_usd_per_month,
            "total_usd_per_month": report.savings.total_usd_per_month,
        },
        "busy_ratio": totals.busy_ratio,
        "state_seconds": dict(totals.class_seconds),
        "usd_per_million_tokens": {k: report.usd_per_million_tokens(k) for k in TOKEN_FIGURES},
        "tokens": dict(report.tokens.tokens),
        "token_cost_usd": report.tokens.cost_usd,
        "rent_vs_buy_monthly_delta_usd": report.rent_vs_buy_monthly_delta_usd,
        "rent_vs_buy_activity_monthly_delta_usd": report.rent_vs_buy_activity_monthly_delta_usd,
        "rent_vs_buy_gpus": [
            {
                "host": g.host,
                "uuid": g.uuid,
                "gpu_index": g.gpu_index,
                "rent_usd_per_hour": g.rent_usd_per_hour,
                "owned_usd_per_year": g.owned_usd_per_year,
                "busy_ratio": g.busy_ratio,
                "activity_ratio": g.activity_ratio,
                "monthly_delta_usd": g.monthly_delta_usd,
                "activity_monthly_delta_usd": g.activity_monthly_delta_usd,
                "owned_inputs": None if g.inputs is None else _owned_inputs(g.inputs),
            }
            for g in report.rent_vs_buy_gpus
        ],
        "days": [
            {
                "day": d.day.isoformat(),
                "cost_usd": d.totals.cost_usd,
                "cost_by_class_usd": dict(d.cost_by_class_usd),
            }
            for d in report.days
        ],
        "hosts": [
            {
                "host": h.host,
                "gpus": h.gpus,
                **_totals(h.totals),
                "savings_usd_per_month": h.savings_usd_per_month,
            }
            for h in report.hosts
        ],
        "gpus": [_gpu(g) for g in report.gpus],
        "top_waste": [
            {
                "host": i.gpu.host,
                "uuid": i.gpu.uuid,
                "name": i.gpu.name,
                "waste_usd": i.waste_usd,
                "action": i.action,
                "action_text": i.action_text,
                "action_usd_per_month": i.action_usd_per_month,
            }
            for i in report.top_waste
        ],
        "token_sources": [
            {
                "host": t.host,
                "source": t.source,
                "tokens": dict(t.tokens),
                "cost_usd": t.cost_usd,
                "usd_per_million_tokens": {k: t.usd_per_million(k) for k in TOKEN_FIGURES},
            }
            for t in report.token_sources
        ],
        "namespaces": [
            {
                "namespace": n.namespace,
                "pods": n.pods,
                "cost_usd": n.cost_usd,
                "unused_share_usd": n.unused_share_usd,
                "share_ratio": n.share_ratio,
            }
            for n in report.namespaces
        ],
        **{
            key: [
                {
                    "name": n.name,
                    "jobs": n.jobs,
                    "gpu_hours": n.gpu_hours,
                    "cost_usd": n.cost_usd,
                    "idle_cost_usd": n.idle_cost_usd,
                    "held_cost_usd": n.held_cost_usd,
                    "share_ratio": n.share_ratio,
                    "reclaimed_usd": n.reclaimed_usd,
                }
                for n in lines
            ]
            for key, lines in (
                ("slurm_accounts", report.slurm_accounts),
                ("slurm_users", report.slurm_users),
            )
        },
        "slurm_reclaimed_usd": report.slurm_reclaimed_usd,
        "previous_period": report.previous_label,
        "changes": [
            {
                "name": c.name,
                "unit": c.unit,
                "current": c.current,
                "previous": c.previous,
                "delta": c.delta,
                "relative": c.relative,
            }
            for c in report.changes
        ],
        "price_sources": dict(report.price_sources),
        "notes": list(report.notes),
        "fleet_plan": None if report.fleet_plan is None else _plan(report),
    }


def _plan(report: Report) -> dict[str, Any]:
    assert report.fleet_plan is not None
    return plan_json(report.fleet_plan)


def render_json(report: Report, generated: str = "") -> str:
    """The document as indented JSON text (UTF-8, names as they are)."""
    return json.dumps(report_document(report, generated), indent=2, ensure_ascii=False) + "\n"
