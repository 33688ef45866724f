"""`write_fleet(..., families=)`: only the named families, each exactly as the full
writer writes it, and the same truth (the plan benchmark writes `PLAN_FAMILIES` only)."""

from __future__ import annotations

import io
import re
from collections import defaultdict
from pathlib import Path

import pytest

import gpuwatch.plan.prometheus as source
from gpuwatch.report.synthetic import PLAN_FAMILIES, Format, SyntheticFleet, write_fleet

FLEET = SyntheticFleet(hosts=3, gpus_per_host=2, days=2, interval_seconds=300, plan_series=True)
_TYPE = re.compile(r"# TYPE (\S+) ")


def _families(text: str) -> dict[str, list[str]]:
    """Each family's lines (its TYPE line and samples), by family."""
    out: dict[str, list[str]] = defaultdict(list)
    family = ""
    for line in text.splitlines():
        if match := _TYPE.match(line):
            family = match.group(1)
        if line != "# EOF":
            out[family].append(line)
    return dict(out)


@pytest.mark.parametrize("fmt", ["openmetrics", "prometheus"])
def test_only_the_named_families_each_unchanged(fmt: Format) -> None:
    full, only = io.StringIO(), io.StringIO()
    truth = write_fleet(FLEET, full, fmt)
    kept = write_fleet(FLEET, only, fmt, families=PLAN_FAMILIES)
    assert kept == truth
    if fmt == "openmetrics":
        everything, plan = _families(full.getvalue()), _families(only.getvalue())
        assert set(plan) == set(PLAN_FAMILIES)
        assert set(everything) > set(PLAN_FAMILIES)  # the filter did drop families
        for family in PLAN_FAMILIES:
            assert plan[family] == everything[family]
        assert only.getvalue().endswith("# EOF\n")
    else:
        names = {line.split("{", 1)[0] for line in only.getvalue().splitlines()}
        assert names == {"gpuwatch_gpu_info"} | (PLAN_FAMILIES - {"gpuwatch_gpu"})
        lines = set(full.getvalue().splitlines())
        assert all(line in lines for line in only.getvalue().splitlines())


def test_the_plan_queries_name_every_plan_family() -> None:
    """PLAN_FAMILIES is what plan/prometheus.py queries: a family it starts to read must be
    added here, or the benchmark's store would lack it."""
    text = Path(source.__file__).read_text(encoding="utf-8")
    read = set(re.findall(r"\b(gpuwatch_\w+)", text))
    read = {name.removesuffix("_info") if name == "gpuwatch_gpu_info" else name for name in read}
    assert read == set(PLAN_FAMILIES)
