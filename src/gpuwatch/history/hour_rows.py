"""One hour's row of a GPU, a token source or a pod, as the rollup accumulates it (pure):
the stored row it started from (`base`) plus what this run added, written whole and
absolute by `row()` (`gpuwatch.history.rollup` says which figure is summed how).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, cast

from gpuwatch.analysis.activity import dram_bandwidth_ratio_of
from gpuwatch.analysis.rolling import QuantileSketch
from gpuwatch.core.costs import HourTotals
from gpuwatch.core.snapshot import GpuSample
from gpuwatch.core.verdict import GPU_STATES, GpuVerdict
from gpuwatch.history.rows import GpuHourRow, PodHourRow, TokenHourRow
from gpuwatch.history.schema import GPU_CLASS_COLUMNS, STATE_COLUMNS

__all__ = ["GpuHour", "PodHour", "TokenHour"]

_ADDITIVE_GPU = (
    "observed_seconds",
    "cost_usd",
    *GPU_CLASS_COLUMNS,
    *STATE_COLUMNS,
    "memory_byte_seconds",
    "memory_seconds",
    "activity_seconds",
    "activity_sampled_seconds",
    "kernel_busy_seconds",
    "kernel_busy_sampled_seconds",
)
_STATE_COLUMN = dict(zip(GPU_STATES, STATE_COLUMNS, strict=True))


@dataclass(slots=True)
class GpuHour:
    """A GPU-hour: the stored row, this run's sums, peaks and need, and its pods."""

    base: dict[str, Any]
    run: dict[str, float] = field(default_factory=dict)  # this run's additive sums
    ledger: HourTotals | None = None
    latest: dict[str, Any] = field(default_factory=dict)
    energy: float = 0.0
    energy_seen: bool = False
    peak: float | None = None
    dram_peak: float | None = None
    need_basis: str | None = None
    need_peak: float | None = None
    need_sketch: QuantileSketch = field(default_factory=QuantileSketch)
    pods: set[str] = field(default_factory=set)
    dra: bool = False  # a pod held the GPU through a gpu.nvidia.com claim this run

    def add_tick(self, gpu: GpuSample, verdict: GpuVerdict | None) -> None:
        """One snapshot's sample of the GPU and its verdict: seconds by state, activity,
        kernel-busy time, memory and DRAM bandwidth, and the need."""
        dt = 0.0 if verdict is None else verdict.tick_seconds
        if verdict is not None:
            self.add_need(verdict.need_basis, verdict.need_sample_bytes, dt)
        if verdict is not None and dt > 0:
            column = _STATE_COLUMN.get(verdict.state)
            if column is not None:
                self.run[column] = self.run.get(column, 0.0) + dt
            activity = verdict.activity_mean_ratio
            if activity is not None:
                self.run["activity_seconds"] = self.run.get("activity_seconds", 0.0) + activity * dt
                self.run["activity_sampled_seconds"] = (
                    self.run.get("activity_sampled_seconds", 0.0) + dt
                )
            busy = gpu.utilization_ratio  # kernel-busy time: adds up when time-sliced
            if busy is not None:
                self.run["kernel_busy_seconds"] = (
                    self.run.get("kernel_busy_seconds", 0.0) + busy * dt
                )
                self.run["kernel_busy_sampled_seconds"] = (
                    self.run.get("kernel_busy_sampled_seconds", 0.0) + dt
                )
        if gpu.memory_used_bytes is not None:
            used = float(gpu.memory_used_bytes)
            self.peak = used if self.peak is None else max(self.peak, used)
            if dt > 0:
                self.run["memory_byte_seconds"] = (
                    self.run.get("memory_byte_seconds", 0.0) + used * dt
                )
                self.run["memory_seconds"] = self.run.get("memory_seconds", 0.0) + dt
        dram = dram_bandwidth_ratio_of(gpu)
        # as the analysis: not a run's first tick (GPM has no interval yet there, and
        # memory-busy time stands in for the DRAM bandwidth)
        if dram is not None and dt > 0:
            self.dram_peak = dram if self.dram_peak is None else max(self.dram_peak, dram)

    def add_need(self, basis: str | None, need: int | None, dt: float) -> None:
        """One tick's need on `basis` (None: no need); a new basis starts the hour's
        need figures over."""
        if basis is None:
            return
        if basis != self.need_basis:
            self.need_basis = basis
            self.need_peak = None
            self.need_sketch = QuantileSketch()
        if need is None:
            return
        self.need_peak = need if self.need_peak is None else max(self.need_peak, need)
        self.need_sketch.add(float(need), dt)

    def row(self) -> GpuHourRow:
        row = dict(self.base)
        row.update((k, v) for k, v in self.latest.items() if v is not None or k not in row)
        for column in _ADDITIVE_GPU:
            row[column] = (row.get(column) or 0.0) + self.run.get(column, 0.0)
        ledger = self.ledger
        if ledger is not None:
            row["observed_seconds"] += ledger.observed_seconds
            row["cost_usd"] += ledger.cost_usd
            for column, value in zip(
                GPU_CLASS_COLUMNS, (*ledger.class_seconds, *ledger.class_cost_usd), strict=True
            ):
                row[column] += value
            row["last_seconds"] = max(row.get("last_seconds") or 0.0, ledger.last_tick_seconds)
            first = ledger.first_span_seconds
            if first is not None:
                stored = row.get("first_seconds")
                row["first_seconds"] = first if stored is None else min(stored, first)
        if self.energy_seen:
            row["energy_joules"] = (row.get("energy_joules") or 0.0) + self.energy
        for column, peak in (("memory_peak_bytes", self.peak), ("dram_peak_ratio", self.dram_peak)):
            if peak is not None:
                stored = row.get(column)
                row[column] = peak if stored is None else max(stored, peak)
        self._need_columns(row)
        if self.pods or row.get("pods") is None:
            stored_pods = json.loads(row["pods"]) if row.get("pods") else []
            row["pods"] = json.dumps(sorted({*stored_pods, *self.pods}), ensure_ascii=False)
        if self.dra or row.get("dra") is None:
            row["dra"] = int(self.dra or bool(row.get("dra")))
        return cast("GpuHourRow", row)  # the stored row, or a new hour's every column

    def _need_columns(self, row: dict[str, Any]) -> None:
        """need_basis, need_bytes and need_p95_bytes: this run's on top of the stored
        row's when both have the same basis, else this run's alone."""
        if self.need_basis is None:
            return
        same = row.get("need_basis") == self.need_basis
        row["need_basis"] = self.need_basis
        p95 = self.need_sketch.quantile(0.95)
        if p95 is not None and self.need_peak is not None:
            p95 = min(p95, self.need_peak)  # the sketch's bin edge is within 1 % above
        for column, value in (("need_bytes", self.need_peak), ("need_p95_bytes", p95)):
            stored = row.get(column) if same else None
            row[column] = (
                stored if value is None else value if stored is None else max(stored, value)
            )


@dataclass(slots=True)
class TokenHour:
    """A token-source hour: the stored row plus this run's token and cost increases."""

    base: dict[str, Any]
    prompt: float = 0.0
    generation: float = 0.0
    cost: float = 0.0
    charged: tuple[float, float, float] = (0.0, 0.0, 0.0)  # prompt, generation, USD
    host: str = ""
    last: float = 0.0

    def row(self) -> TokenHourRow:
        base = self.base
        charged = {
            column: (base.get(column) or 0.0) + value
            for column, value in zip(
                ("charged_prompt_tokens", "charged_generation_tokens", "charged_cost_usd"),
                self.charged,
                strict=True,
            )
        }
        return {
            "charged_prompt_tokens": charged["charged_prompt_tokens"],
            "charged_generation_tokens": charged["charged_generation_tokens"],
            "charged_cost_usd": charged["charged_cost_usd"],
            "source": base["source"],
            "hour_start": base["hour_start"],
            "host": self.host or base.get("host", ""),
            "prompt_tokens": (base.get("prompt_tokens") or 0.0) + self.prompt,
            "generation_tokens": (base.get("generation_tokens") or 0.0) + self.generation,
            "cost_usd": (base.get("cost_usd") or 0.0) + self.cost,
            "last_seconds": max(base.get("last_seconds") or 0.0, self.last),
        }


@dataclass(slots=True)
class PodHour:
    """A pod-hour: the stored row plus this run's cost and idle-cost increases."""

    base: dict[str, Any]
    cost: float = 0.0
    idle: float = 0.0
    host: str = ""
    last: float = 0.0

    def row(self) -> PodHourRow:
        base = self.base
        return {
            "namespace": base["namespace"],
            "pod": base["pod"],
            "hour_start": base["hour_start"],
            "host": self.host or base.get("host", ""),
            "cost_usd": (base.get("cost_usd") or 0.0) + self.cost,
            "idle_cost_usd": (base.get("idle_cost_usd") or 0.0) + self.idle,
            "last_seconds": max(base.get("last_seconds") or 0.0, self.last),
        }
