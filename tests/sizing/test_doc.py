"""docs/sizing.md carries the catalogs as they are in the package data."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuwatch.sizing import build_gpu_catalog, build_model_catalog
from gpuwatch.sizing.doc import BEGIN, END, main, render_catalog_tables, replace_generated

DOC = Path(__file__).resolve().parents[2] / "docs" / "sizing.md"


def test_doc_tables_match_the_catalogs() -> None:
    text = DOC.read_text("utf-8")
    assert replace_generated(text) == text, (
        "regenerate: python -m gpuwatch.sizing.doc docs/sizing.md"
    )


def test_tables_name_every_part_model_and_source() -> None:
    tables = render_catalog_tables()
    for gpu in build_gpu_catalog():
        assert f"| {gpu.id} | {gpu.tier} |" in tables
        assert f"- **{gpu.id}**" in tables
    for model in build_model_catalog():
        assert f"| {model.name} | {model.parameters:,} |" in tables
    assert (
        "| H100-SXM-80GB | datacenter | 80 | 3350 | 989 | 1979 | - | 700 | 900 | 30000 | 6.88 |"
        in (tables)
    )
    assert "| B200-180GB | datacenter | 180 | 8000 | 2250 | 4500 | 9000 | 1000 | 1800 |" in tables
    assert (
        "| llama-2-70b | 68,976,648,192 | 80 | 8192 | 64 | 8 | 128 | 28672 | 32,000 | - | - "
        "| 320 KiB |" in tables
    )
    assert "| mistral-7b | 7,241,732,096 | 32 | 4096 | 32 | 8 | 128 | 14336 | 32,000 | 4096 |" in (
        tables
    )
    assert "| 129,280 | - | 256 x 2048 + 1 shared, 8 per token; 37.6B active | 68.625 KiB |" in (
        tables
    )
    assert "| 262,208 (tied) | 1024 on 52 of 62 layers | - | 496 KiB |" in tables


def test_replace_generated_rewrites_only_between_the_markers(tmp_path: Path) -> None:
    path = tmp_path / "doc.md"
    path.write_text(f"# Title\n\n{BEGIN}\nstale\n{END}\n\nafter\n", "utf-8")
    assert main([str(path)]) == 0
    text = path.read_text("utf-8")
    assert text.startswith(f"# Title\n\n{BEGIN}\n### GPUs\n")
    assert text.endswith(f"{END}\n\nafter\n")
    assert "stale" not in text


def test_replace_generated_needs_the_markers() -> None:
    with pytest.raises(ValueError, match="markers"):
        replace_generated("# no markers\n")
