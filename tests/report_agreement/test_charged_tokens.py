"""The fleet source reads the agent's charged token counters, as the local history does."""

from __future__ import annotations

from gpuwatch.promapi.client import PrometheusOptions
from gpuwatch.report import prometheus
from gpuwatch.report.build import build_report
from tests.report_agreement.conftest import Run


def test_the_fleet_report_counts_tokens_over_charged_time(demo_run: Run) -> None:
    options = PrometheusOptions(demo_run.prometheus_url)
    fleet = build_report(prometheus.load(options, demo_run.period))
    assert fleet.tokens.tokens["generation"] > 0
    assert not [n for n in fleet.notes if "gpuwatch_token_source_charged" in n]
