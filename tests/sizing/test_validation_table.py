"""docs/sizing.md's validation table, recomputed row by row through ``gpuwatch size``.

Each row of the table between `BEGIN` and `END` names how its gpuwatch figure is made
(the "how" cell, in backticks), the figure, the published reference, its source, the
% off and the tolerance. For every row this test runs the command, checks that the
figure printed in the docs is what the command gives (to the digits shown), that the
% off is what the two numbers give, and that it is within the stated tolerance. A row
whose reference is a bound (``< 48 GB``) must also be on the right side of it.

"how" is one of:

- ``size ARGS -> KEY``: ``gpuwatch size ARGS --json``, then KEY in the JSON, dotted for
  nested objects (``parts.weights_linear_bytes``); ``gpus.ID.FIELD`` picks a GPU's row.
- ``max-context N GB: size ARGS``: the longest ``--context`` whose total memory, with the
  command's headroom, fits N GB (bisection over the command line).

Figures carry a unit: GB (10^9 bytes), GiB (2^30), KB (10^3 bytes), B (10^9 parameters),
tokens, tok/s, GPU or GPUs (a count: ``gpus.ID.gpus_needed``).
"""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from gpuwatch.cli import main

DOC = Path(__file__).resolve().parents[2] / "docs" / "sizing.md"
BEGIN = "<!-- BEGIN VALIDATION TABLE (tests/sizing/test_validation_table.py) -->"
END = "<!-- END VALIDATION TABLE -->"

UNITS = {
    "GB": 1e9,
    "GiB": 2.0**30,
    "KB": 1e3,
    "B": 1e9,
    "tokens": 1.0,
    "tok/s": 1.0,
    "GPU": 1.0,
    "GPUs": 1.0,
}
FIGURE = re.compile(r"^(?P<op>[<>≈~]\s*)?(?P<number>[\d,]+(?:\.\d+)?)\s*(?P<unit>\S+)$")


@dataclass(frozen=True)
class Row:
    """One row of the table, as written."""

    case: str
    how: str
    gpuwatch: str
    reference: str
    source: str
    off: str
    tolerance: str


@dataclass(frozen=True)
class Figure:
    """A number with its unit and the decimals it is written with."""

    value: float
    unit: str
    decimals: int
    bound: str

    @property
    def base(self) -> float:
        """The value in base units (bytes, parameters, tokens, tokens/s)."""
        return self.value * UNITS[self.unit]


def parse_figure(text: str) -> Figure:
    match = FIGURE.match(text.strip())
    assert match is not None, f"not a figure with a unit: {text!r}"
    number, unit = match["number"].replace(",", ""), match["unit"]
    assert unit in UNITS, f"unknown unit {unit!r} in {text!r}"
    decimals = len(number.split(".")[1]) if "." in number else 0
    return Figure(float(number), unit, decimals, (match["op"] or "").strip())


def table_rows(text: str) -> list[Row]:
    """The rows between the markers (header and rule skipped)."""
    start, end = text.index(BEGIN), text.index(END)
    lines = [line for line in text[start:end].splitlines() if line.startswith("|")]
    rows = []
    for line in lines[2:]:
        cells = [cell.strip() for cell in re.split(r"(?<!\\)\|", line)[1:-1]]
        assert len(cells) == 7, f"a row has 7 cells: {line}"
        rows.append(Row(*cells))
    return rows


def size_json(argv: list[str], capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    code = main(["size", *argv, "--json"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    report: dict[str, Any] = json.loads(captured.out)
    return report


def lookup(report: dict[str, Any], key: str) -> float:
    """KEY in the JSON: dotted path; ``gpus.ID.FIELD`` selects the GPU named ID."""
    parts = key.split(".")
    node: Any = report
    index = 0
    while index < len(parts):
        part = parts[index]
        if part == "gpus" and isinstance(node, dict):
            node = next(g for g in node["gpus"] if g["name"] == parts[index + 1])
            index += 2
            continue
        node = node[part]
        index += 1
    assert isinstance(node, int | float), f"{key} is not a number: {node!r}"
    return float(node)


def max_context(argv: list[str], memory_bytes: float, capsys: pytest.CaptureFixture[str]) -> int:
    """The longest --context whose total x (1 + headroom) is at most `memory_bytes`."""

    def fits(tokens: int) -> bool:
        report = size_json([*argv, "--context", str(tokens)], capsys)
        return bool(report["total_bytes"] * (1 + report["headroom"]) <= memory_bytes)

    low, high = 1, 1 << 20
    assert fits(low), "not even one token fits"
    while low < high:
        middle = (low + high + 1) // 2
        if fits(middle):
            low = middle
        else:
            high = middle - 1
    return low


def compute(how: str, capsys: pytest.CaptureFixture[str]) -> float:
    """The gpuwatch figure of a row's "how" cell, in base units."""
    how = how.strip().strip("`")
    context = re.match(r"^max-context (?P<gb>[\d.]+) GB: size (?P<args>.+)$", how)
    if context is not None:
        argv = shlex.split(context["args"])
        return float(max_context(argv, float(context["gb"]) * 1e9, capsys))
    command = re.match(r"^size (?P<args>.+?) -> (?P<key>\S+)$", how)
    assert command is not None, f"unknown 'how': {how!r}"
    return lookup(size_json(shlex.split(command["args"]), capsys), command["key"])


def tolerance_percent(text: str) -> float:
    match = re.match(r"^±\s*(?P<pct>[\d.]+)\s*%", text)
    assert match is not None, f"a tolerance starts with ±N %: {text!r}"
    return float(match["pct"])


def off_percent(text: str) -> float:
    match = re.match(r"^(?P<pct>[+-]?[\d.]+)\s*%$", text)
    assert match is not None, f"% off is written +N.N %: {text!r}"
    return float(match["pct"])


ROWS = table_rows(DOC.read_text(encoding="utf-8"))


def test_the_table_has_at_least_15_rows_each_with_a_source() -> None:
    assert len(ROWS) >= 15
    for row in ROWS:
        assert len(row.source) > 10, row.case
        assert row.how.startswith("`"), row.case
        assert row.how.endswith("`"), row.case


@pytest.mark.parametrize("row", ROWS, ids=[row.case for row in ROWS])
def test_row(row: Row, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(DOC.parents[1])  # --config-json paths are relative to the repository
    shown = parse_figure(row.gpuwatch)
    reference = parse_figure(row.reference)
    value = compute(row.how, capsys)
    # the figure in the docs is what gpuwatch gives, to the digits shown
    assert round(value / UNITS[shown.unit], shown.decimals) == pytest.approx(shown.value), (
        f"{row.case}: gpuwatch gives {value / UNITS[shown.unit]:.4f} {shown.unit}"
    )
    off = (value / reference.base - 1) * 100
    assert round(off, 1) == pytest.approx(off_percent(row.off), abs=0.051), (
        f"{row.case}: {off:+.2f} %"
    )
    assert abs(off) <= tolerance_percent(row.tolerance), row.case
    if reference.bound == "<":
        assert value < reference.base, f"{row.case}: above the published bound"
    elif reference.bound == ">":
        assert value > reference.base, f"{row.case}: below the published bound"


def test_a_wrong_figure_fails() -> None:
    """The checks can fail: a figure off by one in its last digit is caught."""
    shown = parse_figure("51.6 GB")
    assert round(51.54 * 1e9 / UNITS[shown.unit], shown.decimals) != shown.value
    with pytest.raises(AssertionError):
        parse_figure("51.5 parsecs")
