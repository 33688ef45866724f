"""Dashboard variables: the datasource, then query variables (multi-select, All = `.*`)
that the selectors in `boards.promql` filter on."""

from __future__ import annotations

from boards.blocks import DS, Json
from boards.promql import HOST


def variable(
    name: str, label: str, query: str, *, include_all: bool = True, description: str = ""
) -> Json:
    """A query variable over the datasource (multi-select, All = `.*`)."""
    var: Json = {
        "name": name,
        "label": label,
        **({"description": description} if description else {}),
        "type": "query",
        "datasource": DS,
        "query": query,
        "definition": query,
        "refresh": 2,
        "sort": 3,
        "multi": True,
        "includeAll": include_all,
        "current": {"selected": True, "text": ["All"], "value": ["$__all"]},
        "options": [],
        "hide": 0,
    }
    if include_all:
        var["allValue"] = ".*"
    return var


def variables() -> list[Json]:
    """datasource, job, host (the scrape target), gpu and namespace."""
    return [
        {
            "name": "datasource",
            "label": "Data source",
            "type": "datasource",
            "query": "prometheus",
            "current": {},
            "hide": 0,
            "refresh": 1,
            "regex": "",
            "options": [],
        },
        variable("job", "Job", "label_values(gpuwatch_build_info, job)"),
        variable(
            "host",
            "Host",
            'label_values(gpuwatch_build_info{job=~"$job"}, instance)',
            description="The agents' scrape targets (instance). The Helm chart's monitors set "
            "instance to the Kubernetes node's name (and add node): one host per node, "
            "across agent pod rollouts.",
        ),
        variable("gpu", "GPU", f"label_values(gpuwatch_gpu_info{{{HOST}}}, gpu)"),
        variable(
            "namespace",
            "Namespace",
            f"label_values(gpuwatch_gpu_pod_info{{{HOST}}}, namespace)",
        ),
    ]
