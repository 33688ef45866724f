"""The Slurm dashboard (gpuwatch-slurm.json): cost per account and user, the jobs on GPUs now,
and reclaim (docs/slurm.md)."""

from __future__ import annotations

from boards.blocks import YES_NO, Json, Panel, Target, column_unit, instant, stat, table, ts
from boards.cost_by import cost_per_hour, cost_table
from boards.promql import ACCOUNT, GPU, HOST, ON_UUID, SLURM, USER
from boards.variables import variable, variables

ACCOUNT_COST = "gpuwatch_slurm_account_cost_usd_total"
ACCOUNT_IDLE_COST = "gpuwatch_slurm_account_idle_cost_usd_total"


def slurm_panels() -> list[Panel]:
    """Slurm: cost per account and user, the jobs on GPUs now, and reclaim (docs/slurm.md)."""
    jobs = f"gpuwatch_gpu_job_info{{{SLURM}}}"
    per_job = "max by (instance, gpu, job_id, user, account, partition)"
    price = f"max by (job, instance, uuid) (gpuwatch_gpu_price_usd_per_hour{{{HOST}}})"
    idle_jobs = (
        f"(gpuwatch_gpu_job_allocated_idle{{{GPU}}} == 1)\n"
        f"* on(job, instance, uuid, job_id) group_left(user, account)\n"
        f"  max by (job, instance, uuid, job_id, user, account) ({jobs})"
    )
    return [
        stat(
            "GPUs held by jobs",
            "GPUs that Slurm jobs of the selected accounts and users hold now (distinct "
            "uuid per agent in gpuwatch_gpu_job_info).",
            "none",
            Target(f"count(count by (job, instance, uuid) ({jobs}))", instant=True),
        ),
        stat(
            "Held, running nothing",
            "GPUs held by a job that runs nothing on them over the analysis window "
            "(gpuwatch_gpu_job_allocated_idle == 1).",
            "none",
            Target(
                f"count(count by (job, instance, uuid) ({idle_jobs})) or vector(0)", instant=True
            ),
        ),
        stat(
            "$/h held idle now",
            "What the GPUs held by allocated-idle jobs cost per hour now "
            "(gpuwatch_gpu_price_usd_per_hour of each such GPU).",
            "currencyUSD",
            Target(
                f"sum(count by (job, instance, uuid) ({idle_jobs})\n"
                f"* {ON_UUID} group_left() {price}) or vector(0)",
                instant=True,
            ),
            decimals=2,
        ),
        stat(
            "$ reclaimed in range",
            "USD reclaimed by cancelling allocated-idle jobs over the dashboard range "
            "(gpuwatch_slurm_reclaimed_usd_total: their GPUs' $/h times the hours left of "
            "their time limit, at most 24 h; enforce mode only).",
            "currencyUSD",
            Target(
                f"sum(increase(gpuwatch_slurm_reclaimed_usd_total{{{SLURM}}}[$__range])) "
                "or vector(0)",
                instant=True,
            ),
            decimals=2,
        ),
        stat(
            "Idle $ in range",
            "The idle part of the selected accounts' cost over the dashboard range "
            "(gpuwatch_slurm_account_idle_cost_usd_total).",
            "currencyUSD",
            Target(
                f"sum(increase({ACCOUNT_IDLE_COST}{{{ACCOUNT}}}[$__range]))",
                instant=True,
            ),
            decimals=2,
        ),
        stat(
            "Cost $ in range",
            "What the selected accounts' jobs cost over the dashboard range "
            "(gpuwatch_slurm_account_cost_usd_total).",
            "currencyUSD",
            Target(
                f"sum(increase({ACCOUNT_COST}{{{ACCOUNT}}}[$__range]))",
                instant=True,
            ),
            decimals=2,
        ),
        cost_per_hour(
            "Cost per hour by account",
            "USD per hour charged to each selected account's jobs (rate of "
            "gpuwatch_slurm_account_cost_usd_total times 3600): their processes' share of "
            "their GPUs' active time plus the idle part of the GPUs they hold.",
            label="account",
            counter=ACCOUNT_COST,
            selector=ACCOUNT,
        ),
        cost_per_hour(
            "Idle cost per hour by account",
            "The idle part of each selected account's cost per hour (rate of "
            "gpuwatch_slurm_account_idle_cost_usd_total times 3600).",
            label="account",
            counter=ACCOUNT_IDLE_COST,
            selector=ACCOUNT,
        ),
        cost_table(
            "Cost by account",
            "Per selected account over the dashboard range: cost, idle cost, held cost (what "
            "its jobs were charged while they held a GPU and ran nothing on it) and the idle "
            "share (gpuwatch_slurm_account_cost_usd_total, …_idle_cost_usd_total, "
            "…_held_cost_usd_total), and the GPUs its jobs hold now (gpuwatch_gpu_job_info).",
            by={"account": "account"},
            selector=ACCOUNT,
            cost=ACCOUNT_COST,
            idle=ACCOUNT_IDLE_COST,
            held_cost="gpuwatch_slurm_account_held_cost_usd_total",
            held=jobs,
            sort_by="Value #B",
            width=12,
        ),
        cost_table(
            "Cost by user",
            "Per selected user over the dashboard range: cost, idle cost, held cost and the "
            "idle share (gpuwatch_slurm_user_cost_usd_total, …_idle_cost_usd_total, "
            "…_held_cost_usd_total).",
            by={"user": "user"},
            selector=USER,
            cost="gpuwatch_slurm_user_cost_usd_total",
            idle="gpuwatch_slurm_user_idle_cost_usd_total",
            held_cost="gpuwatch_slurm_user_held_cost_usd_total",
            sort_by="Value #B",
            width=12,
        ),
        table(
            "Jobs on GPUs",
            "Each job holding a GPU now (gpuwatch_gpu_job_info, the one per-job series), "
            "whether it runs nothing there over the window (gpuwatch_gpu_job_allocated_idle) "
            "and the GPU's $/h (gpuwatch_gpu_price_usd_per_hour).",
            "none",
            instant(
                f"{per_job} (gpuwatch_gpu_job_allocated_idle{{{GPU}}}\n"
                f"* on(job, instance, uuid, job_id) group_left(user, account, partition)\n"
                f"  max by (job, instance, uuid, job_id, user, account, partition) ({jobs}))"
            ),
            instant(f"{per_job} ({jobs}\n* {ON_UUID} group_left() {price})"),
            columns={
                "instance": "host",
                "gpu": "gpu",
                "job_id": "job",
                "user": "user",
                "account": "account",
                "partition": "partition",
                "Value #A": "runs nothing",
                "Value #B": "$/h",
            },
            overrides=(
                {
                    "matcher": {"id": "byName", "options": "runs nothing"},
                    "properties": [
                        {"id": "mappings", "value": list(YES_NO)},
                        {"id": "custom.cellOptions", "value": {"type": "color-text"}},
                    ],
                },
                column_unit("$/h", "currencyUSD"),
            ),
            sort_by="Value #A",
        ),
        ts(
            "Reclaim actions",
            "Reclaim's warnings and cancellations (gpuwatch_slurm_reclaim_actions_total) by "
            "action and mode; dry-run counts what enforce would do (docs/slurm.md).",
            "none",
            Target(
                "sum by (action, mode) (increase(gpuwatch_slurm_reclaim_actions_total"
                f"{{{HOST}}}[$__rate_interval]))",
                legend="{{action}} ({{mode}})",
            ),
            width=24,
        ),
    ]


def slurm_variables() -> list[Json]:
    """datasource, job, host and gpu, then the Slurm account and user (from the join
    series)."""
    common = [v for v in variables() if v["name"] != "namespace"]
    return [
        *common,
        variable("account", "Account", f"label_values(gpuwatch_gpu_job_info{{{HOST}}}, account)"),
        variable("user", "User", f"label_values(gpuwatch_gpu_job_info{{{HOST}}}, user)"),
    ]
