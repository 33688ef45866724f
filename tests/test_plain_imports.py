"""A configuration imports what it uses: nothing of the history, attribution or reports
when they are off.

The agent's memory is mostly the code it has imported (docs/benchmarks.md, "Memory a
plain host imports"): grpc and protobuf alone are about 18 MiB of resident memory,
sqlite3 about 1 MiB. No configuration of the agent imports grpc or protobuf: attribution
talks to the kubelet with `gpuwatch.kube.grpc_unary` on h2 (only the simulated kubelet,
a server, uses grpcio). Each case runs in a fresh interpreter and reads `sys.modules`
once the agent has sampled and answered a scrape:

- `gpuwatch run --simulate dgx-h100` with the history off (no pods: attribution off),
  the daemon exactly as the benchmark runs it;
- the agent built in-process as the tests build it (`tests.conftest.scenario_agent`),
  one tick and one render of `/metrics`.

A control runs the chart's configuration (the `demo` scenario, whose pods turn
attribution on, with the history on; the simulated kubelet and token server in a process
of their own, as on a node and in bench/daemonset_memory.py) until the kubelet has
answered a List, and finds the history's modules and the pod-resources client loaded
(the check can see them), and still neither grpc nor protobuf.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from tests.conftest import REPO_ROOT, free_port

AGENT_NEVER = ("grpc", "google.protobuf", "gpuwatch.report")
"""Packages no agent configuration imports (each with its submodules)."""

FORBIDDEN = (*AGENT_NEVER, "sqlite3", "_sqlite3", "h2")
"""Packages a plain configuration must not import (each with its submodules)."""

ALSO_OFF = (
    "gpuwatch.kube.podresources",
    "gpuwatch.collectors.attribution",
    "gpuwatch.collectors.attribution_join",
    "gpuwatch.collectors.slurm",
    "gpuwatch.slurm.evidence",
    "gpuwatch.slurm.queue",
    "gpuwatch.history.store",
    "gpuwatch.history.writer",
    "gpuwatch.alerts.dispatcher",
    "gpuwatch.slack.outbox",
    "gpuwatch.cli.alert",
    "gpuwatch.cli.size",
    "gpuwatch.cli.tco",
    "gpuwatch.cli.size_output",
    "gpuwatch.cli.status",
    "gpuwatch.cli.report",
    "gpuwatch.cli.plan",
    "gpuwatch.billing.aws_pricing",
    "gpuwatch.billing.aws_cost_explorer",
)
"""gpuwatch's own modules for those parts (and the other commands), off as well."""

CONFIG = """\
[agent]
per_process_metrics = true
state_dir = "{state_dir}"

[history]
enabled = {history}

[logging]
level = "warning"
"""

# Runs the real CLI in this interpreter; a thread waits for a served scrape holding
# `marker`, then prints the loaded modules as JSON and ends the process.
_CLI_SCRIPT = """\
import json, os, sys, threading, time, urllib.request
port, marker = sys.argv[1], sys.argv[2].encode()

def report():
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as r:
                if r.status == 200 and marker in r.read():
                    break
        except OSError:
            pass
        time.sleep(0.1)
    else:
        os._exit(3)
    sys.stdout.write(json.dumps(sorted(sys.modules)))
    sys.stdout.flush()
    os._exit(0)

threading.Thread(target=report, daemon=True).start()
from gpuwatch.cli import main
main(sys.argv[3:])
os._exit(4)
"""

_AGENT_SCRIPT = """\
import json, sys
from prometheus_client.exposition import generate_latest
from gpuwatch.config import AgentConfig, Config, HistoryConfig
from tests.conftest import scenario_agent, simulated

nv, clock = simulated("dgx-h100")
config = Config(
    agent=AgentConfig(hostname="test-host", per_process_metrics=True),
    history=HistoryConfig(enabled=False),
)
agent = scenario_agent(config, nv, clock)
assert not agent.open_history(simulated=True)
clock.advance(1.0)
agent.tick()
assert b"gpuwatch_gpu_" in generate_latest(agent.registry)
agent.stop()
sys.stdout.write(json.dumps(sorted(sys.modules)))
"""


def _environ() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("GPUWATCH_")}


def _loaded(argv: list[str]) -> set[str]:
    done = subprocess.run(
        [sys.executable, *argv],
        cwd=REPO_ROOT,
        env=_environ(),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return set(json.loads(done.stdout))


def _cli_modules(
    tmp_path: Path,
    scenario: str,
    *,
    history: bool,
    services: Path | None = None,
    marker: str = "gpuwatch_gpu_",
) -> set[str]:
    """Modules of `gpuwatch run --simulate scenario` once a scrape holds `marker`;
    `services`: the endpoints file of a services process (`--services`)."""
    config = tmp_path / "gpuwatch.toml"
    config.write_text(
        CONFIG.format(state_dir=tmp_path / "state", history=str(history).lower()),
        encoding="utf-8",
    )
    (tmp_path / "state").mkdir()
    port = free_port()
    args = ["run", "--simulate", scenario, "--config", str(config)]
    args += ["--listen", f"127.0.0.1:{port}"]
    if services is not None:
        args += ["--services", str(services)]
    return _loaded(["-c", _CLI_SCRIPT, str(port), marker, *args])


@contextlib.contextmanager
def _services(scenario: str, folder: Path) -> Iterator[Path]:
    """`python -m gpuwatch.simulate.services scenario` in its own process; yields its
    endpoints file once written."""
    endpoints = folder / "endpoints.json"
    argv = [sys.executable, "-m", "gpuwatch.simulate.services", scenario]
    process = subprocess.Popen(
        [*argv, "--endpoints", str(endpoints)], cwd=REPO_ROOT, env=_environ()
    )
    try:
        deadline = time.monotonic() + 60
        while not endpoints.exists():
            assert process.poll() is None, "the services process ended"
            assert time.monotonic() < deadline, "no endpoints file in 60 s"
            time.sleep(0.1)
        yield endpoints
    finally:
        process.terminate()
        process.wait(timeout=30)


def _under(modules: set[str], packages: tuple[str, ...]) -> list[str]:
    return sorted(m for m in modules if any(m == p or m.startswith(p + ".") for p in packages))


def test_plain_daemon_imports_no_grpc_sqlite_or_reports(tmp_path: Path) -> None:
    modules = _cli_modules(tmp_path, "dgx-h100", history=False)
    assert "gpuwatch.agent" in modules
    assert _under(modules, FORBIDDEN) == []
    assert _under(modules, ALSO_OFF) == []


def test_plain_in_process_agent_imports_no_grpc_sqlite_or_reports() -> None:
    modules = _loaded(["-c", _AGENT_SCRIPT])
    assert "gpuwatch.agent" in modules
    assert _under(modules, FORBIDDEN) == []
    assert _under(modules, (*ALSO_OFF[:6],)) == []


def test_the_charts_configuration_loads_them_but_never_grpc(tmp_path: Path) -> None:
    """Control: with attribution (the demo's pods, after a List answered) and the history
    on, their modules are loaded; grpc and protobuf still are not."""
    with _services("demo", tmp_path) as endpoints:
        modules = _cli_modules(
            tmp_path, "demo", history=True, services=endpoints, marker="gpuwatch_attribution_up 1.0"
        )
    for package in (
        "sqlite3",
        "gpuwatch.history.store",
        "gpuwatch.kube.podresources",
        "gpuwatch.collectors.attribution",
        "h2",
    ):
        assert _under(modules, (package,)) != [], package
    assert _under(modules, AGENT_NEVER) == []
