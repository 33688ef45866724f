"""The typed rows of `gpuwatch.history.rows` name exactly the tables' columns."""

from __future__ import annotations

from typing import get_args

from gpuwatch.history.rows import GpuHourRow, GpuStateRow, JobHourRow, PodHourRow, TokenHourRow
from gpuwatch.history.schema import (
    GPU_CLASS_COLUMNS,
    GPU_COLUMNS,
    JOB_COLUMNS,
    POD_COLUMNS,
    STATE_COLUMNS,
    STATE_TABLE_COLUMNS,
    TOKEN_COLUMNS,
    GpuClassColumn,
    StateColumn,
)


def test_each_row_type_has_its_tables_columns_in_order() -> None:
    assert tuple(GpuHourRow.__annotations__) == GPU_COLUMNS
    assert tuple(TokenHourRow.__annotations__) == TOKEN_COLUMNS
    assert tuple(PodHourRow.__annotations__) == POD_COLUMNS
    assert tuple(GpuStateRow.__annotations__) == STATE_TABLE_COLUMNS
    assert tuple(JobHourRow.__annotations__) == JOB_COLUMNS


def test_the_column_literals_are_the_column_tuples() -> None:
    assert get_args(GpuClassColumn) == GPU_CLASS_COLUMNS
    assert get_args(StateColumn) == STATE_COLUMNS
