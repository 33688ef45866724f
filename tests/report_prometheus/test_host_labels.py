"""Which host a series belongs to in the fleet report, however it was scraped."""

from __future__ import annotations

from gpuwatch.promapi.labels import host_of


def test_node_wins_over_the_scrape_target() -> None:
    """The chart's monitors add `node`; a scrape that keeps instance = the pod's IP:port
    still names the node, so a rollout (new pod IP) stays one host."""
    labels = (("instance", "10.4.2.17:9842"), ("job", "gw-gpuwatch"), ("node", "gpu-node-7"))
    assert host_of(labels) == "gpu-node-7"
    assert host_of((("instance", "10.4.9.9:9842"), ("node", "gpu-node-7"))) == "gpu-node-7"


def test_without_node_the_older_labels_then_the_instance() -> None:
    assert host_of((("host", "h1"), ("hostname", "h2"), ("instance", "i:1"))) == "h1"
    assert host_of((("hostname", "h2"), ("instance", "i:1"))) == "h2"
    assert host_of((("instance", "i:1"),)) == "i:1"
    assert host_of((("instance", "i:1"), ("node", ""))) == "i:1"
    assert host_of(()) == ""
