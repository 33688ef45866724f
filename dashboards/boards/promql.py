"""PromQL pieces the dashboards share: the variable selectors, the join clauses, and the
queries that encode a state as a number, with the value mappings that decode it."""

from __future__ import annotations

from boards.blocks import YES_NO_OPTIONS, Json

# Selector fragments. `host` is the scrape target (`instance`): the agent puts no host label on
# its series. The chart's ServiceMonitor/PodMonitor set `instance` to the node's name (and add
# `node`, the same name), so on Kubernetes the host is the node and stays one host across the
# agent pod's rollouts; a static scrape keeps its host:port. GPU series carry no pod labels
# (pods join through gpuwatch_gpu_pod_info on uuid), so `namespace` filters only the pod
# panels (NS, POD_GPU); per-GPU panels ignore it.
HOST = 'job=~"$job", instance=~"$host"'
GPU = HOST + ', gpu=~"$gpu"'
NS = HOST + ', namespace=~"$namespace"'
POD_GPU = GPU + ', namespace=~"$namespace"'
ON_GPU = "on(job, instance, gpu)"
ON_UUID = "on(job, instance, uuid)"

SLURM = GPU + ', account=~"$account", user=~"$user"'
"""Slurm job series (gpuwatch_gpu_job_info) filtered by the gpu, account and user variables;
the account and user counters carry no gpu label (ACCOUNT, USER ignore it)."""
ACCOUNT = HOST + ', account=~"$account"'
USER = HOST + ', user=~"$user"'

IDLE_UNKNOWN_REASONS = ("pid_unmapped", "no_process_list")
"""Why a hold's allocated-idle is unknown (gpuwatch_gpu_pod_allocated_idle_unknown{reason}),
as `gpuwatch.core.snapshot.IDLE_UNKNOWN_REASONS` says (tests/dashboards check they agree)."""
IDLE_UNKNOWN_CODE = 2
"""The "runs nothing" cell's value for the first unknown reason; the next ones follow."""
YES_NO_UNKNOWN = (
    {
        "type": "value",
        "options": {
            **YES_NO_OPTIONS,
            **{
                str(IDLE_UNKNOWN_CODE + i): {
                    "text": f"unknown ({reason})",
                    "color": "blue",
                    "index": 2 + i,
                }
                for i, reason in enumerate(IDLE_UNKNOWN_REASONS)
            },
        },
    },
)


def allocated_idle_or_unknown(by: str, selector: str) -> str:
    """Per holder (`by`: a `max by (...` prefix), gpuwatch_gpu_pod_allocated_idle (0 or 1),
    else, where it is absent because unknown, `IDLE_UNKNOWN_CODE` + the reason's index."""
    unknown = "\n  or ".join(
        f'gpuwatch_gpu_pod_allocated_idle_unknown{{{selector}, reason="{reason}"}}'
        f" * {IDLE_UNKNOWN_CODE + i}"
        for i, reason in enumerate(IDLE_UNKNOWN_REASONS)
    )
    return f"{by}) (gpuwatch_gpu_pod_allocated_idle{{{selector}}})\nor\n{by}) (\n  {unknown}\n)"


STATES = ("pending", "busy", "underutilized", "idle", "held")
STATE_COLORS = {
    "pending": "text",
    "busy": "green",
    "underutilized": "yellow",
    "idle": "orange",
    "held": "red",
}


def state_code_expr() -> str:
    """One series per GPU whose value is its state's code (1 pending ... 5 held)."""
    parts = [f'gpuwatch_gpu_state{{{GPU}, state="{s}"}} * {i}' for i, s in enumerate(STATES, 1)]
    return "max by (instance, gpu) (\n  " + "\nor\n  ".join(parts) + "\n)"


STATE_MAPPINGS: tuple[Json, ...] = (
    {
        "type": "value",
        "options": {
            str(i): {"text": s, "color": STATE_COLORS[s], "index": i - 1}
            for i, s in enumerate(STATES, 1)
        },
    },
)
"""Grafana value mappings of `state_code_expr`'s codes: each state's name and colour."""
