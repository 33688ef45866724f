"""The layers of gpuwatch read top to bottom: no import cycle among its modules.

Every `import` counts, those under `TYPE_CHECKING` and those inside functions too: a
cycle that only type checking or a lazy import hides is still two modules that each
need the other. `from gpuwatch.pkg import name` is an edge to `gpuwatch.pkg.name` when
that is a module, else to the package's `__init__`.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parent.parent / "src"
PACKAGE = SRC / "gpuwatch"


def _module_name(path: Path) -> str:
    parts = path.relative_to(SRC).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _resolve(module: str, package: str, level: int) -> str:
    if level == 0:
        return module
    base = package.split(".")[: len(package.split(".")) - (level - 1)]
    return ".".join([*base, module] if module else base)


def imports_of(name: str) -> set[str]:
    """The gpuwatch modules that module `name` imports, anywhere in its text."""
    path = MODULES[name]
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            target = _resolve(node.module or "", package, node.level)
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                found.add(sub if sub in MODULES else target)
    return {m for m in found if m in MODULES and m != name}


def import_cycles() -> list[list[str]]:
    """Strongly connected groups of more than one module (Tarjan), each sorted."""
    graph = {name: imports_of(name) for name in MODULES}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                cycles.append(sorted(group))

    for name in graph:
        if name not in index:
            visit(name)
    return cycles


def test_the_module_table_sees_the_package() -> None:
    assert {"gpuwatch.config", "gpuwatch.workloads", "gpuwatch.core.units"} <= set(MODULES)
    assert "gpuwatch.workloads" in imports_of("gpuwatch.config.schema")
    assert "gpuwatch.analysis.config" in imports_of("gpuwatch.analysis.engine")  # TYPE_CHECKING


def test_no_import_cycles() -> None:
    assert import_cycles() == []


@pytest.mark.parametrize(
    ("lower", "upper"),
    [
        ("gpuwatch.workloads", "gpuwatch.analysis"),
        ("gpuwatch.workloads", "gpuwatch.config"),
        ("gpuwatch.analysis", "gpuwatch.config"),
        ("gpuwatch.config", "gpuwatch.analysis.engine"),
        ("gpuwatch.core", "gpuwatch"),
        ("gpuwatch.core.snapshot", "gpuwatch.nvml"),
        ("gpuwatch.export", "gpuwatch.nvml"),
    ],
)
def test_layer_does_not_import(lower: str, upper: str) -> None:
    """Modules under `lower` import nothing under `upper` (other than their own)."""
    for name in MODULES:
        if name == lower or name.startswith(lower + "."):
            bad = {
                m
                for m in imports_of(name)
                if (m == upper or m.startswith(upper + "."))
                and not (m == lower or m.startswith(lower + "."))
            }
            assert not bad, f"{name} imports {sorted(bad)}"
