"""Every published checkpoint under tests/sizing/checkpoints/ sized within 3 %, and
docs/sizing.md's checkpoint table as `python -m tests.sizing.checkpoints` prints it."""

from __future__ import annotations

import pytest

from tests.sizing.checkpoints import (
    BEGIN,
    DOC,
    END,
    TOLERANCE,
    Checkpoint,
    computed,
    load_checkpoints,
    relative_error,
    table,
)

CHECKPOINTS = load_checkpoints()


def test_there_are_checkpoints_with_sources() -> None:
    assert CHECKPOINTS
    for checkpoint in CHECKPOINTS:
        assert checkpoint.config.is_file(), checkpoint.slug
        assert checkpoint.published, f"{checkpoint.slug}: no published figure"
        assert all(p.source.strip() for p in checkpoint.published.values()), checkpoint.slug


@pytest.mark.parametrize("checkpoint", CHECKPOINTS, ids=[c.slug for c in CHECKPOINTS])
def test_figures_within_tolerance(checkpoint: Checkpoint) -> None:
    figures = computed(checkpoint)
    for key, published in checkpoint.published.items():
        error = relative_error(figures[key], published.value)
        assert abs(error) <= TOLERANCE, (
            f"{checkpoint.slug} {key}: gpuwatch {figures[key]:,.0f} vs published "
            f"{published.value:,.0f} ({error:+.2%})"
        )


def test_docs_table_is_current() -> None:
    doc = DOC.read_text("utf-8")
    start, end = doc.index(BEGIN) + len(BEGIN), doc.index(END)
    assert doc[start:end] == "\n" + table(), "run: python -m tests.sizing.checkpoints --write"
