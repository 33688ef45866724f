"""Verdicts for cost tests, made by the real state tracker (no hand-made verdicts)."""

from __future__ import annotations

from gpuwatch.analysis.states import GpuStateTracker, StateSettings
from gpuwatch.core.verdict import GpuVerdict

WINDOW = 1800.0


class Gpu:
    """One GPU's analysis (the real state tracker) turned into verdicts for the ledger."""

    def __init__(self, uuid: str = "GPU-a", index: int = 0) -> None:
        self.uuid = uuid
        self.index = index
        self.tracker = GpuStateTracker(StateSettings(window_seconds=WINDOW))

    def verdict(self, t: float, activity: float | None) -> GpuVerdict:
        tr = self.tracker
        tr.observe(t, activity, None, False)
        return GpuVerdict(
            gpu_index=self.index,
            uuid=self.uuid,
            state=tr.state,
            state_since_seconds=tr.state_since,
            inactive_since_seconds=tr.inactive_since,
            idle_seconds_total=tr.idle_seconds_total,
            activity_mean_ratio=tr.activity_mean,
            tick_seconds=tr.tick_seconds,
            tick_class=tr.tick_class,
            settlements=tr.settlements,
        )


class Fleet:
    """One `Gpu` per index (uuid `GPU-<index>`), all active unless told otherwise."""

    def __init__(self) -> None:
        self._gpus: dict[int, Gpu] = {}

    def verdicts(
        self, t: float, indexes: tuple[int, ...] = (0,), activity: float | None = 0.9
    ) -> tuple[GpuVerdict, ...]:
        out = []
        for index in indexes:
            gpu = self._gpus.setdefault(index, Gpu(f"GPU-{index}", index))
            out.append(gpu.verdict(t, activity))
        return tuple(out)
