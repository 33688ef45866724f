"""The one-line-per-outage sources and their retry delays, pinned as they were written
before they were put on `gpuwatch.core.health` (`Outage`, `backoff_seconds`): the same
lines at the same levels, the same delays.

These assert on log text on purpose: the lines are what an operator reads, and the
refactor promised them unchanged.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from gpuwatch.billing.health import SourceHealth
from gpuwatch.collectors.attribution import AttributionCollector
from gpuwatch.core.clock import ManualClock
from gpuwatch.kube.config import KubernetesConfig
from gpuwatch.slack.transport import RetryPolicy


def _lines(caplog: pytest.LogCaptureFixture) -> list[tuple[str, str, str]]:
    return [(r.name, r.levelname, r.getMessage()) for r in caplog.records]


def test_billing_source_logs_one_warning_per_episode_and_backs_off(
    caplog: pytest.LogCaptureFixture,
) -> None:
    health = SourceHealth("pricing", initial_backoff_seconds=60.0, max_backoff_seconds=300.0)
    retry_at = []
    with caplog.at_level(logging.DEBUG, logger="gpuwatch.billing"):
        assert health.may_try(0.0)
        for now in (100.0, 200.0, 400.0, 1000.0, 2000.0):
            health.failed(now, "timed out")
            retry_at.append(health.retry_at)
        assert not health.may_try(2299.0)
        assert health.may_try(2300.0)
        health.succeeded()
        health.succeeded()
        health.failed(3000.0, "no credentials", backoff=False)
        retry_at.append(health.retry_at)
        health.failed(3001.0, "no credentials")
        retry_at.append(health.retry_at)
    assert retry_at == [160.0, 320.0, 640.0, 1300.0, 2300.0, 3000.0, 3121.0]
    assert (health.up, health.failures) == (False, 2)
    warn = "billing source pricing unavailable ({}); falling back to the next tier"
    assert _lines(caplog) == [
        ("gpuwatch.billing", "WARNING", warn.format("timed out")),
        ("gpuwatch.billing", "INFO", "billing source pricing answers again"),
        ("gpuwatch.billing", "WARNING", warn.format("no credentials")),
    ]


def _collector(tmp_path: Path) -> AttributionCollector:
    config = KubernetesConfig(
        pod_resources_socket=tmp_path / "kubelet.sock",
        proc_root=tmp_path / "proc",
        pod_logs_dir=tmp_path / "pods",
    )
    return AttributionCollector(config, ManualClock(0.0))


def test_attribution_logs_pod_log_and_cgroup_outages_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    collector = _collector(tmp_path)
    with caplog.at_level(logging.DEBUG, logger="gpuwatch.collectors.attribution"):
        assert collector._pod_names() == {}
        assert collector._pod_names() == {}
        (tmp_path / "pods").mkdir()
        assert collector._pod_names() == {}
        (tmp_path / "pods").rmdir()
        assert collector._pod_names() == {}
        collector._log_unmapped({4242}, ())
        collector._log_unmapped({4242, 4343}, ())
        collector._log_unmapped(set(), ())
        collector._log_unmapped(set(), ())
        collector._log_unmapped({7}, ())
    collector.close()
    pods = f"cannot list {tmp_path / 'pods'} (No such file or directory): processes are "
    pods += "attributed only where one pod holds their GPU"
    cgroup = (
        "cannot read <pid>/cgroup under {root} for {n} GPU process(es) on GPU(s) : NVML "
        "reports host PIDs, so kubernetes.proc_root must be the host's /proc (the chart "
        "mounts it at /host/proc); their holders' allocated-idle is unknown"
    )
    root = tmp_path / "proc"
    name = "gpuwatch.collectors.attribution"
    assert _lines(caplog) == [
        (name, "WARNING", pods),
        (name, "WARNING", pods),
        (name, "WARNING", cgroup.format(root=root, n=1)),
        (name, "INFO", f"every GPU process's pod is readable under {root} again"),
        (name, "WARNING", cgroup.format(root=root, n=1)),
    ]


def test_slack_retry_delays() -> None:
    policy = RetryPolicy()
    assert [policy.backoff(r) for r in range(8)] == [1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 60.0, 60.0]
    short = RetryPolicy(backoff_seconds=0.5, backoff_max_seconds=3.0)
    assert [short.backoff(r) for r in (0, 1, 2, 3, 40)] == [0.5, 1.0, 2.0, 3.0, 3.0]
