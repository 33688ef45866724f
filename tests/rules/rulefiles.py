"""Read gpuwatch's Prometheus rule files, their promtool tests and the metric reference."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

from tests.conftest import REPO_ROOT

RULES_DIR = REPO_ROOT / "deploy" / "prometheus"
RECORDING_FILE = RULES_DIR / "gpuwatch.rules.yml"
ALERTS_FILE = RULES_DIR / "gpuwatch-alerts.rules.yml"
RULE_FILES = (RECORDING_FILE, ALERTS_FILE)
TESTS_DIR = RULES_DIR / "tests"
ALERTS_DOC = REPO_ROOT / "docs" / "alerts.md"
README = REPO_ROOT / "README.md"

IDENTIFIER = re.compile(r"[A-Za-z_:][A-Za-z0-9_:]*")
"""A PromQL metric or rule name (letters, digits, `_` and `:`)."""


def fast_copy(source: Path, target: Path) -> Path:
    """The rule file with every `for:` at 0s and every group interval at 1s, so a real
    Prometheus fires its alerts within seconds (the only change)."""
    text = source.read_text(encoding="utf-8")
    text = re.sub(r"(?m)^(\s+)for: \S+$", r"\1for: 0s", text)
    text = re.sub(r"(?m)^(\s+)interval: \S+$", r"\1interval: 1s", text)
    target.write_text(text, encoding="utf-8")
    return target


def load(path: Path) -> Any:
    with path.open(encoding="utf-8") as handle:
        return yaml.safe_load(handle)


def rules(path: Path) -> Iterator[dict[str, Any]]:
    """Every rule (recording or alerting) of a rule file, in order."""
    for group in load(path)["groups"]:
        yield from group["rules"]


def all_rules() -> list[dict[str, Any]]:
    return [rule for path in RULE_FILES for rule in rules(path)]


def recorded_names() -> set[str]:
    return {rule["record"] for rule in all_rules() if "record" in rule}


def alerts() -> list[dict[str, Any]]:
    return [rule for rule in all_rules() if "alert" in rule]


def promtool_test_files() -> list[Path]:
    return sorted(TESTS_DIR.glob("*.test.yml"))


def exported_metric_names() -> set[str]:
    """The families of the README's metric reference (what the agent exports)."""
    text = README.read_text(encoding="utf-8")
    table = text.split("<!-- metric-reference:start -->")[1].split("<!-- metric-reference:end -->")[
        0
    ]
    return set(re.findall(r"^\| `([a-z_]+)` \|", table, flags=re.MULTILINE))


def referenced_names(rule: dict[str, Any]) -> set[str]:
    """gpuwatch metric and rule names a rule's expression and annotations mention."""
    texts = [rule["expr"], *rule.get("annotations", {}).values()]
    names = set()
    for text in texts:
        for name in IDENTIFIER.findall(str(text)):
            if name.startswith("gpuwatch_") or ":" in name.strip(":"):
                names.add(name)
    return names


def unknown_names(rule: dict[str, Any], exported: set[str], recorded: set[str]) -> set[str]:
    """Names a rule mentions that are neither exported by the agent nor recorded here."""
    return {name for name in referenced_names(rule) if name not in exported | recorded}


def markdown_anchors(text: str) -> set[str]:
    """GitHub's anchors of a Markdown file's headings (lowercase, punctuation dropped)."""
    anchors = set()
    for line in text.splitlines():
        match = re.match(r"^#{1,6} (.+)$", line)
        if match:
            slug = re.sub(r"[^\w\- ]", "", match.group(1).strip().lower()).replace(" ", "-")
            anchors.add(slug)
    return anchors
