"""`make mutation`: patch gpuwatch.nvml and gpuwatch.collectors, run the tests, count kills.

Usage: python -m tests.mutation.harness [--generic N] [--jobs J] [--seed S]

Each mutant is applied to a private copy of `src/` (the working tree is never
touched) and the chosen tests run against it (`PYTHONPATH` puts the copy first); a
mutant is killed when they fail or time out. Mutants: the hand-made ones of
`tests.mutation.mutants` plus N generic operator mutants (comparison, boolean and
arithmetic operators, True/False, `not` dropped), drawn with a fixed seed from every
such token in the two packages. Prints one line per mutant and the score; exits 1 when
the unmutated tests fail, a required mutant survives, or a mutant no longer applies.
"""

from __future__ import annotations

import argparse
import io
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
import tokenize
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from tests.mutation.mutants import NAMED, Mutant

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "src" / "gpuwatch"
TARGETS = ("nvml", "collectors")
TESTS = (
    "tests/test_nvml_sampler.py",
    "tests/test_nvml_strict.py",
    "tests/test_nvml_calls.py",
    "tests/test_nvml_drivers.py",
    "tests/bindings/test_old_bindings.py",
    "tests/test_legacy_fleet.py",
    "tests/test_parse.py",
    "tests/test_golden_metrics.py",
)
"""The tests that cover the adapter; the whole suite is not needed to kill these."""
TIMEOUT_S = 180
_SWAPS = {
    "<": ">=",
    "<=": ">",
    ">": "<=",
    ">=": "<",
    "==": "!=",
    "!=": "==",
    "and": "or",
    "or": "and",
    "True": "False",
    "False": "True",
    "+": "-",
    "-": "+",
    "is": "is not",
    "in": "not in",
}


@dataclass(frozen=True, slots=True)
class Outcome:
    """What running the tests against one mutant gave."""

    mutant: Mutant
    status: str  # killed, survived, timeout (counts as killed), stale
    seconds: float


def generic_mutants(count: int, seed: int) -> list[Mutant]:
    """`count` operator mutants drawn with `seed` from every candidate token."""
    candidates: list[Mutant] = []
    for target in TARGETS:
        for path in sorted((PACKAGE / target).glob("*.py")):
            candidates.extend(_token_mutants(path))
    random.Random(seed).shuffle(candidates)
    return sorted(candidates[:count], key=lambda m: m.name)


def _token_mutants(path: Path) -> list[Mutant]:
    text = path.read_text()
    lines = text.splitlines(keepends=True)
    relative = path.relative_to(PACKAGE).as_posix()
    found = []
    for token in tokenize.generate_tokens(io.StringIO(text).readline):
        if token.type not in (tokenize.OP, tokenize.NAME) or token.string not in _SWAPS:
            continue
        row, col = token.start
        line = lines[row - 1]
        if line.lstrip().startswith(("def ", "class ", "import ", "from ", "@", "log")):
            continue
        if token.string in ("is", "in") and line[token.end[1] :].startswith(" not"):
            continue
        new_line = line[:col] + _SWAPS[token.string] + line[token.end[1] :]
        try:  # `for x not in y` and the like: not a mutant, a syntax error
            compile("".join([*lines[: row - 1], new_line, *lines[row:]]), relative, "exec")
        except SyntaxError:
            continue
        name = f"{relative}:{row}:{col}:{token.string}->{_SWAPS[token.string]}"
        found.append(Mutant(name, relative, line, new_line, line=row))
    return found


def apply(mutant: Mutant, root: Path) -> bool:
    """Patch the copy under `root`; False when `old` is not where the mutant expects it."""
    path = root / "gpuwatch" / mutant.path
    text = path.read_text()
    if mutant.line:
        lines = text.splitlines(keepends=True)
        if len(lines) < mutant.line or lines[mutant.line - 1] != mutant.old:
            return False
        lines[mutant.line - 1] = mutant.new
        path.write_text("".join(lines))
        return True
    if text.count(mutant.old) != 1:
        return False
    path.write_text(text.replace(mutant.old, mutant.new))
    return True


def run_tests(src: Path | None) -> tuple[bool, float, bool]:
    """(tests passed, seconds, timed out) against `src` (None: the working tree)."""
    env = dict(os.environ)
    if src is not None:
        env["PYTHONPATH"] = f"{src}{os.pathsep}{env.get('PYTHONPATH', '')}"
    command = [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", *TESTS]
    started = time.monotonic()
    try:
        result = subprocess.run(
            command, cwd=ROOT, env=env, capture_output=True, timeout=TIMEOUT_S, check=False
        )
    except subprocess.TimeoutExpired:
        return False, time.monotonic() - started, True
    return result.returncode == 0, time.monotonic() - started, False


def evaluate(mutant: Mutant) -> Outcome:
    """Copy src, apply the mutant, run the tests."""
    with tempfile.TemporaryDirectory(prefix="gpuwatch-mutant-") as tmp:
        src = Path(tmp) / "src"
        shutil.copytree(ROOT / "src", src, ignore=shutil.ignore_patterns("*.egg-info"))
        if not apply(mutant, src):
            return Outcome(mutant, "stale", 0.0)
        passed, seconds, timed_out = run_tests(src)
    status = "timeout" if timed_out else ("survived" if passed else "killed")
    return Outcome(mutant, status, seconds)


def main(argv: list[str] | None = None) -> int:
    """Run every mutant; print the table and the score."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--generic", type=int, default=30, help="generic mutants to draw")
    parser.add_argument("--jobs", type=int, default=2, help="mutants run at once")
    parser.add_argument("--seed", type=int, default=8, help="draw of the generic mutants")
    parser.add_argument("--only", default="", help="run only mutants whose name contains this")
    args = parser.parse_args(argv)
    passed, seconds, _ = run_tests(None)
    if not passed:
        print("mutation: the unmutated tests fail; fix them first", file=sys.stderr)
        return 1
    print(f"baseline: {len(TESTS)} test files pass in {seconds:.1f} s")
    mutants = [*NAMED, *generic_mutants(args.generic, args.seed)]
    mutants = [m for m in mutants if args.only in m.name]
    with ThreadPoolExecutor(max_workers=max(args.jobs, 1)) as pool:
        outcomes = list(pool.map(evaluate, mutants))
    for outcome in outcomes:
        flag = "required" if outcome.mutant.required else ""
        print(f"{outcome.status:8} {outcome.seconds:6.1f} s  {outcome.mutant.name} {flag}")
    return report(outcomes)


def report(outcomes: list[Outcome]) -> int:
    """Print the score; 1 when a required mutant survived or a mutant is stale."""
    killed = [o for o in outcomes if o.status in ("killed", "timeout")]
    applied = [o for o in outcomes if o.status != "stale"]
    named = [o for o in applied if o.mutant in NAMED]
    named_killed = [o for o in named if o in killed]
    print(
        f"score: {len(killed)}/{len(applied)} killed "
        f"({len(named_killed)}/{len(named)} hand-made, "
        f"{len(killed) - len(named_killed)}/{len(applied) - len(named)} generic)"
    )
    bad = [o for o in outcomes if o.status == "stale" or (o.mutant.required and o not in killed)]
    for outcome in bad:
        print(f"FAIL: {outcome.mutant.name} {outcome.status}", file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
