"""The README's example outputs of `gpuwatch status --simulate` are what the command prints.

Every ```text block introduced by a line that names a `gpuwatch status --simulate ...`
command in backticks (and ends with a colon) is compared with that command's output on
an 80-column terminal. Only the host name on the first line is normalised: it is the
name of the machine the command runs on.
"""

from __future__ import annotations

import re
import shlex

import pytest

from tests.conftest import REPO_ROOT
from tests.status.test_cli_status import gpuwatch

README = REPO_ROOT / "README.md"
EXAMPLE = re.compile(r"`(gpuwatch status --simulate [^`]+)`[^\n]*:\n\n```text\n(.*?)```", re.DOTALL)
HOST = re.compile(r"^[^\s:]+(?=: driver )")


def examples() -> list[tuple[str, str]]:
    found = EXAMPLE.findall(README.read_text(encoding="utf-8"))
    assert found, "README.md shows no gpuwatch status --simulate example"
    return found


def _normalised(output: str, host: str) -> list[str]:
    lines = [line.rstrip() for line in output.rstrip("\n").splitlines()]
    lines[0] = HOST.sub(host, lines[0], count=1)
    return lines


@pytest.mark.parametrize(("command", "block"), examples(), ids=lambda value: value[:60])
def test_the_readme_shows_what_the_command_prints(command: str, block: str) -> None:
    words = shlex.split(command)
    assert words[0] == "gpuwatch"
    result = gpuwatch(*words[1:], timeout=120)
    assert result.returncode == 0, result.stderr
    expected = _normalised(block, "HOST")
    assert _normalised(result.stdout, "HOST") == expected, (
        f"README.md's output of `{command}` differs from what it prints:\n{result.stdout}"
    )
