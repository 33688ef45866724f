"""The shipped report rules pass `promtool check rules` and their unit tests
(`promtool test rules gpuwatch-report.rules.test.yml`: input series for every rule)."""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.conftest import require_binary
from tests.report_prometheus.conftest import RULES_FILE

UNIT_TESTS = Path(__file__).with_name("gpuwatch-report.rules.test.yml")


def promtool(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [require_binary("promtool"), *args], capture_output=True, text=True, check=False
    )


def test_promtool_check_rules() -> None:
    done = promtool("check", "rules", str(RULES_FILE))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS: 18 rules found" in done.stdout


def test_promtool_unit_tests() -> None:
    done = promtool("test", "rules", str(UNIT_TESTS))
    assert done.returncode == 0, done.stdout + done.stderr


def test_every_rule_has_a_unit_test() -> None:
    records = [
        line.split("record:")[1].strip()
        for line in RULES_FILE.read_text().splitlines()
        if "record:" in line
    ]
    tested = UNIT_TESTS.read_text()
    assert len(records) == 18
    for name in records:
        assert f"expr: {name}\n" in tested, name
