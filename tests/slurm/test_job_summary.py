"""A finished Slurm job's summary (`gpuwatch job`), re-derived by hand from the history.

`gpuwatch run --simulate slurm` with the history on (1 s ticks, a write every second)
against the real cluster; a job given two GPUs whose one process names only the first
(`exec env SLURM_JOB_GPUS=<first>`): it runs on one and holds the other idle all along.
It ends by itself; the agent stops (its last write); the summary is then read with
`gpuwatch job` and every figure recomputed from the stored rows with SQL and arithmetic.
"""

from __future__ import annotations

import json
import signal
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from gpuwatch.cli import main
from gpuwatch.history.store import HISTORY_FILE
from tests.agent_process import start_agent
from tests.conftest import free_port
from tests.prometheus_process import running_prometheus, scrape_config
from tests.slurm.agent_helpers import job_rows
from tests.slurm_cluster import SlurmCluster


@dataclass(frozen=True)
class Finished:
    job: str
    config: Path
    history: Path
    prometheus: str  # the URL of the real Prometheus that scraped the agent every second


def _ready(url: str) -> None:
    deadline = time.monotonic() + 30
    while True:
        try:
            with urllib.request.urlopen(f"{url}/-/ready", timeout=1) as answer:
                if answer.status == 200:
                    return
        except OSError:
            pass
        if time.monotonic() > deadline:
            pytest.fail("prometheus never became ready")
        time.sleep(0.2)


def _promql(url: str, query: str) -> list[dict[str, Any]]:
    address = f"{url}/api/v1/query?" + urllib.parse.urlencode({"query": query})
    with urllib.request.urlopen(address, timeout=10) as answer:
        result: list[dict[str, Any]] = json.load(answer)["data"]["result"]
    return result


def _wait_scraped_gone(url: str, job: str) -> None:
    """Until a scrape no longer shows the job: the agent has stopped charging it, so the
    counters in that scrape (and Prometheus's last samples of them) are final."""
    deadline = time.monotonic() + 30
    seen = False
    while True:
        shown = _promql(url, f'gpuwatch_gpu_job_info{{job_id="{job}"}}')
        seen = seen or bool(shown)
        if seen and not shown:
            return
        if time.monotonic() > deadline:
            pytest.fail(f"Prometheus still shows job {job} (or never did)")
        time.sleep(0.5)


@pytest.fixture(scope="module")
def finished(slurm: SlurmCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Finished]:
    """The job ended, the agent stopped (after Prometheus scraped it every second)."""
    state = tmp_path_factory.mktemp("job-summary")
    config = state / "gpuwatch.toml"
    config.write_text(
        f'[agent]\nstate_dir = "{state}"\ninterval_seconds = 1.0\n\n'
        "[history]\nenabled = true\nwrite_interval_seconds = 1.0\n\n"
        "[slurm]\nlist_interval_seconds = 1.0\n"
    )
    port = free_port()
    with running_prometheus(state, scrape_config([port])) as url:
        _ready(url)
        proc = start_agent(
            ["--simulate", "slurm", "--config", str(config)],
            port,
            prefix=("env", f"SLURM_CONF={slurm.conf}"),
        )
        job = ""
        try:
            job = slurm.sbatch(
                "--gres=gpu:2",
                "--account=astro",
                wrap='exec env SLURM_JOB_GPUS="${SLURM_JOB_GPUS%%,*}" sleep 8',
            )
            slurm.wait_running(job)
            slurm.wait_ended(job, timeout_s=40.0)
            _wait_scraped_gone(url, job)
            time.sleep(1.0)  # a few more ticks and scrapes after the end
        finally:
            if job:
                slurm.run(["scancel", job], check=False)
            proc.send_signal(signal.SIGTERM)
            _, err = proc.communicate(timeout=20)
        assert proc.returncode == 0, err.decode()
        yield Finished(job, config, state / HISTORY_FILE, url)


def _job(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(["job", *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_the_summary_is_the_stored_rows_summed_by_hand(
    finished: Finished, capsys: pytest.CaptureFixture[str]
) -> None:
    job, config, history = finished.job, finished.config, finished.history
    rows = job_rows(history, job)
    assert rows, "the history recorded the job"
    code, out, err = _job([job, "--config", str(config), "--format", "json"], capsys)
    assert code == 0, err
    summary = json.loads(out)
    assert (summary["job_id"], summary["user"], summary["account"], summary["partition"]) == (
        job,
        "root",
        "astro",
        "debug",
    )
    held = sum(float(r["held_seconds"]) for r in rows)
    idle = sum(float(r["idle_seconds"]) for r in rows)
    cost = sum(float(r["cost_usd"]) for r in rows)
    idle_cost = sum(float(r["idle_cost_usd"]) for r in rows)
    activity = sum(float(r["activity_seconds"]) for r in rows)
    sampled = sum(float(r["activity_sampled_seconds"]) for r in rows)
    assert held > 10.0, "two GPUs for about 8 s each"
    assert summary["gpu_hours"] == pytest.approx(held / 3600, rel=1e-12)
    assert summary["idle_gpu_hours"] == pytest.approx(idle / 3600, rel=1e-12)
    assert summary["cost_usd"] == pytest.approx(cost, rel=1e-12)
    assert summary["idle_cost_usd"] == pytest.approx(idle_cost, rel=1e-12)
    held_cost = sum(float(r["held_cost_usd"]) for r in rows)  # the idle GPU-hours' $
    assert summary["idle_hours_cost_usd"] == pytest.approx(held_cost, rel=1e-12)
    assert 0 < held_cost <= cost
    assert summary["activity_mean_ratio"] == pytest.approx(activity / sampled, rel=1e-12)
    # the job is each GPU's only holder and no other process names its GPUs: it is charged
    # the GPU's rent for the seconds it held it, $ = rent x hours (float sums only)
    for row in rows:
        price = float(row["price_usd_per_hour"])
        assert price > 0
        rent = price * float(row["held_seconds"]) / 3600
        assert float(row["cost_usd"]) == pytest.approx(rent, rel=1e-9)
    gpus = {g["uuid"]: g for g in summary["gpus"]}
    assert len(gpus) == 2, "the two GPUs Slurm gave it"
    # idle all along, by hand: no busy second, some idle ones. The GPU its process does
    # not name is, but for a tick that may catch the batch shell before its exec (its
    # environment then names both GPUs, as Slurm set it): a real start-up, kept as busy
    busy_by_gpu: dict[str, float] = {}
    idle_by_gpu: dict[str, float] = {}
    for row in rows:
        busy_by_gpu[row["uuid"]] = busy_by_gpu.get(row["uuid"], 0.0) + row["busy_seconds"]
        idle_by_gpu[row["uuid"]] = idle_by_gpu.get(row["uuid"], 0.0) + row["idle_seconds"]
    along = {u for u in gpus if busy_by_gpu[u] == 0 and idle_by_gpu[u] > 0}
    assert {u for u, g in gpus.items() if g["idle_all_along"]} == along
    assert summary["advice"]["gpus"] == 2 - len(along), "request the GPUs it ran on"
    unused = max(gpus.values(), key=lambda g: g["idle_seconds"])
    assert unused["busy_seconds"] <= 2.0, "the GPU it never named: at most a start-up tick"
    assert unused["idle_seconds"] >= 5.0
    if unused["busy_seconds"] == 0:
        assert unused["idle_cost_usd"] == pytest.approx(unused["cost_usd"], rel=1e-12)
        assert unused["idle_hours_cost_usd"] == pytest.approx(unused["cost_usd"], rel=1e-12)
    assert unused["cost_usd"] > 0
    # p95: the lowest 1 % bin holding 95 % of the sampled seconds of the summed histograms
    bins: dict[int, float] = {}
    for row in rows:
        for key, seconds in json.loads(str(row["activity_histogram"])).items():
            bins[int(key)] = bins.get(int(key), 0.0) + seconds
    total, running = sum(bins.values()), 0.0
    for key in sorted(bins):
        running += bins[key]
        if running >= 0.95 * total:
            assert summary["activity_p95_ratio"] == key / 100
            break
    code, text, err = _job([job, "--config", str(config)], capsys)
    assert code == 0, err
    assert f"Job {job}: user root, account astro, partition debug" in text
    assert "(idle all along)" in text
    assert "request 1 GPU" in text


def test_an_unknown_job_is_one_line_and_exit_1_with_names_escaped(
    finished: Finished, capsys: pytest.CaptureFixture[str]
) -> None:
    config = finished.config
    code, out, err = _job(["\x1b[2J99999", "--config", str(config)], capsys)
    assert code == 1
    assert out == ""
    (line,) = err.splitlines()
    assert line.startswith("gpuwatch: no job ")
    assert "\x1b" not in line


def test_from_prometheus_the_same_job_within_a_scrape(
    finished: Finished, capsys: pytest.CaptureFixture[str]
) -> None:
    """The fleet path reads the real Prometheus that scraped the agent every second."""
    job, config = finished.job, str(finished.config)
    code, out, err = _job([job, "--config", config, "--format", "json"], capsys)
    assert code == 0, err
    local = json.loads(out)
    flags = ["--prometheus", finished.prometheus, "--prometheus-scrape-interval", "1"]
    code, out, err = _job([job, "--config", config, "--format", "json", *flags], capsys)
    assert code == 0, err
    fleet = json.loads(out)
    assert (fleet["user"], fleet["account"], fleet["partition"]) == ("root", "astro", "debug")
    assert {g["uuid"] for g in fleet["gpus"]} == {g["uuid"] for g in local["gpus"]}
    assert {g["model"] for g in fleet["gpus"]} == {g["model"] for g in local["gpus"]}
    # held seconds: the info series' samples x the 1 s scrape interval, counted here apart
    counted = _promql(
        finished.prometheus, f'count_over_time(gpuwatch_gpu_job_info{{job_id="{job}"}}[1h])'
    )
    samples = sum(float(r["value"][1]) for r in counted)
    assert fleet["gpu_hours"] == pytest.approx(samples / 3600, rel=1e-12)
    # the same job as the history's ticks saw it, less what the scrapes did not see: a
    # GPU's held span in Prometheus runs from the first to the last 1 s scrape that found
    # the hold in /metrics, inside the ticks' span (the first and last ticks of a hold are
    # often between scrapes). Measured on the quiet machine (5 runs): 1.5-2.5 scrapes per
    # GPU fewer (12-14 GPU-seconds against 17). Under the full suite's load Prometheus
    # also misses 1 s scrapes (CI: 10 GPU-seconds against 17), so the lower bound is half
    # the history's; the exact check of the fleet path is the count_over_time equality
    # above, and the upper bound catches a hold counted twice
    assert local["gpu_hours"] / 2 <= fleet["gpu_hours"] <= local["gpu_hours"]
    assert local["idle_gpu_hours"] / 2 <= fleet["idle_gpu_hours"] <= local["idle_gpu_hours"]
    # the fleet's $: the GPUs' cost counters' increases to the job's scrapes (it held each
    # GPU alone) telescope over each GPU's held span, whose first scrape has no scrape
    # before it in that span: rent x (the samples - one per GPU) x 1 s. Measured within
    # 0.1 % (5 runs); 5 % leaves a quarter second of tick jitter at the spans' ends
    (price,) = {float(r["price_usd_per_hour"]) for r in job_rows(finished.history, job)}
    priced = (samples - len(fleet["gpus"])) / 3600
    assert fleet["cost_usd"] == pytest.approx(price * priced, rel=0.05)
    # idle $: the unused GPU's scrapes without a step, and the busy one's before its
    # step ran; the scrapes see a subset of the ticks: a GPU idle all along in the
    # history is in Prometheus too
    unused = max(fleet["gpus"], key=lambda g: g["idle_seconds"])
    assert 0 < unused["idle_hours_cost_usd"] <= fleet["idle_hours_cost_usd"] < fleet["cost_usd"]
    assert 0 < fleet["idle_cost_usd"] <= fleet["cost_usd"]
    along = {g["uuid"] for g in fleet["gpus"] if g["idle_all_along"]}
    assert along >= {g["uuid"] for g in local["gpus"] if g["idle_all_along"]}
    assert fleet["advice"]["gpus"] == 2 - len(along)
    code, out, err = _job(["no-such-job", "--config", config, *flags], capsys)
    assert code == 1
    (line,) = err.splitlines()
    assert line.startswith("gpuwatch: no job no-such-job in the last 30 days at http://")


def test_the_monthly_report_groups_the_jobs_by_account_and_user(
    finished: Finished, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    rows = job_rows(finished.history, finished.job)
    day = datetime.fromtimestamp(rows[0]["hour_start"], UTC).strftime("%Y-%m-%d")
    period = ["--from", day, "--to", day, "--config", str(finished.config)]
    assert main(["report", *period, "--format", "json"]) == 0
    report = json.loads(capsys.readouterr().out)
    by_hand = {
        "name": "astro",
        "jobs": 1,
        "gpu_hours": pytest.approx(sum(r["held_seconds"] for r in rows) / 3600, rel=1e-12),
        "cost_usd": pytest.approx(sum(r["cost_usd"] for r in rows), rel=1e-12),
        "idle_cost_usd": pytest.approx(sum(r["idle_cost_usd"] for r in rows), rel=1e-12),
        "held_cost_usd": pytest.approx(sum(r["held_cost_usd"] for r in rows), rel=1e-12),
        "share_ratio": pytest.approx(
            sum(r["cost_usd"] for r in rows) / report["total_cost_usd"], rel=1e-9
        ),
        "reclaimed_usd": 0.0,  # the local history knows it: no job was cancelled
    }
    # the only job on the quiet cluster: one account, one user
    (account,) = report["slurm_accounts"]
    assert account == by_hand
    (user,) = report["slurm_users"]
    assert user == {**by_hand, "name": "root"}
    # held $: what the job was charged while it ran nothing on a GPU: at least all of the
    # GPU it never ran on
    assert 0 < account["held_cost_usd"] <= account["cost_usd"]
    out = tmp_path / "reports"
    assert main(["report", *period, "--format", "md", "--out", str(out)]) == 0
    capsys.readouterr()
    (markdown,) = out.glob("*.md")
    text = markdown.read_text()
    assert "## Slurm accounts" in text
    assert "## Slurm users" in text
    assert "| astro |" in text


def test_the_agents_account_and_user_counters_are_the_historys_sums(finished: Finished) -> None:
    """The agent's per-account and per-user counters charge the same ticks as the
    history's rows: once a scrape no longer shows the job (the fixture waits for it), the
    last value of each counter is the rows' sum (cost, idle and held $), the job being the
    only one on the cluster; ticks before squeue named the job waited and went to its
    account and user too (tests/slurm/test_unnamed_jobs.py), so there is no "" series."""
    rows = job_rows(finished.history, finished.job)
    want = {role: sum(float(r[f"{role}cost_usd"]) for r in rows) for role in ("", "idle_", "held_")}
    assert 0 < want["held_"] < want[""], "one GPU busy, one held all along"
    for kind, name in (("account", "astro"), ("user", "root")):
        for role, total in want.items():
            metric = f"gpuwatch_slurm_{kind}_{role}cost_usd_total"
            last = {
                r["metric"].get(kind, ""): float(r["value"][1])  # "" is no label
                for r in _promql(finished.prometheus, f"max_over_time({metric}[1h])")
            }
            assert last == {name: pytest.approx(total, rel=1e-9)}, metric


def test_the_monthly_report_from_prometheus_has_the_held_cost(
    finished: Finished, capsys: pytest.CaptureFixture[str]
) -> None:
    """The fleet report's account and user lines read the held counter, not n/a: its
    growth from its first sample to its last, as `increase()` counts a new series, so at
    most the history's held $ (docs/slurm.md: less what the series held at its first
    scrape, and less what was charged to "" before squeue named the job)."""
    rows = job_rows(finished.history, finished.job)
    day = datetime.fromtimestamp(rows[0]["hour_start"], UTC).strftime("%Y-%m-%d")
    flags = ["--prometheus", finished.prometheus, "--prometheus-scrape-interval", "1"]
    period = ["--from", day, "--to", day, "--config", str(finished.config)]
    assert main(["report", *period, *flags, "--format", "json"]) == 0
    report = json.loads(capsys.readouterr().out)
    held = sum(float(r["held_cost_usd"]) for r in rows)
    for lines, kind, name in (
        (report["slurm_accounts"], "account", "astro"),
        (report["slurm_users"], "user", "root"),
    ):
        (line,) = lines
        assert line["name"] == name
        counter = f'gpuwatch_slurm_{kind}_held_cost_usd_total{{{kind}="{name}"}}'
        growth = f"max_over_time({counter}[1h]) - min_over_time({counter}[1h])"
        (grown,) = _promql(finished.prometheus, growth)
        assert line["held_cost_usd"] == pytest.approx(float(grown["value"][1]), rel=1e-9)
        assert line["held_cost_usd"] <= held * (1 + 1e-9)
        assert line["held_cost_usd"] < line["cost_usd"]
