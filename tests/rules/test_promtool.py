"""`promtool check rules` and `promtool test rules` on gpuwatch's rule files.

Also checks that the unit tests cover every rule: each recording rule has exact expected
samples, each alert a firing and a not-firing case.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.conftest import require_binary
from tests.rules.rulefiles import (
    RULE_FILES,
    RULES_DIR,
    alerts,
    load,
    promtool_test_files,
    recorded_names,
)


def promtool(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [require_binary("promtool"), *args],
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize("path", RULE_FILES, ids=lambda p: p.name)
def test_promtool_check_rules(path: Path) -> None:
    result = promtool("check", "rules", str(path))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


def test_promtool_test_rules() -> None:
    files = promtool_test_files()
    assert len(files) >= 3
    result = promtool("test", "rules", *map(str, files))
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.count("SUCCESS") == len(files)


def test_promtool_test_rules_fails_on_a_wrong_expectation(tmp_path: Path) -> None:
    """The unit tests compare exact values: one changed expectation fails them."""
    text = (RULES_DIR / "tests" / "recording.test.yml").read_text(encoding="utf-8")
    assert text.count("value: 3125") == 1
    broken = text.replace("value: 3125", "value: 3124.9").replace("../", f"{RULES_DIR}/")
    path = tmp_path / "broken.test.yml"
    path.write_text(broken, encoding="utf-8")
    result = promtool("test", "rules", str(path))
    assert result.returncode != 0
    assert "FAILED" in result.stdout + result.stderr


def test_every_recording_rule_has_exact_expected_samples() -> None:
    tested: set[str] = set()
    for path in promtool_test_files():
        for group in load(path)["tests"]:
            for case in group.get("promql_expr_test", []):
                if case.get("exp_samples"):
                    tested.add(case["expr"])
    assert recorded_names() - tested == set()


def test_every_alert_has_a_firing_and_a_not_firing_case() -> None:
    firing: set[str] = set()
    silent: set[str] = set()
    for path in promtool_test_files():
        for group in load(path)["tests"]:
            for case in group.get("alert_rule_test", []):
                (firing if case.get("exp_alerts") else silent).add(case["alertname"])
    names = {rule["alert"] for rule in alerts()}
    assert names - firing == set(), "alerts never tested firing"
    assert names - silent == set(), "alerts never tested not firing"
