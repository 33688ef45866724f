"""Recommendations a team can act on: candidates by class, allow-list or cloud listing,
and the rule that chose them, through `gpuwatch status` as a user runs it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from gpuwatch.alerts.messages import build_alert_message
from gpuwatch.alerts.policy import decide
from gpuwatch.cli import main
from gpuwatch.core.clock import ManualClock
from gpuwatch.core.verdict import Recommendation, recommendation_rule_phrase
from gpuwatch.report.build import build_report
from gpuwatch.report.slack import build_summary_message
from gpuwatch.sizing import build_gpu_catalog
from gpuwatch.sizing.candidates import CandidateRules, RentedGpus
from tests.alerts import conftest as alert_fixtures
from tests.history.demo import HistoryRun
from tests.report.data import sample_data

CATALOG = build_gpu_catalog()


def gpuwatch(*args: str) -> subprocess.CompletedProcess[str]:
    """`python -m gpuwatch ARGS` on an 80-column terminal."""
    return subprocess.run(
        [sys.executable, "-m", "gpuwatch", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, "COLUMNS": "80", "LINES": "50"},
    )


def legacy_status(*extra: str) -> list[dict[str, Any]]:
    """The GPUs of `gpuwatch status --simulate legacy --at 2000 --json`."""
    result = gpuwatch("status", "--simulate", "legacy", "--at", "2000", "--json", *extra)
    assert result.returncode == 0, result.stderr
    gpus: list[dict[str, Any]] = json.loads(result.stdout)["gpus"]
    return gpus


def recommendations(gpus: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Catalog id of the current GPU + index -> its recommendation, where it has one."""
    found = {}
    for gpu in gpus:
        verdict = gpu.get("verdict") or {}
        if verdict.get("recommendation"):
            found[f"{verdict['catalog_gpu_id']}#{gpu['index']}"] = verdict["recommendation"]
    return found


def test_legacy_v100s_and_t4s_are_not_sent_to_geforce_cards() -> None:
    recs = recommendations(legacy_status())
    v100s = [key for key in recs if key.startswith("V100")]
    assert len(v100s) == 2, f"both V100s are overprovisioned: {recs}"
    for key, rec in recs.items():
        if key.startswith(("V100", "T4")):
            assert CATALOG.get(rec["gpu_id"]).tier == "datacenter", (key, rec)
            assert rec["rule"] == "same_class:datacenter", (key, rec)
    assert recs["V100-SXM2-16GB#0"]["gpu_id"] == "L40-48GB"  # 14 GiB at ~675 GB/s


def test_the_status_table_says_which_rule_chose() -> None:
    result = gpuwatch("status", "--simulate", "legacy", "--at", "2000")
    assert result.returncode == 0, result.stderr
    text = " ".join(result.stdout.split())  # the note wraps at 80 columns
    assert (
        "GPU 0: overprovisioned (need from the memory it was seen using); L40-48GB would do" in text
    )
    assert "candidates: same class (data-centre)" in text
    assert "RTX" not in text


def test_the_allow_list_chooses(tmp_path: Path) -> None:
    config = tmp_path / "gpuwatch.toml"
    config.write_text('[analysis]\ncandidate_gpus = ["L4-24GB", "a10g-24gb"]\n')
    recs = recommendations(legacy_status("--config", str(config)))
    assert recs, "the allow-list still leaves a cheaper GPU for the idle-ish V100"
    for rec in recs.values():
        assert rec["gpu_id"] in {"L4-24GB", "A10G-24GB"}
        assert rec["rule"] == "allow_list"
    table = gpuwatch("status", "--simulate", "legacy", "--at", "2000", "--config", str(config))
    assert "candidates: allow-list" in " ".join(table.stdout.split())


def test_an_allow_list_may_name_gpus_of_the_config(tmp_path: Path) -> None:
    config = tmp_path / "gpuwatch.toml"
    config.write_text(
        '[analysis]\ncandidate_gpus = ["L4-24GB", "Cheap-16GB"]\n'
        '[[sizing.gpus]]\nid = "Cheap-16GB"\ntier = "datacenter"\nmemory_gb = 16\n'
        "memory_bandwidth_gb_per_second = 900\nbf16_tflops = 100\ntdp_watts = 250\n"
        "purchase_usd = 3000\nrent_usd_per_hour = 0.5\n"
    )
    recs = recommendations(legacy_status("--config", str(config)))
    assert recs["V100-SXM2-16GB#1"]["gpu_id"] == "Cheap-16GB"


@pytest.mark.parametrize(
    ("value", "field"),
    [('["L4-24GB", "RTX-9090"]', "analysis.candidate_gpus.1"), ("[]", "analysis.candidate_gpus")],
)
def test_a_bad_allow_list_names_the_field_and_exits_2(
    tmp_path: Path, value: str, field: str
) -> None:
    config = tmp_path / "gpuwatch.toml"
    config.write_text(f"[analysis]\ncandidate_gpus = {value}\n")
    result = gpuwatch("status", "--simulate", "legacy", "--config", str(config))
    assert result.returncode == 2
    assert f"{field}:" in result.stderr
    assert "Traceback" not in result.stderr


def test_same_class_for_each_tier() -> None:
    rules = CandidateRules(CATALOG)
    for current in ("RTX-3090-24GB", "RTX-A6000-48GB", "T4-16GB"):
        spec = CATALOG.get(current)
        chosen, rule = rules.candidates(spec)
        assert rule == f"same_class:{spec.tier}"
        assert chosen.ids
        assert {gpu.tier for gpu in chosen} == {spec.tier}
    assert "RTX-4090-24GB" in rules.candidates(CATALOG.get("RTX-3090-24GB"))[0]


def test_allow_list_wins_over_a_cloud_listing_and_a_listing_over_the_class() -> None:
    rented = RentedGpus("eu-west-1", frozenset({"l4-24gb", "t4-16gb"}))
    listed = CandidateRules(CATALOG)
    listed.set_rented(rented)
    chosen, rule = listed.candidates(CATALOG.get("V100-SXM2-16GB"))
    assert (set(chosen.ids), rule) == ({"L4-24GB", "T4-16GB"}, "aws:eu-west-1")
    listed.set_rented(None)
    assert listed.candidates(CATALOG.get("V100-SXM2-16GB"))[1] == "same_class:datacenter"

    allowed = CandidateRules(CATALOG, ["A10G-24GB"])
    allowed.set_rented(rented)
    chosen, rule = allowed.candidates(CATALOG.get("V100-SXM2-16GB"))
    assert (chosen.ids, rule) == (("A10G-24GB",), "allow_list")


@pytest.mark.parametrize(
    ("rule", "phrase"),
    [
        ("same_class:datacenter", "same class (data-centre)"),
        ("same_class:workstation", "same class (workstation)"),
        ("same_class:consumer", "same class (consumer)"),
        ("allow_list", "allow-list"),
        ("aws:us-east-1", "rented by AWS in us-east-1"),
        ("", ""),
    ],
)
def test_rule_phrases(rule: str, phrase: str) -> None:
    assert recommendation_rule_phrase(rule) == phrase


def test_the_report_says_which_rule_chose(tmp_path: Path) -> None:
    """Through the history and `gpuwatch report`: the demo H100's recommendation keeps
    its rule in the stored hours, and every format says it."""
    state = tmp_path / "state"
    run = HistoryRun(state, ManualClock())
    last = run.run(2 * 3600.0)
    run.close()
    rec = next(v for v in last.verdicts if v.gpu_index == 3).recommendation
    assert rec is not None
    assert rec.rule == "same_class:datacenter"
    config = tmp_path / "gpuwatch.toml"
    config.write_text(f'[agent]\nstate_dir = "{state}"\n\n[history]\nenabled = true\n')
    out = tmp_path / "out"
    period = ["--from", "2026-01-01", "--to", "2026-01-01"]
    code = main(
        ["report", "--config", str(config), *period, "--format", "md,json,html", "--out", str(out)]
    )
    assert code == 0
    document = json.loads(next(out.glob("*.json")).read_text())
    (gpu,) = [g for g in document["gpus"] if g["gpu_index"] == 3]
    assert (gpu["recommended_gpu"], gpu["recommended_rule"]) == (rec.gpu_id, rec.rule)
    assert gpu["need_basis"] == "measured"
    markdown = " ".join(next(out.glob("*.md")).read_text().split())
    why = "need measured from the server's KV cache use"
    # the action, then the GPU table's recommendation cell
    assert f"{rec.gpu_id} ({why}; candidates: same class (data-centre))" in markdown
    assert f"{rec.gpu_id}: $" in markdown
    assert f"/month; {why}; candidates: same class (data-centre)" in markdown
    assert "candidates: same class (data-centre)" in next(out.glob("*.html")).read_text()


def test_the_slack_alert_says_which_rule_chose() -> None:
    start = alert_fixtures.START
    rec = Recommendation("L40S-48GB", 1.861, 1.2, rule="aws:us-east-1")
    snap = alert_fixtures.snapshot(
        ManualClock(start + 2 * 3600),
        [alert_fixtures.verdict(2, "busy", start, overprovisioned=True, recommendation=rec)],
        [alert_fixtures.gpu(2, ())],
    )
    decision = decide(snap, {}, states=("overprovisioned",), cooldown_seconds=3600.0)
    message = build_alert_message(
        hostname=alert_fixtures.HOSTNAME,
        events=list(decision.events),
        message_id=1,
        now_seconds=snap.timestamp_seconds,
        costs={},
    )
    texts = [b["text"]["text"] for b in message["blocks"] if b["type"] == "section"]
    assert any(
        "`L40S-48GB` would do, saving $1.20/h (rents at $1.86/h); "
        "candidates: rented by AWS in us-east-1" in text
        for text in texts
    ), texts


def test_the_slack_report_says_which_rule_chose() -> None:
    data = sample_data()
    data = replace(
        data, gpu_days=tuple(replace(d, recommended_rule="allow_list") for d in data.gpu_days)
    )
    message = json.dumps(build_summary_message(build_report(data), ()))
    assert "move the workload to an `l4` (candidates: allow-list) (saves" in message
