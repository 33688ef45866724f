"""docs/tco.md shows what the commands it quotes print.

Each ```console block that starts with ``$ gpuwatch tco ...`` holds that command's
output at 100 columns (trailing blanks stripped), and each table row
``| `gpuwatch tco ...` | `key` = value |`` the `--json` value of `key` to the decimals
shown. Regenerate with ``python -m tests.tco.test_doc``.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import re
import shlex
from pathlib import Path

import pytest

from gpuwatch.cli.tco import add_tco_parser, run_tco

DOC = Path(__file__).resolve().parents[2] / "docs" / "tco.md"
COLUMNS = "100"
CONSOLE = re.compile(r"(```console\n\$ gpuwatch tco (?P<argv>[^\n]*)\n)(?P<output>.*?)(```)", re.S)
ROW = re.compile(r"(\| `gpuwatch tco (?P<argv>[^`]*)` \| `(?P<key>\w+)` = )(?P<value>[-\d.]+)( \|)")


def run(argv: str) -> str:
    parser = argparse.ArgumentParser(prog="gpuwatch")
    add_tco_parser(parser.add_subparsers(dest="command", required=True))
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = run_tco(parser.parse_args(["tco", *shlex.split(argv)]))
    assert code == 0, argv
    return "".join(line.rstrip() + "\n" for line in out.getvalue().splitlines())


def _row_value(match: re.Match[str]) -> str:
    value = json.loads(run(match["argv"] + " --json"))[match["key"]]
    decimals = len(match["value"].partition(".")[2])
    return f"{match[1]}{value:.{decimals}f}{match[5]}"


def regenerate(text: str) -> str:
    """`text` with every quoted command's output and value recomputed."""
    text = CONSOLE.sub(lambda m: f"{m[1]}{run(m['argv'])}{m[4]}", text)
    return ROW.sub(_row_value, text)


def test_doc_shows_what_the_commands_print(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", COLUMNS)
    for name in ("FORCE_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE"):
        monkeypatch.delenv(name, raising=False)
    text = DOC.read_text("utf-8")
    assert len(CONSOLE.findall(text)) >= 3
    assert len(ROW.findall(text)) >= 10
    assert regenerate(text) == text, "regenerate: python -m tests.tco.test_doc"


if __name__ == "__main__":
    os.environ["COLUMNS"] = COLUMNS
    DOC.write_text(regenerate(DOC.read_text("utf-8")), "utf-8")
