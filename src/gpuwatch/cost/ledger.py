"""Per-GPU cost accrual: cost and idle cost, sample by sample.

Each sample adds price x elapsed time to the GPU's cost. Idle cost follows the waste
analysis: every second the analysis counts as idle or held (`idle_seconds_total`,
which counts retroactively from the start of the inactivity the window confirmed) is
charged at the GPU's price, so a GPU idle from its first sample has idle cost equal to
its whole cost.
"""

from __future__ import annotations

from gpuwatch.snapshot import GpuCost, GpuPrice, GpuVerdict

MAX_GAP_SECONDS = 60.0
"""A longer gap between samples (agent stopped, host asleep) is not charged."""


class _Account:
    __slots__ = (
        "cost",
        "idle_charged",
        "idle_cost",
        "idle_seconds",
        "last",
        "observed",
        "previous_t",
    )

    def __init__(self) -> None:
        self.previous_t: float | None = None
        self.idle_seconds = 0.0
        self.cost = 0.0
        self.idle_cost = 0.0
        self.idle_charged = 0.0  # idle seconds counted since this ledger started
        self.observed = 0.0
        self.last: GpuCost | None = None


class CostLedger:
    """Accrues cost for every GPU the analysis reports."""

    def __init__(self) -> None:
        self._accounts: dict[str, _Account] = {}

    def observe(
        self, t: float, verdicts: tuple[GpuVerdict, ...], prices: dict[str, GpuPrice]
    ) -> tuple[GpuCost, ...]:
        """Charge the time since each GPU's previous sample; `prices` is keyed by uuid."""
        costs = []
        for verdict in verdicts:
            account = self._accounts.setdefault(verdict.uuid, _Account())
            price = prices.get(verdict.uuid)
            dt = 0.0 if account.previous_t is None else t - account.previous_t
            if dt > MAX_GAP_SECONDS:
                dt = 0.0
            account.previous_t = t
            account.observed += dt
            # the analysis counts idle time retroactively; never charge more idle seconds
            # than this ledger observed (a sampling gap is charged to neither)
            idle_delta = min(
                max(verdict.idle_seconds_total - account.idle_seconds, 0.0),
                max(account.observed - account.idle_charged, 0.0),
            )
            account.idle_seconds = verdict.idle_seconds_total
            account.idle_charged += idle_delta
            if price is not None:
                rate = price.usd_per_hour / 3600.0
                account.cost += rate * dt
                account.idle_cost += rate * idle_delta
            account.last = GpuCost(
                gpu_index=verdict.gpu_index,
                uuid=verdict.uuid,
                price=price,
                cost_usd_total=account.cost,
                idle_cost_usd_total=account.idle_cost,
                busy_seconds_total=max(account.observed - account.idle_charged, 0.0),
                observed_seconds_total=account.observed,
            )
            costs.append(account.last)
        return tuple(costs)

    def totals(self) -> tuple[GpuCost, ...]:
        """The latest figures of every GPU seen, including GPUs down this tick."""
        return tuple(a.last for a in self._accounts.values() if a.last is not None)
