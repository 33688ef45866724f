"""Series labels of a Prometheus-compatible API's answers: the sorted label tuple every
answer is keyed by, a selector matching one series, and which host or pod a series
belongs to (the agent's and the Helm chart's label conventions)."""

from __future__ import annotations

from collections.abc import Mapping

LabelKey = tuple[tuple[str, str], ...]
"""A series' labels, sorted by name, without `__name__`."""


def label_key(metric: Mapping[str, str]) -> LabelKey:
    """A series' labels as a sorted tuple, without `__name__`."""
    return tuple(sorted((k, v) for k, v in metric.items() if k != "__name__"))


def escape_value(value: str) -> str:
    """A label value as a PromQL string literal's content."""
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def selector(metric: str, labels: LabelKey) -> str:
    """A selector matching exactly one series, every label value escaped."""
    matchers = [f'__name__="{escape_value(metric)}"']
    matchers += [f'{name}="{escape_value(value)}"' for name, value in labels]
    return "{" + ",".join(matchers) + "}"


def host_of(labels: LabelKey) -> str:
    """The host a series belongs to: `node` (the Kubernetes node, from the chart's monitors:
    stable across the agent pod's rollouts), else `host`, else `hostname`, else
    `instance` (the scrape target)."""
    found = dict(labels)
    return (
        found.get("node") or found.get("host") or found.get("hostname") or found.get("instance", "")
    )


def pod_of(labels: LabelKey) -> tuple[str, str] | None:
    """(namespace, pod) a pod counter series names; the agent's own labels win when a
    scrape without `honor_labels: true` renamed them `exported_namespace`/`exported_pod`
    (the unprefixed ones then name the agent's pod). None without both."""
    found = dict(labels)
    namespace = found.get("exported_namespace", found.get("namespace"))
    pod = found.get("exported_pod", found.get("pod"))
    return None if namespace is None or pod is None else (namespace, pod)
