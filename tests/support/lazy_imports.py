"""An import-linter contract: function-level imports only in the modules it names.

A lazy import hides a dependency from a reader and from the layers contract's order
of loading, so gpuwatch allows one only where memory needs it: the CLI's command table
(a command's code loads when that command runs) and optional heavy subsystems the agent
must not load unless configured (AWS, the kubelet's gRPC client, the PDF engine, the
plan's solver, the scheduled monthly report). `pyproject.toml` names those modules
(`allowed_modules`); any other module with an `import` inside a function body breaks
the contract, and so does a named module that no longer has one (the list stays true).

    [[tool.importlinter.contracts]]
    type = "lazy_imports"
    containers = ["gpuwatch"]
    allowed_modules = ["gpuwatch.cli", ...]

`lint-imports` finds this class through `contract_types` in `pyproject.toml`
(`lazy_imports: tests.support.lazy_imports.LazyImportsContract`); it puts the working
directory on `sys.path`, so run it from the repository root.
"""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path
from typing import TypeGuard, cast

from grimp import ImportGraph
from importlinter.application import output
from importlinter.domain import fields
from importlinter.domain.contract import Contract, ContractCheck

DYNAMIC_IMPORTS = frozenset({"import_module", "__import__"})


def _is_dynamic_import(node: ast.AST) -> TypeGuard[ast.Call]:
    """`importlib.import_module(...)`, `import_module(...)` or `__import__(...)`."""
    if not isinstance(node, ast.Call):
        return False
    func = node.func
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
    return name in DYNAMIC_IMPORTS


def lazy_import_lines(source: str) -> list[int]:
    """Line numbers of imports inside function bodies (nested ones too): `import`
    statements and dynamic imports (`importlib.import_module`, `__import__`)."""
    lines: set[int] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            for inner in ast.walk(node):
                if isinstance(inner, ast.Import | ast.ImportFrom) or _is_dynamic_import(inner):
                    lines.add(inner.lineno)
    return sorted(lines)


def _source_path(module: str) -> Path | None:
    """The module's file, found from its top package's folder (nothing is imported)."""
    top, _, rest = module.partition(".")
    spec = importlib.util.find_spec(top)
    if spec is None or not spec.submodule_search_locations:
        return None
    base = Path(next(iter(spec.submodule_search_locations)), *rest.split(".") if rest else ())
    for candidate in (base / "__init__.py", base.with_suffix(".py")):
        if candidate.is_file():
            return candidate
    return None


class LazyImportsContract(Contract):
    """Function-level imports appear only in `allowed_modules` (and each of those has one)."""

    containers = fields.SetField(subfield=fields.StringField())
    allowed_modules = fields.SetField(subfield=fields.StringField())

    def check(self, graph: ImportGraph, verbose: bool) -> ContractCheck:
        containers = cast("set[str]", self.containers)
        allowed = cast("set[str]", self.allowed_modules)
        found: dict[str, list[int]] = {}
        for module in sorted(graph.modules):
            if not any(module == c or module.startswith(c + ".") for c in containers):
                continue
            path = _source_path(module)
            if path is None:
                continue
            lines = lazy_import_lines(path.read_text(encoding="utf-8"))
            if lines:
                found[module] = lines
        unexpected = {m: lines for m, lines in found.items() if m not in allowed}
        stale = sorted(allowed - set(found))
        return ContractCheck(
            kept=not unexpected and not stale,
            warnings=[],
            metadata={"unexpected": unexpected, "stale": stale},
        )

    def render_broken_contract(self, check: ContractCheck) -> None:
        unexpected = cast("dict[str, list[int]]", check.metadata["unexpected"])
        for module, lines in unexpected.items():
            where = ", ".join(str(n) for n in lines)
            output.print_error(f"{module} imports inside a function (line {where}): not allowed")
        for module in cast("list[str]", check.metadata["stale"]):
            output.print_error(f"{module} is allowed lazy imports but has none: drop it")
        output.new_line()
