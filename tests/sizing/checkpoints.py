"""Published checkpoints against `gpuwatch size`: the ground-truth files and the docs table.

Each `tests/sizing/checkpoints/*.toml` names one published checkpoint: the config it is
sized from (vendored under `tests/sizing/configs/`, with `config_source` naming the
repository and revision), extra `gpuwatch size` arguments if any, and the published
figures with their sources, each optional:

- `parameters`: total parameters (a safetensors index, a model card, a paper);
- `active_parameters`: parameters one token uses (a mixture of experts; dense: total);
- `checkpoint_bytes`: the checkpoint's weight files (a safetensors index's `total_size`);
- `kv_bytes_per_token`: bytes one more token adds to one sequence's cache, 16-bit cache
  unless the file's `args` say otherwise (gpuwatch: the cache at 2 tokens minus at 1);
- `state_bytes_per_sequence`: a fixed per-sequence state (linear attention, SSM) that
  does not grow with the context (gpuwatch: the cache at 1 token minus one token's).

`python -m tests.sizing.checkpoints` prints the table docs/sizing.md holds between its
CHECKPOINT TABLE markers; `--write` rewrites it there.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpuwatch.cli import main as gpuwatch_main

HERE = Path(__file__).resolve().parent
TRUTH_DIR = HERE / "checkpoints"
DOC = HERE.parents[1] / "docs" / "sizing.md"
BEGIN = "<!-- BEGIN CHECKPOINT TABLE (python -m tests.sizing.checkpoints --write) -->"
END = "<!-- END CHECKPOINT TABLE -->"
TOLERANCE = 0.03
"""The largest relative error a figure may have (issue 23: within 3 %)."""

FIGURES = (
    "parameters",
    "active_parameters",
    "checkpoint_bytes",
    "kv_bytes_per_token",
    "state_bytes_per_sequence",
)


@dataclass(frozen=True)
class Published:
    """One published figure and where it comes from."""

    value: float
    source: str


@dataclass(frozen=True)
class Checkpoint:
    """One truth file."""

    slug: str
    model: str
    config: Path
    config_source: str
    args: tuple[str, ...]
    published: dict[str, Published]


def load_checkpoints() -> list[Checkpoint]:
    """Every truth file under `TRUTH_DIR`, sorted by file name."""
    checkpoints = []
    for path in sorted(TRUTH_DIR.glob("*.toml")):
        data = tomllib.loads(path.read_text("utf-8"))
        published = {
            key: Published(float(data[key]["value"]), str(data[key]["source"]))
            for key in FIGURES
            if key in data
        }
        unknown = set(data) - set(FIGURES) - {"model", "config", "config_source", "args"}
        if unknown:
            raise ValueError(f"{path.name}: unknown keys {sorted(unknown)}")
        checkpoints.append(
            Checkpoint(
                slug=path.stem,
                model=str(data["model"]),
                config=HERE / str(data["config"]),
                config_source=str(data["config_source"]),
                args=tuple(str(arg) for arg in data.get("args", ())),
                published=published,
            )
        )
    return checkpoints


def size_json(argv: list[str]) -> dict[str, Any]:
    """`gpuwatch size ARGV --json`, parsed; RuntimeError on a non-zero exit."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = gpuwatch_main(["size", *argv, "--json"])
    if code != 0:
        raise RuntimeError(f"gpuwatch size {' '.join(argv)}: exit {code}: {err.getvalue()}")
    report: dict[str, Any] = json.loads(out.getvalue())
    return report


def computed(checkpoint: Checkpoint) -> dict[str, float]:
    """gpuwatch's figure for each of `FIGURES`."""
    base = ["--config-json", str(checkpoint.config), *checkpoint.args, "--batch", "1"]
    one = size_json([*base, "--context", "1"])
    two = size_json([*base, "--context", "2"])
    moe = one.get("moe") or {}
    per_token = float(two["kv_cache_bytes"]) - float(one["kv_cache_bytes"])
    return {
        "parameters": float(one["parameters"]),
        "active_parameters": float(moe.get("active_parameters", one["parameters"])),
        "checkpoint_bytes": float(one["weights_bytes"]),
        "kv_bytes_per_token": per_token,
        "state_bytes_per_sequence": float(one["kv_cache_bytes"]) - per_token,
    }


def relative_error(figure: float, published: float) -> float:
    """(figure - published) / published; 0 when both are 0."""
    if published == 0:
        return 0.0 if figure == 0 else float("inf")
    return (figure - published) / published


def _format(key: str, value: float) -> str:
    if key in ("parameters", "active_parameters"):
        return f"{value / 1e9:,.2f} B"
    if key == "checkpoint_bytes":
        return f"{value / 1e9:,.2f} GB"
    return f"{value / 1e3:,.3f} KB"


def table() -> str:
    """The Markdown table docs/sizing.md holds: one row per checkpoint."""
    header = (
        "| model | parameters | active | checkpoint | KV per token | fixed state | sources |\n"
        "| --- | --- | --- | --- | --- | --- | --- |\n"
    )
    rows = []
    for checkpoint in load_checkpoints():
        figures = computed(checkpoint)
        cells = []
        sources = [f"config: {checkpoint.config_source}"]
        for key in FIGURES:
            published = checkpoint.published.get(key)
            if published is None:
                cells.append("")
                continue
            error = relative_error(figures[key], published.value)
            cells.append(
                f"{_format(key, figures[key])} vs {_format(key, published.value)} ({error:+.1%})"
            )
            sources.append(f"{key.replace('_', ' ')}: {published.source}")
        args = f" (`{' '.join(checkpoint.args)}`)" if checkpoint.args else ""
        model = f"{checkpoint.model}{args}".replace("|", "\\|")
        source_text = "; ".join(sources).replace("|", "\\|")
        rows.append(f"| {model} | {' | '.join(cells)} | {source_text} |\n")
    return header + "".join(rows)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else "")
    parser.add_argument("--write", action="store_true", help="rewrite docs/sizing.md's table")
    args = parser.parse_args()
    text = table()
    if not args.write:
        sys.stdout.write(text)
        return 0
    doc = DOC.read_text("utf-8")
    start, end = doc.index(BEGIN) + len(BEGIN), doc.index(END)
    DOC.write_text(doc[:start] + "\n" + text + doc[end:], "utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
