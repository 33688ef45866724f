"""At start: seed the analysis and the cost engine from the stored hours and states.

- the ledger's 1 h / 24 h / 30 d windows get one checkpoint per stored GPU-hour of the
  last 30 days (settled seconds and cost by class), so busy ratios and idle cost over
  the windows continue; the `*_total` counters on /metrics still start from 0;
- each token source's $/1M-token windows get one checkpoint per stored hour (cost
  charged to it, prompt and generation tokens);
- each GPU's overprovisioning lookback gets the stored hours' memory and DRAM peaks, and
  the hours' measured need (its maximum and p95, for hours whose need basis was
  `measured`) (`AnalysisEngine.restore_peaks`), so a recommendation after a restart still
  sizes against the peak seen before it, measured from the server's KV cache or not;
- each GPU's analysis state (idle, held, busy, underutilized, since when, how long
  inactive) resumes when the previous run sampled it less than one analysis window
  before this start; after a longer gap the GPU starts `pending` again.

The hooks it calls (`GpuStateTracker.restore`, `CostLedger.restore_windows`,
`CostEngine.restore_tokens`) only seed; they do nothing once a GPU or source was sampled.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import groupby

from gpuwatch.analysis.engine import AnalysisEngine, StoredPeaks
from gpuwatch.core.units import HOUR_SECONDS
from gpuwatch.cost.engine import CostEngine
from gpuwatch.cost.ledger import WINDOWS
from gpuwatch.history.rows import GpuHourRow, TokenHourRow
from gpuwatch.history.schema import GPU_CLASS_COLUMNS
from gpuwatch.history.store import HistoryStore

LONGEST_WINDOW_SECONDS = max(seconds for _, seconds in WINDOWS)


@dataclass(frozen=True, slots=True)
class Restored:
    """What the restore seeded (logged once at start)."""

    gpus_with_windows: int
    token_sources: int
    states: int


def restore(
    store: HistoryStore,
    analysis: AnalysisEngine,
    cost: CostEngine,
    now: float,
    window_seconds: float,
) -> Restored:
    """Seed `analysis` and `cost` from `store` as of epoch time `now`, before any sample."""
    since = now - LONGEST_WINDOW_SECONDS - HOUR_SECONDS
    gpu_rows = [r for r in store.gpu_hours(since) if r["hour_start"] <= now]
    names = {str(r["uuid"]): str(r["name"]) for r in gpu_rows}
    gpus = 0
    for uuid, rows in groupby(gpu_rows, key=lambda r: str(r["uuid"])):
        hours = [
            (
                float(r["hour_start"]),
                _end(r),
                [float(r[c] or 0.0) for c in GPU_CLASS_COLUMNS],
                StoredPeaks(
                    float(r["hour_start"]),
                    _end(r),
                    _float(r["memory_peak_bytes"]),
                    _float(r["dram_peak_ratio"]),
                    _float(r.get("need_bytes")),
                    _float(r.get("need_p95_bytes")),
                    r.get("need_basis"),
                ),
            )
            for r in rows
        ]
        cost.ledger.restore_windows(
            uuid, [(start, end, figures) for start, end, figures, _ in hours]
        )
        analysis.restore_peaks(uuid, names[uuid], [peaks for *_, peaks in hours])
        gpus += 1
    token_rows = [r for r in store.token_hours(since) if r["hour_start"] <= now]
    sources = 0
    for source, source_rows in groupby(token_rows, key=lambda r: str(r["source"])):
        marks = [
            (
                float(r["hour_start"]),
                _end(r),
                (
                    float(r["cost_usd"] or 0.0),
                    float(r["prompt_tokens"] or 0.0),
                    float(r["generation_tokens"] or 0.0),
                ),
            )
            for r in source_rows
        ]
        cost.restore_tokens(source, marks)
        sources += 1
    states = 0
    for row in store.states():
        last = float(row["last_seconds"])
        if not 0.0 <= now - last <= window_seconds or row["state"] == "pending":
            continue
        tracker = analysis.tracker(str(row["uuid"]), str(row["name"]))
        tracker.restore(
            last,
            state=str(row["state"]),
            state_since=float(row["state_since_seconds"]),
            inactive_since=_float(row["inactive_since_seconds"]),
            inactive_seconds=float(row["inactive_seconds"]),
            activity_mean=_float(row["activity_mean_ratio"]),
        )
        states += 1
    return Restored(gpus, sources, states)


def _end(row: GpuHourRow | TokenHourRow) -> float:
    """When a stored hour's figures end: its newest tick, within the hour."""
    start = float(row["hour_start"])
    return min(max(float(row["last_seconds"]), start), start + HOUR_SECONDS)


def _float(value: object) -> float | None:
    return None if value is None else float(value)  # type: ignore[arg-type]
