"""One rent-vs-buy everywhere: the agent's exported position for the demo's H100s,
`gpuwatch tco --gpu H100-SXM-80GB` and `gpuwatch size`'s owned column, all through the
`gpuwatch` command line, give the same owned cost and break-even for the same inputs —
with the defaults, and with a `[rent_vs_buy]` section every one of them reads."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import generate_latest

from gpuwatch.cli import main
from gpuwatch.config import AgentConfig, Config, load_config
from gpuwatch.export.status_json import status_document
from tests.conftest import scenario_agent, simulated

SECTION = """
[rent_vs_buy]
life_years = 5
cost_of_capital = 0.05
ops_usd_per_year_per_gpu = 1000
facility = "owned"
pue = 1.3
host_share = false
"""
"""Every input that moves the verdict set away from its default."""


def agent_export(config: Config) -> tuple[dict[str, Any], str]:
    """(status.json's entry for the demo's GPU 0, the exposition) after 2,500 s."""
    nv, clock = simulated("demo", None)
    agent = scenario_agent(config, nv, clock)
    try:
        for _ in range(250):  # 10 s steps: past the 30-minute window
            clock.advance(10.0)
            snapshot = agent.tick()
        text = generate_latest(agent.registry).decode()
    finally:
        agent.stop()
    document = status_document(snapshot, source="agent")
    entry = next(g for g in document["gpus"] if g["index"] == 0)
    return entry, text


def sample(text: str, family: str) -> float:
    match = re.search(rf'^{family}{{gpu="0",[^}}]*}} (\S+)$', text, re.M)
    assert match, family
    return float(match[1])


def cli_json(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, Any]:
    assert main(list(argv)) == 0
    out: dict[str, Any] = json.loads(capsys.readouterr().out)
    return out


@pytest.mark.parametrize("section", ["", SECTION], ids=["defaults", "rent_vs_buy section"])
def test_agent_tco_and_size_agree(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, section: str
) -> None:
    path = tmp_path / "gpuwatch.toml"
    path.write_text(section, "utf-8")
    config = load_config(path)
    entry, text = agent_export(
        Config(agent=AgentConfig(hostname="test-host"), rent_vs_buy=config.rent_vs_buy)
    )
    position = entry["rent_vs_buy"]
    assert entry["name"] == "NVIDIA H100 80GB HBM3"
    busy = position["busy_ratio"]
    assert busy == 1.0  # the demo's trainer

    tco = cli_json(
        capsys,
        "tco",
        "--config",
        str(path),
        "--gpu",
        "H100-SXM-80GB",
        "--utilization",
        f"{busy:g}",
        "--json",
    )
    assert tco["owned_usd_per_gpu_year"] == pytest.approx(position["owned_usd_per_year"])
    assert tco["breakeven_utilization"] == pytest.approx(position["breakeven_utilization_ratio"])
    assert tco["monthly_delta_usd"] == pytest.approx(position["monthly_delta_usd"])
    exported = sample(text, "gpuwatch_rent_vs_buy_breakeven_utilization_ratio")
    assert exported == pytest.approx(tco["breakeven_utilization"])
    assert sample(text, "gpuwatch_rent_vs_buy_owned_usd_per_year") == pytest.approx(
        tco["owned_usd_per_gpu_year"]
    )
    # the inputs: the same in status.json, the exposition and tco's --json
    inputs = tco["inputs"]
    assert position["life_years"] == inputs["years"]
    assert position["cost_of_capital"] == inputs["cost_of_capital"]
    assert position["ops_usd_per_year"] == inputs["ops_usd_per_year"]
    assert position["facility"] == inputs["facility"]
    assert position["pue_applied"] == tco["pue_applied"]
    assert position["hosting_usd_per_kw_month"] == inputs["hosting_usd_per_kw_month"]
    assert position["capex_usd"] == pytest.approx(inputs["purchase_usd"] + inputs["host_capex_usd"])
    info = re.search(r'^gpuwatch_rent_vs_buy_inputs_info\{([^}]*gpu="0"[^}]*)\} 1\.0$', text, re.M)
    assert info
    labels = dict(re.findall(r'(\w+)="([^"]*)"', info[1]))
    assert float(labels["life_years"]) == inputs["years"]
    assert float(labels["cost_of_capital"]) == inputs["cost_of_capital"]
    assert labels["facility"] == inputs["facility"]

    size = cli_json(
        capsys, "size", "--config", str(path), "llama-2-7b", "--utilization", f"{busy:g}", "--json"
    )
    h100 = next(g for g in size["gpus"] if g["name"] == "H100-SXM-80GB")
    assert h100["owned_usd_per_gpu_year"] == pytest.approx(position["owned_usd_per_year"])
    priced = cli_json(
        capsys,
        "tco",
        "--config",
        str(path),
        "--gpu",
        "H100-SXM-80GB",
        "--utilization",
        f"{busy:g}",
        "--tokens-per-second",
        repr(h100["tokens_per_second"]),
        "--json",
    )
    assert h100["usd_per_million_tokens_owned"] == pytest.approx(
        priced["own_usd_per_million_tokens"]
    )
    assert h100["usd_per_million_tokens_rented"] == pytest.approx(
        priced["rent_usd_per_million_tokens"]
    )


def test_the_section_moves_all_three(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """Not vacuous: the section's inputs change the owned cost, in tco and size alike."""
    path = tmp_path / "gpuwatch.toml"
    path.write_text(SECTION, "utf-8")
    argv = ("tco", "--gpu", "H100-SXM-80GB", "--utilization", "50%", "--json")
    default = cli_json(capsys, *argv)
    sectioned = cli_json(capsys, *argv, "--config", str(path))
    assert default["owned_usd_per_gpu_year"] != pytest.approx(sectioned["owned_usd_per_gpu_year"])
    assert (sectioned["inputs"]["facility"], sectioned["pue_applied"]) == ("owned", 1.3)
    # flags win over the section: --bare-card is already set there, years are not
    flagged = cli_json(capsys, *argv, "--config", str(path), "--years", "3")
    assert flagged["inputs"]["years"] == 3


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ("tco", "--gpu", "H100-SXM-80GB", "--utilization", "50%", "--cost-of-capital", "8"),
            "--cost-of-capital must be in [0, 1]",
        ),
        (
            ("size", "llama-2-7b", "--ops-usd-per-year", "-5"),
            "--ops-usd-per-year: expected a finite number >= 0",
        ),
        (("size", "llama-2-7b", "--years", "0"), "--years: expected a finite number in (0, 30]"),
    ],
)
def test_bad_owning_options_exit_2_naming_the_option(
    capsys: pytest.CaptureFixture[str], argv: tuple[str, ...], message: str
) -> None:
    assert main(list(argv)) == 2
    err = capsys.readouterr().err
    assert message in err
    assert err.count("\n") == 1


def test_bad_facility_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["tco", "--gpu", "H100-SXM-80GB", "--utilization", "50%", "--facility", "garage"])
    assert exit_info.value.code == 2
    assert "--facility" in capsys.readouterr().err


def test_bad_config_values_name_the_field(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / "gpuwatch.toml"
    path.write_text("[rent_vs_buy]\ncost_of_capital = 8\n", "utf-8")
    code = main(["tco", "--config", str(path), "--gpu", "H100-SXM-80GB", "--utilization", "50%"])
    assert code == 2
    assert "rent_vs_buy.cost_of_capital" in capsys.readouterr().err
