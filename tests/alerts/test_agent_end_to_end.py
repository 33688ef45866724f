"""`gpuwatch run --simulate demo --speed 120` posting to a loopback Slack.

At 120 simulated seconds per real second the 30-minute window passes in 15 s: the idle
GPU 1 and the held GPU 2 must be reported within a minute of real time, the training
GPU 0 never.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.alerts.conftest import FakeSlack
from tests.conftest import free_port

DEADLINE_SECONDS = 60


def gpus_in(text: str) -> set[int]:
    return {int(n) for n in re.findall(r"GPU (\d+) \(", text)}


def test_demo_at_speed_120_alerts_idle_and_held_gpus_only(slack: FakeSlack, tmp_path: Path) -> None:
    env = {
        **os.environ,
        "GPUWATCH_SLACK_WEBHOOK_URL": slack.url,
        "GPUWATCH_AGENT__STATE_DIR": str(tmp_path / "state"),
        "GPUWATCH_ANALYSIS__EVALUATION_INTERVAL_SECONDS": "10",
    }
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "gpuwatch",
            "run",
            "--simulate",
            "demo",
            "--speed",
            "120",
            "--listen",
            f"127.0.0.1:{free_port()}",
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    alerted: set[int] = set()
    try:
        deadline = time.monotonic() + DEADLINE_SECONDS
        while time.monotonic() < deadline and not {1, 2} <= alerted:
            time.sleep(0.5)
            alerted = set().union(*(gpus_in(p.body.get("text", "")) for p in slack.delivered()))
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=10)
    assert proc.returncode == 0, err.decode()
    assert {1, 2} <= alerted, f"alerted GPUs: {alerted}"
    assert 0 not in alerted, "the training GPU's data-loading pauses are not idleness"
    bodies = json.dumps([p.body for p in slack.delivered()])
    assert "$6.88/h" in bodies, "alerts carry the GPU's price (the demo's static price)"
    assert "Cost so far" in bodies
    # the simulated node's pods: GPU 1 held by team-b's eval pod, GPU 2 by team-a's notebook
    assert "`team-b/batch-eval-7f9c` (holds it, runs nothing)" in bodies
    assert "`team-a/notebook-alice`" in bodies
    assert slack.url.rsplit("/", 1)[-1].encode() not in err, "the webhook secret leaked to logs"


def test_alert_test_command_posts_once_and_reports(slack: FakeSlack) -> None:
    env = {**os.environ, "GPUWATCH_SLACK_WEBHOOK_URL": slack.url}
    result = subprocess.run(
        [sys.executable, "-m", "gpuwatch", "alert", "test"],
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert len(slack.delivered()) == 1
    assert slack.url not in result.stdout + result.stderr


def test_alert_test_without_a_webhook_is_a_usage_error() -> None:
    env = {k: v for k, v in os.environ.items() if k != "GPUWATCH_SLACK_WEBHOOK_URL"}
    result = subprocess.run(
        [sys.executable, "-m", "gpuwatch", "alert", "test"],
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
