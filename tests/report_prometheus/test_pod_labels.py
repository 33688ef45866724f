"""Which namespace and pod a pod counter series names, however it was scraped."""

from __future__ import annotations

from gpuwatch.promapi.labels import pod_of


def test_honoured_labels_name_the_pod() -> None:
    labels = (("instance", "n1:9842"), ("namespace", "team-a"), ("pod", "train-0"))
    assert pod_of(labels) == ("team-a", "train-0")


def test_renamed_labels_win_over_the_agents_own_pod() -> None:
    """Without honor_labels the target's labels (the agent's pod) take the plain names."""
    labels = (
        ("exported_namespace", "team-b"),
        ("exported_pod", "vllm-0"),
        ("namespace", "gpuwatch"),
        ("pod", "gpuwatch-agent-x7k"),
    )
    assert pod_of(labels) == ("team-b", "vllm-0")


def test_a_series_without_pod_labels_names_none() -> None:
    assert pod_of((("instance", "n1:9842"), ("namespace", "team-a"))) is None
    assert pod_of(()) is None
