"""The seams of issue 22 between the offline commands and what they share.

`gpuwatch.promapi` (the Prometheus-compatible API client) and `gpuwatch.slack` (Slack
transport, secret, outbox, mrkdwn) are used by the report, the plan and the alerts and
owned by none of them; the plan does not import the report (the report embeds the plan
through `gpuwatch.plan.make`, never the plan's CLI); the history imports no CLI-level
module. Every import counts, as in `tests/test_layering.py`.
"""

from __future__ import annotations

import pytest

from tests.test_layering import MODULES, imports_of


def _in(package: str) -> list[str]:
    return sorted(m for m in MODULES if m == package or m.startswith(package + "."))


def _offending(package: str, forbidden: tuple[str, ...]) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for module in _in(package):
        bad = sorted(
            i for i in imports_of(module) if any(i == f or i.startswith(f + ".") for f in forbidden)
        )
        if bad:
            found[module] = bad
    return found


@pytest.mark.parametrize(
    ("package", "forbidden"),
    [
        ("gpuwatch.plan", ("gpuwatch.report",)),
        ("gpuwatch.promapi", ("gpuwatch.report", "gpuwatch.plan", "gpuwatch.cli")),
        ("gpuwatch.slack", ("gpuwatch.alerts", "gpuwatch.report", "gpuwatch.plan", "gpuwatch.cli")),
        ("gpuwatch.history", ("gpuwatch.cli",)),
        ("gpuwatch.report", ("gpuwatch.plan.command",)),
    ],
)
def test_a_shared_or_lower_package_does_not_import_its_users(
    package: str, forbidden: tuple[str, ...]
) -> None:
    assert _in(package), package
    assert _offending(package, forbidden) == {}
