"""`gpuwatch plan` on the demo run (tests/report_agreement/conftest.py): two simulated
days with history, attribution and the vLLM server, read from the host's history and
from the Prometheus that stored the same scrapes.

What the demo's four H100s did (src/gpuwatch/simulate/scenarios/demo.toml): GPU 0 trains
(team-a/llama3-sft-0), GPU 1 is allocated to team-b/batch-eval-7f9c and idle, GPU 2 is
held by team-a/notebook-alice (30 GiB, no work), GPU 3 serves Llama-3.1-8B from vLLM
(time-sliced with a canary pod) with no [[workloads]] declaration: its need is measured
from the server's KV-cache use. The plan must release GPU 1, reclaim GPU 2 naming its
pod, keep the trainer, and move the vLLM unit to a cheaper part, every dollar re-derived
here from the catalog's prices.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import sys
from pathlib import Path

import pytest
import yaml

from gpuwatch.alerts import AlertsConfig, SlackConfig
from gpuwatch.cli import _parser, main
from gpuwatch.cli.plan import run_plan
from gpuwatch.config import AgentConfig, Config
from gpuwatch.core.install import installed_from
from gpuwatch.core.units import HOURS_PER_MONTH
from gpuwatch.history.store import HISTORY_FILE
from gpuwatch.plan.apply.files import apply_files
from gpuwatch.plan.make import make_plan
from gpuwatch.plan.model import PlanOptions
from gpuwatch.plan.render import PlanReport
from gpuwatch.promapi.client import PrometheusOptions
from gpuwatch.sizing import build_gpu_catalog
from gpuwatch.tokens.config import TokenSourceConfig
from tests.alerts.conftest import SECRET_TOKEN, FakeSlack
from tests.plan.apply_validate import validate_device_plugin, validate_mig_parted
from tests.report_agreement.conftest import DAYS, Run

pytest.importorskip("highspy", reason="the plan extra (highspy) is in the test extra")

H100 = "H100-SXM-80GB"


@pytest.fixture(scope="module")
def plans(demo_run: Run) -> tuple[PlanReport, PlanReport]:
    end = demo_run.period.end_epoch
    options = PlanOptions(headroom_ratio=demo_run.config.analysis.headroom_ratio)
    here = make_plan(demo_run.config, options, days=DAYS, end_epoch=end)
    fleet = make_plan(
        demo_run.config,
        options,
        days=DAYS,
        end_epoch=end,
        prometheus=PrometheusOptions(demo_run.prometheus_url),
    )
    return here, fleet


def _by_label(report: PlanReport) -> dict[str, str]:
    return {" + ".join(m.names): m.kind for m in report.moves}


def test_the_demo_plan_reclaims_keeps_and_moves(plans: tuple[PlanReport, PlanReport]) -> None:
    here, _ = plans
    kinds = _by_label(here)
    assert kinds["team-b/batch-eval-7f9c"] == "release"
    assert kinds["team-a/notebook-alice"] == "reclaim"
    assert kinds["team-a/llama3-sft-0"] == "keep"
    vllm = next(m for m in here.moves if "team-b/vllm-llama-8b-0" in m.names[0])
    assert vllm.kind in ("move", "mig", "share")
    held = next(m for m in here.moves if m.kind == "reclaim")
    assert held.pods == ("team-a/notebook-alice",)
    assert "held 30 GiB" in held.action
    unit = next(n for n in here.needs if "team-b/vllm-llama-8b-0" in n.pods)
    assert unit.memory_basis == "measured"  # no declaration: the server's KV-cache use
    assert unit.activity in {"busy", "underutilized"}


def test_the_demo_vllm_server_gets_a_memory_fraction(demo_run: Run) -> None:
    """With a [[token_sources]] entry saying GPU 3 runs vLLM (as the demo's simulated
    server does), the local plan knows the unit's server and writes the
    --gpu-memory-utilization that holds its need with headroom on its planned device; the
    Prometheus plan (the fleet, not this host) does not guess."""
    vllm = TokenSourceConfig(name="vllm", url="http://127.0.0.1:9/metrics", gpus=[3])
    config = demo_run.config.model_copy(update={"token_sources": [vllm]})
    options = PlanOptions(headroom_ratio=config.analysis.headroom_ratio)
    end = demo_run.period.end_epoch
    here = make_plan(config, options, days=DAYS, end_epoch=end)
    fleet = make_plan(
        config,
        options,
        days=DAYS,
        end_epoch=end,
        prometheus=PrometheusOptions(demo_run.prometheus_url),
    )
    unit = next(n for n in here.needs if "team-b/vllm-llama-8b-0" in n.pods)
    assert unit.server == "vllm"
    assert all(n.server is None for n in fleet.needs)
    docs = {k: yaml.safe_load(v) for k, v in apply_files(here, build_gpu_catalog()).items()}
    (work,) = [w for w in docs["workloads.yaml"]["workloads"] if w["workload"] == unit.label]
    ratio = work["vllm_args"]["--gpu-memory-utilization"]
    (gpu,) = [g for g in docs["evidence.yaml"]["moves"] if g["units"][0]["workload"] == unit.label]
    device = gpu["if_peak_20_percent_higher"]["device_memory_bytes"]
    assert unit.memory_bytes is not None
    assert ratio * device >= unit.memory_bytes * (1 + here.options.headroom_ratio)
    assert ratio <= 1


def test_the_dollars_re_derive_from_the_catalog(plans: tuple[PlanReport, PlanReport]) -> None:
    """Today: 4 H100s at the demo's price; the plan: the trainer's H100 plus the vLLM
    unit's new part at its catalog rent; the bound equals the plan (proved optimal)."""
    here, _ = plans
    catalog = build_gpu_catalog()
    h100 = catalog.get(H100).rent_usd_per_hour
    assert here.plan.current_usd_per_hour == pytest.approx(4 * h100)
    placed = {p.gpu_id for p in here.plan.placements}
    assert H100 in placed
    vllm_part = next(p for p in here.plan.placements if p.gpu_id != H100 or p.mode != "whole")
    expected = h100 + (vllm_part.usd_per_hour if vllm_part.gpu_id != H100 else 0.0)
    assert vllm_part.usd_per_hour == catalog.get(vllm_part.gpu_id).rent_usd_per_hour
    assert here.plan.usd_per_hour == pytest.approx(expected)
    assert here.plan.lower_bound_usd_per_hour == pytest.approx(here.plan.usd_per_hour)
    assert here.plan.gap_ratio == pytest.approx(0.0, abs=1e-6)
    for move in here.moves:
        if move.kind in ("release", "reclaim"):
            assert move.savings_usd_per_month == pytest.approx(h100 * HOURS_PER_MONTH)


def test_local_and_prometheus_give_the_same_plan(plans: tuple[PlanReport, PlanReport]) -> None:
    here, fleet = plans
    assert [(m.kind, m.names, m.action) for m in here.moves] == [
        (m.kind, m.names, m.action) for m in fleet.moves
    ]
    assert here.plan.usd_per_hour == pytest.approx(fleet.plan.usd_per_hour)
    assert here.plan.current_usd_per_hour == pytest.approx(fleet.plan.current_usd_per_hour)
    mine = {n.key: n for n in here.needs}
    for theirs in fleet.needs:
        need = mine[theirs.key]
        assert need.memory_basis == theirs.memory_basis
        # one bad sample cannot move either need (docs/plan.md), but the history keeps
        # each hour's peak and Prometheus only the agent's 24-hour maximum, read at points
        # a lookback apart: two robust statistics of the same samples (0.007 % apart here)
        assert need.memory_bytes == pytest.approx(theirs.memory_bytes, rel=1e-3)
        assert need.pods == theirs.pods
        assert need.activity == theirs.activity
        # kernel-busy time (what time-slicing adds up): the history's hourly means of
        # NVML utilization and Prometheus' of gpuwatch_gpu_utilization_ratio, both read
        assert need.kernel_busy_ratio is not None
        assert theirs.kernel_busy_ratio is not None
        assert need.kernel_busy_ratio == pytest.approx(theirs.kernel_busy_ratio, abs=0.02)


def test_the_cli_writes_every_format(demo_run: Run, tmp_path: Path) -> None:
    config = tmp_path / "gpuwatch.toml"
    config.write_text(
        f'[agent]\nhostname = "test-host"\nstate_dir = "{demo_run.config.agent.state_dir}"\n',
        encoding="utf-8",
    )
    until = "2026-01-03T00:00"
    out = tmp_path / "plan"
    code = main(["plan", "--config", str(config), "--days", str(DAYS), "--until", until,
                 "--out", str(out), "--format", "text,md,html,json"])  # fmt: skip
    assert code == 0
    document = json.loads((out / "gpuwatch-plan.json").read_text(encoding="utf-8"))
    assert document["savings_usd_per_month"] == pytest.approx(
        (document["current_usd_per_hour"] - document["plan_usd_per_hour"]) * HOURS_PER_MONTH
    )
    assert {m["kind"] for m in document["moves"]} >= {"release", "reclaim", "keep"}
    text = (out / "gpuwatch-plan.txt").read_text(encoding="utf-8")
    assert "team-a/notebook-alice: held 30 GiB" in text
    assert "team-a/notebook-alice" in (out / "gpuwatch-plan.md").read_text(encoding="utf-8")
    assert "<code>team-a/notebook-alice</code>" in (out / "gpuwatch-plan.html").read_text(
        encoding="utf-8"
    )
    apply = {
        p.name: yaml.safe_load(p.read_text(encoding="ascii")) for p in (out / "apply").iterdir()
    }
    assert validate_mig_parted(apply["mig-configs.yaml"]) == []
    for config in apply["device-plugin-configs.yaml"]["data"].values():
        assert validate_device_plugin(yaml.safe_load(config)) == []
    work = {w["workload"]: w for w in apply["workloads.yaml"]["workloads"]}
    assert work["team-a/llama3-sft-0"]["change"] == "keep"
    assert work["team-b/batch-eval-7f9c"]["change"] == "release"
    assert work["team-a/notebook-alice"]["change"] == "release"
    vllm = next(w for label, w in work.items() if "team-b/vllm-llama-8b-0" in label)
    assert vllm["change"] == "move"
    assert "vllm_args" not in vllm  # this config has no [[token_sources]]
    assert apply["nodes.yaml"]["remove"] == []  # the trainer stays on test-host's H100s
    steps = apply["migration.yaml"]["steps"]
    assert steps[0]["action"] == "add-node"


def test_the_report_has_the_same_plan(
    demo_run: Run, plans: tuple[PlanReport, PlanReport], tmp_path: Path
) -> None:
    """`gpuwatch report` over the same two days shows "What the fleet should be" from
    the same code: the same dollars and moves as `gpuwatch plan`, in every format."""
    here, _ = plans
    config = tmp_path / "gpuwatch.toml"
    config.write_text(
        f'[agent]\nhostname = "test-host"\nstate_dir = "{demo_run.config.agent.state_dir}"\n',
        encoding="utf-8",
    )
    out = tmp_path / "report"
    code = main(["report", "--config", str(config), "--from", "2026-01-01", "--to",
                 "2026-01-02", "--format", "html,md,json", "--out", str(out)])  # fmt: skip
    assert code == 0
    stem = out / "gpuwatch-report-2026-01-01_2026-01-02"
    document = json.loads(stem.with_suffix(".json").read_text(encoding="utf-8"))
    plan = document["fleet_plan"]
    assert plan["plan_usd_per_hour"] == pytest.approx(here.plan.usd_per_hour)
    assert [m["action"] for m in plan["moves"]] == [m.action for m in here.moves]
    for suffix in (".html", ".md"):
        assert "What the fleet should be" in stem.with_suffix(suffix).read_text(encoding="utf-8")


def test_without_the_solver_the_plan_says_how_to_get_it(
    demo_run: Run,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The agent's image has no highspy (the `plan` extra): `gpuwatch plan` exits 1 with
    one line naming the extra, and the report keeps every other section with a note."""
    monkeypatch.setitem(sys.modules, "highspy", None)  # import highspy raises ImportError
    config = tmp_path / "gpuwatch.toml"
    config.write_text(
        f'[agent]\nhostname = "test-host"\nstate_dir = "{demo_run.config.agent.state_dir}"\n',
        encoding="utf-8",
    )
    capsys.readouterr()
    code = main(["plan", "--config", str(config), "--days", "2", "--until", "2026-01-03"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 1
    assert len(err) == 1
    assert f"-m pip install '{installed_from()}[plan]'" in err[0]
    code = main(["report", "--config", str(config), "--from", "2026-01-01", "--to",
                 "2026-01-02", "--format", "json"])  # fmt: skip
    document = json.loads(capsys.readouterr().out)
    assert code == 0
    assert document["fleet_plan"] is None
    assert any(f"'{installed_from()}[plan]'" in note for note in document["notes"])
    assert document["total_cost_usd"] > 0


def test_the_plan_summary_reaches_slack(
    demo_run: Run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`gpuwatch plan --slack` posts the summary to the loopback Slack of the alert tests:
    the headline and the moves, pod names as inline code, no webhook secret in a line."""
    for name in list(os.environ):
        if name.lower() in ("http_proxy", "https_proxy", "all_proxy"):
            monkeypatch.delenv(name)
    state = tmp_path / "state"
    state.mkdir()
    shutil.copy(demo_run.config.agent.state_dir / HISTORY_FILE, state / HISTORY_FILE)
    fast = SlackConfig(timeout_seconds=1.0, max_retries=1, retry_backoff_seconds=0.01)
    config = Config(agent=AgentConfig(state_dir=state), alerts=AlertsConfig(slack=fast))
    args = _parser().parse_args(["plan", "--days", str(DAYS), "--until", "2026-01-03", "--slack"])
    slack = FakeSlack()
    err = io.StringIO()
    try:
        code = run_plan(
            args,
            config,
            stdout=io.StringIO(),
            stderr=err,
            environ={"GPUWATCH_SLACK_WEBHOOK_URL": slack.url},
        )
        (post,) = slack.delivered()
    finally:
        slack.close()
    assert code == 0, err.getvalue()
    text = post.body["blocks"][0]["text"]["text"]
    assert text.startswith("*What the fleet should be:*")
    assert "`team-a/notebook-alice`: held 30 GiB" in text
    assert "$13,063.57" in text  # the A100 PCIe 40GB marketplace price is no longer chosen
    assert SECRET_TOKEN not in err.getvalue()
