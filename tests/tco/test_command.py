"""`gpuwatch tco` through an argparse parser built here with `add_tco_parser`."""

from __future__ import annotations

import argparse
import json
from typing import Any

import pytest

from gpuwatch.cli.tco import add_tco_parser, parse_utilization, run_tco
from gpuwatch.sizing import GpuCatalogEntry, build_gpu_catalog
from gpuwatch.tco import RentVsBuyConfig

A100_SEED = (
    "--purchase-usd",
    "12000",
    "--rent-usd-per-hour",
    "5.12",
    "--utilization",
    "70%",
    "--years",
    "3",
    "--power-watts",
    "0",
    "--cost-of-capital",
    "0",
    "--ops-usd-per-year",
    "0",
)
"""Seed 001's break-even example: the purchase alone, no power, interest or operations."""
JSON_KEYS = {
    "gpu",
    "inputs",
    "rent_total_usd",
    "own_total_usd",
    "owned_usd_per_gpu_year",
    "breakeven_utilization",
    "months_to_break_even",
    "verdict",
    "own_usd_per_million_tokens",
    "rent_usd_per_million_tokens",
    "gpu_hours_used",
    "monthly_delta_usd",
    "capital_usd_per_year",
    "energy_usd_per_year",
    "hosting_usd_per_year",
    "ops_usd_per_year",
    "pue_applied",
}
INPUT_KEYS = {
    "purchase_usd",
    "rent_usd_per_hour",
    "utilization",
    "years",
    "power_watts",
    "usd_per_kwh",
    "pue",
    "hosting_usd_per_kw_month",
    "ops_usd_per_year",
    "tokens_per_second",
    "cost_of_capital",
    "facility",
    "host_capex_usd",
    "host_power_watts",
}


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="gpuwatch")
    add_tco_parser(parser.add_subparsers(dest="command", required=True))
    return parser.parse_args(["tco", *argv])


def tco(capsys: pytest.CaptureFixture[str], *argv: str, **kwargs: Any) -> tuple[int, str, str]:
    code = run_tco(parse(*argv), **kwargs)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def tco_json(capsys: pytest.CaptureFixture[str], *argv: str, **kwargs: Any) -> dict[str, Any]:
    code, out, err = tco(capsys, *argv, "--json", **kwargs)
    assert code == 0, err
    assert err == ""
    report: dict[str, Any] = json.loads(out)
    return report


def test_json_keys_and_seed_001_break_even(capsys: pytest.CaptureFixture[str]) -> None:
    report = tco_json(capsys, *A100_SEED)
    assert set(report) == JSON_KEYS
    assert report["gpu_hours_used"] == pytest.approx(18_396)
    assert report["rent_total_usd"] == pytest.approx(94_187.52)
    assert report["own_total_usd"] == pytest.approx(12_000)
    assert report["verdict"] == "buy"
    assert report["breakeven_utilization"] == pytest.approx(4000 / (5.12 * 8760))
    assert report["months_to_break_even"] == pytest.approx(12_000 / (5.12 * 730 * 0.7))
    assert report["own_usd_per_million_tokens"] is None
    assert report["rent_usd_per_million_tokens"] is None
    assert report["gpu"] is None
    assert report["inputs"]["utilization"] == 0.7
    assert report["inputs"]["pue"] == 1.58  # the default; irrelevant at 0 W
    assert set(report["inputs"]) == INPUT_KEYS
    assert (report["inputs"]["facility"], report["pue_applied"]) == ("owned", 1.58)


def test_defaults_are_3_years_8_percent_and_ops(capsys: pytest.CaptureFixture[str]) -> None:
    """Without --years, --cost-of-capital, --ops-usd-per-year: 3 years (seed 001), 8 %
    and $462.50 a GPU-year (estimates, docs/tco.md), all printed in the inputs."""
    report = tco_json(
        capsys,
        "--purchase-usd=12000",
        "--rent-usd-per-hour=5.12",
        "--utilization=70%",
        "--power-watts=0",
    )
    inputs = report["inputs"]
    assert (inputs["years"], inputs["cost_of_capital"], inputs["ops_usd_per_year"]) == (
        3.0,
        0.08,
        462.5,
    )
    i = 0.08 / 12
    capital = 12 * 12_000 * i / (1 - (1 + i) ** -36)
    assert report["capital_usd_per_year"] == pytest.approx(capital)
    assert report["owned_usd_per_gpu_year"] == pytest.approx(capital + 462.5)
    code, out, _ = tco(
        capsys,
        "--purchase-usd=12000",
        "--rent-usd-per-hour=5.12",
        "--utilization=70%",
        "--power-watts=0",
    )
    assert code == 0
    assert "capital: $12,000.00, 3 years at 8%/year, paid monthly" in out
    assert "ops: $462.50/GPU-year" in out


def test_bare_card_leaves_the_host_out(capsys: pytest.CaptureFixture[str]) -> None:
    hosted = tco_json(capsys, "--gpu", "H100-SXM-80GB", "--utilization", "40%")
    bare = tco_json(capsys, "--gpu", "H100-SXM-80GB", "--utilization", "40%", "--bare-card")
    assert (hosted["inputs"]["host_capex_usd"], hosted["inputs"]["host_power_watts"]) == (
        pytest.approx(12_600),
        pytest.approx(574),
    )
    assert (bare["inputs"]["host_capex_usd"], bare["inputs"]["host_power_watts"]) == (0, 0)
    assert round(hosted["breakeven_utilization"], 3) == 0.334
    assert round(bare["breakeven_utilization"], 3) == 0.228
    assert hosted["inputs"]["facility"] == bare["inputs"]["facility"] == "colocation"
    assert hosted["pue_applied"] == 1.0


def test_facility_owned_applies_the_pue(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ("--gpu", "H100-SXM-80GB", "--utilization", "40%", "--bare-card")
    owned = tco_json(capsys, *argv, "--facility", "owned")
    assert (owned["pue_applied"], owned["inputs"]["hosting_usd_per_kw_month"]) == (1.58, 0)
    assert owned["energy_usd_per_year"] == pytest.approx(0.7 * 1.58 * 8760 * 0.12)
    assert owned["hosting_usd_per_year"] == 0
    colo_fee = tco_json(capsys, *argv, "--facility", "owned", "--hosting-usd-per-kw-month", "80")
    assert colo_fee["hosting_usd_per_year"] == pytest.approx(80 * 0.7 * 12)
    assert colo_fee["pue_applied"] == 1.58, "an owned facility's fee does not replace its PUE"


def test_config_section_is_the_base_and_flags_win(capsys: pytest.CaptureFixture[str]) -> None:
    section = RentVsBuyConfig(life_years=5, cost_of_capital=0.0, ops_usd_per_year_per_gpu=1000)
    argv = ("--gpu", "H100-SXM-80GB", "--utilization", "50%")
    report = tco_json(capsys, *argv, rent_vs_buy=section)
    inputs = report["inputs"]
    assert (inputs["years"], inputs["cost_of_capital"], inputs["ops_usd_per_year"]) == (5, 0, 1000)
    assert report["owned_usd_per_gpu_year"] == pytest.approx(
        section.owned_usd_per_gpu_year(build_gpu_catalog().get("H100-SXM-80GB"))
    )
    flagged = tco_json(
        capsys, *argv, "--years", "4", "--cost-of-capital", "6%", rent_vs_buy=section
    )
    assert (flagged["inputs"]["years"], flagged["inputs"]["cost_of_capital"]) == (4, 0.06)
    assert flagged["inputs"]["ops_usd_per_year"] == 1000


def test_json_seed_001_rtx_4090_row(capsys: pytest.CaptureFixture[str]) -> None:
    report = tco_json(
        capsys,
        "--purchase-usd=1600",
        "--rent-usd-per-hour=0.69",
        "--utilization=0.7",
        "--years=3",
        "--power-watts=450",
        "--usd-per-kwh=0.12",
        "--pue=1",
        "--tokens-per-second=70",
        "--cost-of-capital=0",
        "--ops-usd-per-year=0",
    )
    assert round(report["own_usd_per_million_tokens"], 4) == 0.6513
    assert report["rent_usd_per_million_tokens"] == pytest.approx(0.69 / (70 * 3600) * 1e6)


@pytest.mark.parametrize("text", ["0.7", "70%", "70 %", " 0.70 ", "7e-1"])
def test_utilization_as_fraction_or_percentage(text: str) -> None:
    assert parse_utilization(text) == pytest.approx(0.7)


def test_percent_and_fraction_give_the_same_report(capsys: pytest.CaptureFixture[str]) -> None:
    fraction = tco_json(capsys, *A100_SEED[:5], "0.7", *A100_SEED[6:])
    assert fraction == tco_json(capsys, *A100_SEED)


def test_verdict_flips_at_break_even(capsys: pytest.CaptureFixture[str]) -> None:
    base = ["--purchase-usd", "12000", "--rent-usd-per-hour", "5.12", "--years", "3"]
    base += ["--power-watts", "400", "--pue", "1"]
    u_star = tco_json(capsys, *base, "--utilization", "0.5")["breakeven_utilization"]
    below = tco_json(capsys, *base, "--utilization", str(u_star * 0.99))
    above = tco_json(capsys, *base, "--utilization", str(u_star * 1.01))
    assert (below["verdict"], above["verdict"]) == ("rent", "buy")
    assert below["months_to_break_even"] is None
    assert above["months_to_break_even"] == pytest.approx(36, rel=0.02)


def test_table(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = tco(capsys, *A100_SEED, "--tokens-per-second", "143")
    assert code == 0, err
    assert err == ""
    for text in (
        "Rent vs buy, one GPU: 3 years at 70% utilization",
        "18,396 (used)",
        "26,280 (all)",
        "$94,187.52",
        "$12,000.00",
        "per 1M tokens (143 tokens/s)",
        "break-even utilization: 8.9%",
        "months to break even: 4.6 months",
        "verdict: buy (owning saves $82,187.52 over 3 years)",
    ):
        assert text in out


def test_table_when_renting_wins(capsys: pytest.CaptureFixture[str]) -> None:
    argv = list(A100_SEED)
    argv[argv.index("70%")] = "5%"
    code, out, _ = tco(capsys, *argv)
    assert code == 0
    assert "months to break even: not within 3 years" in out
    assert "verdict: rent (renting saves $5,272.32 over 3 years)" in out


def test_gpu_from_the_catalog(capsys: pytest.CaptureFixture[str]) -> None:
    report = tco_json(capsys, "--gpu", "a100-sxm-80gb", "--utilization", "70%", "--years", "3")
    assert report["gpu"] == "A100-SXM-80GB"
    inputs = report["inputs"]
    assert (inputs["purchase_usd"], inputs["power_watts"]) == (12_000, 400)
    assert inputs["rent_usd_per_hour"] == pytest.approx(3.4309)
    given = tco_json(capsys, "--gpu", "A100-SXM-80GB", *A100_SEED)
    assert given["rent_total_usd"] == pytest.approx(94_187.52)
    assert given["inputs"]["power_watts"] == 0


def test_gpu_overrides_from_the_agent_config(capsys: pytest.CaptureFixture[str]) -> None:
    override = GpuCatalogEntry(id="A100-SXM-80GB", purchase_usd=9_000, rent_usd_per_hour=2.5)
    argv = ("--gpu", "A100-SXM-80GB", "--utilization", "1", "--years", "3")
    report = tco_json(capsys, *argv, gpu_overrides=[override])
    assert (report["inputs"]["purchase_usd"], report["inputs"]["rent_usd_per_hour"]) == (9000, 2.5)


def _without(flag: str) -> list[str]:
    argv = list(A100_SEED)
    index = argv.index(flag)
    del argv[index : index + 2]
    return argv


def _with(flag: str, value: str) -> list[str]:
    argv = list(A100_SEED)
    if flag in argv:
        argv[argv.index(flag) + 1] = value
    else:
        argv += [flag, value]
    return argv


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (_with("--utilization", "1.2"), "--utilization must be in (0, 1]"),
        (_with("--utilization", "70"), "a percentage like 70%"),
        (_with("--utilization", "120%"), "--utilization must be in (0, 1]"),
        (_with("--utilization", "0"), "--utilization must be in (0, 1]"),
        (_with("--utilization", "-0.5"), "--utilization must be in (0, 1]"),
        (_with("--utilization", "lots"), "--utilization: expected a fraction"),
        (_with("--years", "0"), "--years: expected a finite number in (0, 30]"),
        (_with("--years", "-3"), "--years: expected a finite number in (0, 30]"),
        (_with("--purchase-usd", "-12000"), "--purchase-usd: expected a finite number >= 0"),
        (
            _with("--purchase-usd", "12k"),
            "--purchase-usd: expected a finite number >= 0, got '12k'",
        ),
        (_with("--rent-usd-per-hour", "0"), "--rent-usd-per-hour: expected a finite number > 0"),
        (_with("--power-watts", "-1"), "--power-watts: expected a finite number >= 0"),
        (_with("--usd-per-kwh", "nan"), "--usd-per-kwh: expected a finite number >= 0, got 'nan'"),
        (_with("--pue", "0.8"), "--pue: expected a finite number >= 1"),
        (
            _with("--hosting-usd-per-kw-month", "-1"),
            "--hosting-usd-per-kw-month: expected a finite number >= 0",
        ),
        (_with("--ops-usd-per-year", "inf"), "--ops-usd-per-year: expected a finite number >= 0"),
        (_with("--tokens-per-second", "0"), "--tokens-per-second: expected a finite number > 0"),
        (_with("--years", "31"), "--years: expected a finite number in (0, 30], got '31'"),
        (_with("--cost-of-capital", "8"), "--cost-of-capital must be in [0, 1] (0.08 or 8%)"),
        (_with("--cost-of-capital", "150%"), "--cost-of-capital must be in [0, 1]"),
        (_with("--cost-of-capital", "cheap"), "--cost-of-capital: expected a rate"),
        ([*A100_SEED, "--bare-card"], "--bare-card applies to --gpu ID"),
        (_without("--utilization"), "--utilization is required"),
        (_without("--purchase-usd"), "--purchase-usd is required"),
        (_without("--rent-usd-per-hour"), "--rent-usd-per-hour is required"),
        (_without("--power-watts"), "--power-watts is required"),
        (_with("--gpu", "B300"), "--gpu: unknown GPU 'B300'; known: H100-SXM-80GB"),
    ],
)
def test_bad_input_exits_2_with_one_line(
    capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    code, out, err = tco(capsys, *argv)
    assert code == 2
    assert out == ""
    assert err.count("\n") == 1
    assert err.startswith("gpuwatch tco: ")
    assert message in err
    assert "Traceback" not in err
    code, out, err = tco(capsys, *argv, "--json")
    assert (code, out, err.count("\n")) == (2, "", 1)
