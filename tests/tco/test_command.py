"""`gpuwatch tco` through an argparse parser built here with `add_tco_parser`."""

from __future__ import annotations

import argparse
import json
from typing import Any

import pytest

from gpuwatch.sizing import GpuCatalogEntry
from gpuwatch.tco import add_tco_parser, parse_utilization, run_tco

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
)
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
        (_with("--years", "0"), "--years must be > 0"),
        (_with("--years", "-3"), "--years must be > 0"),
        (_with("--purchase-usd", "-12000"), "--purchase-usd must be >= 0"),
        (_with("--purchase-usd", "12k"), "--purchase-usd: expected a number"),
        (_with("--rent-usd-per-hour", "0"), "--rent-usd-per-hour must be > 0"),
        (_with("--power-watts", "-1"), "--power-watts must be >= 0"),
        (_with("--usd-per-kwh", "nan"), "--usd-per-kwh must be >= 0"),
        (_with("--pue", "0.8"), "--pue must be >= 1"),
        (_with("--hosting-usd-per-kw-month", "-1"), "--hosting-usd-per-kw-month must be >= 0"),
        (_with("--ops-usd-per-year", "inf"), "--ops-usd-per-year must be >= 0"),
        (_with("--tokens-per-second", "0"), "--tokens-per-second must be > 0"),
        (_without("--years"), "--years is required"),
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
