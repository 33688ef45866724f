"""values.schema.json: draft-07, closed objects, up to date, and a typo fails the render."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import helm_python
import pytest

from tests.helm import schema
from tests.helm.chart import NAMESPACE, RELEASE


def test_schema_file_is_up_to_date() -> None:
    assert schema.SCHEMA_PATH.read_text(encoding="utf-8") == schema.render(), (
        "values.schema.json is stale: run `python -m tests.helm.schema`"
    )


def _objects(node: Any) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    if isinstance(node, dict):
        if "properties" in node:
            found.append(node)
        for value in node.values():
            found += _objects(value)
    elif isinstance(node, list):
        for item in node:
            found += _objects(item)
    return found


def test_draft_07_and_closed_everywhere() -> None:
    document = json.loads(schema.SCHEMA_PATH.read_text(encoding="utf-8"))
    assert document["$schema"] == "http://json-schema.org/draft-07/schema#"
    assert "$defs" not in json.dumps(document)
    objects = _objects(document)
    assert len(objects) > 30
    assert [o for o in objects if o.get("additionalProperties") is not False] == []


@pytest.mark.parametrize(
    "values",
    [
        {"imagee": {"repository": "x"}},
        {"attribution": {"enabeld": True}},
        {"resources": {"limit": {"memory": "1Gi"}}},
        {"config": {"agent": {"intervall_seconds": 1.0}}},
        {"config": {"alerts": {"slack": {"state": ["idle"]}}}},
        {"securityContext": {"privileged": True}},
        {"securityContext": {"capabilities": {"add": ["SYS_ADMIN"]}}},
        {"slack": {"mode": "inline"}},
    ],
)
def test_a_typo_or_a_privilege_fails_the_install(chart: Path, values: dict[str, Any]) -> None:
    with pytest.raises(helm_python.HelmError) as caught:
        helm_python.Chart.load(chart).render(values, name=RELEASE, namespace=NAMESPACE)
    assert "schema" in str(caught.value).lower()


def test_report_without_url_fails_with_the_field(chart: Path) -> None:
    with pytest.raises(helm_python.HelmError, match=r"report\.prometheusUrl"):
        helm_python.Chart.load(chart).render(
            {"report": {"enabled": True, "slack": False}}, name=RELEASE, namespace=NAMESPACE
        )
