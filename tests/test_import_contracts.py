"""The import contracts in pyproject.toml catch what they promise to.

`make test` runs `lint-imports` over gpuwatch itself; these tests run the same
contract types over a small throwaway package with one planted breach each, so a
contract that silently stopped checking (a typo in a layer, a lazy-import scan that
found nothing) fails here.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.lazy_imports import lazy_import_lines

ROOT = Path(__file__).resolve().parent.parent
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")

CONFIG = """
[importlinter]
root_package = toy
contract_types =
    lazy_imports: tests.support.lazy_imports.LazyImportsContract

[importlinter:contract:layers]
name = layers
type = layers
containers = toy
layers =
    high
    low

[importlinter:contract:lazy]
name = lazy
type = lazy_imports
containers = toy
allowed_modules = toy.high
"""


def _toy(tmp_path: Path, low: str, high: str) -> subprocess.CompletedProcess[str]:
    package = tmp_path / "toy"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "low.py").write_text(low)
    (package / "high.py").write_text(high)
    (tmp_path / ".importlinter").write_text(CONFIG)
    env = {**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{ROOT}"}
    return subprocess.run(
        [str(LINT_IMPORTS), "--config", str(tmp_path / ".importlinter"), "--no-cache"],
        check=False,
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


LAZY_HIGH = "def run() -> None:\n    import json  # allowed here\n"


def test_a_clean_toy_keeps_every_contract(tmp_path: Path) -> None:
    result = _toy(tmp_path, low="X = 1\n", high="from toy.low import X\n" + LAZY_HIGH)
    assert result.returncode == 0, result.stdout + result.stderr


def test_an_upward_import_breaks_the_layers(tmp_path: Path) -> None:
    result = _toy(tmp_path, low="from toy import high\n", high=LAZY_HIGH)
    assert result.returncode == 1
    assert "toy.low is not allowed to import toy.high" in result.stdout


def test_a_lazy_import_outside_the_named_modules_breaks_the_contract(tmp_path: Path) -> None:
    low = "def f() -> None:\n    import os  # a hidden dependency\n"
    result = _toy(tmp_path, low=low, high=LAZY_HIGH)
    assert result.returncode == 1
    assert "toy.low imports inside a function (line 2): not allowed" in result.stdout


def test_a_named_module_without_a_lazy_import_is_stale(tmp_path: Path) -> None:
    result = _toy(tmp_path, low="X = 1\n", high="from toy.low import X\n")
    assert result.returncode == 1
    assert "toy.high is allowed lazy imports but has none" in result.stdout


@pytest.mark.parametrize(
    ("source", "lines"),
    [
        ("import os\n", []),
        ("def f() -> None:\n    import os\n", [2]),
        ("class C:\n    def m(self) -> None:\n        from os import path\n", [3]),
        ("async def f() -> None:\n    def g() -> None:\n        import os\n", [3]),
        ("if True:\n    import os\n", []),
        ("import importlib\ndef f() -> None:\n    importlib.import_module('os')\n", [3]),
        ("def f() -> None:\n    __import__('os')\n", [2]),
        ("import importlib\nM = importlib.import_module('os')\n", []),
    ],
)
def test_lazy_import_lines_finds_imports_in_function_bodies(source: str, lines: list[int]) -> None:
    assert lazy_import_lines(source) == lines
