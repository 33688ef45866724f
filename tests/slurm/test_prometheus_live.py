"""The Slurm dashboard and alert against a real Prometheus scraping a real agent on real
Slurm jobs: `gpuwatch run --simulate slurm --speed 10` (a 60 s window, squeue every
second, reclaim in dry-run) with a busy job of account physics and an idle one of chem.

Every panel query of `gpuwatch-slurm.json`, its variables resolved as Grafana does, must
return series carrying the labels its legend and table columns show; and
`GpuwatchSlurmJobAllocatedIdle` (its `for:` at 0 s, `rulefiles.fast_copy`) must fire for
the idle job alone, naming its user, account and partition.
"""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path

import pytest

from tests.agent_process import start_agent
from tests.conftest import REPO_ROOT, free_port
from tests.dashboards.lint import expand
from tests.dashboards.test_live_queries import api, regex_value, wait_for_data
from tests.prometheus_process import running_prometheus, scrape_config
from tests.rules.rulefiles import ALERTS_FILE, fast_copy
from tests.slurm.agent_helpers import busy_and_idle_jobs
from tests.slurm_cluster import SlurmCluster

BOARD = REPO_ROOT / "dashboards" / "gpuwatch-slurm.json"
DEADLINE_SECONDS = 90.0
AT_LEAST = {"job": 1, "host": 1, "gpu": 2, "account": 2, "user": 1}


def test_slurm_dashboard_queries_and_alert_on_a_real_prometheus(
    slurm: SlurmCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SLURM_CONF", str(slurm.conf))
    config = tmp_path / "gpuwatch.toml"
    config.write_text(
        f'[agent]\nstate_dir = "{tmp_path}"\n'
        "[analysis]\nwindow_seconds = 60.0\nlookback_seconds = 60.0\n"
        '[slurm]\nlist_interval_seconds = 1.0\nreclaim_mode = "dry-run"\n'
        "reclaim_warn_after_seconds = 60.0\nreclaim_cancel_after_seconds = 120.0\n"
    )
    port = free_port()
    rules = fast_copy(ALERTS_FILE, tmp_path / "alerts.rules.yml")
    with busy_and_idle_jobs(slurm, idle_args=("--partition=debug",)) as jobs:
        agent = start_agent(["--simulate", "slurm", "--speed", "10", "--config", str(config)], port)
        try:
            with running_prometheus(tmp_path, scrape_config([port], [rules])) as url:
                deadline = time.monotonic() + DEADLINE_SECONDS
                board = json.loads(BOARD.read_text())
                values: dict[str, str] = {}
                for var in board["templating"]["list"]:
                    if var["type"] != "query":
                        continue
                    selector, label = var["definition"][len("label_values(") : -1].rsplit(",", 1)
                    found: list[str] = []
                    while time.monotonic() < deadline:
                        found = (
                            api(
                                url,
                                f"/api/v1/label/{label.strip()}/values",
                                **{"match[]": expand(selector, values)},
                            )
                            or []
                        )
                        if len(found) >= AT_LEAST[var["name"]]:
                            break
                        time.sleep(0.5)
                    assert len(found) >= AT_LEAST[var["name"]], (var["name"], found)
                    values[var["name"]] = regex_value(found)
                pending = {
                    panel["title"]: (panel, [expand(t["expr"], values) for t in panel["targets"]])
                    for panel in board["panels"]
                }
                assert len(pending) == 12
                wait_for_data(url, pending, deadline)
                query = 'ALERTS{alertname="GpuwatchSlurmJobAllocatedIdle", alertstate="firing"}'
                firing: list[dict[str, str]] = []
                while time.monotonic() < deadline and not firing:
                    firing = [s["metric"] for s in api(url, "/api/v1/query", query=query)["result"]]
                    time.sleep(0.5)
                assert [(a["job_id"], a["user"], a["account"], a["partition"]) for a in firing] == [
                    (jobs.idle, "root", "chem", "debug")
                ]
        finally:
            agent.send_signal(signal.SIGTERM)
            _, err = agent.communicate(timeout=15)
    assert agent.returncode == 0, err.decode()
