"""The cost engine: prices and verdicts in, cost, $/1M tokens and rent vs buy out.

Per tick: the ledger charges every GPU its price for the elapsed time (idle and held
seconds also to its idle cost); each token source's GPUs' cost and its token count are
checkpointed so that realized $/1M tokens over 1 h, 24 h and 30 d is a subtraction:
*all* the cost of the source's GPUs in the window, idle included, divided by the tokens
served in the window (prompt + generation). The host's busy fraction over the same
windows is the measured utilization that rent vs buy compares with its break-even.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from gpuwatch.cost.history import CheckpointHistory
from gpuwatch.cost.ledger import CostLedger
from gpuwatch.sizing import GpuCatalog
from gpuwatch.snapshot import (
    CostSummary,
    GpuCost,
    GpuPrice,
    GpuSample,
    GpuVerdict,
    RentVsBuyPosition,
    TokenCostWindow,
)
from gpuwatch.tco import RentVsBuyConfig, model

WINDOWS: tuple[tuple[str, float], ...] = (("1h", 3600.0), ("24h", 86400.0), ("30d", 30 * 86400.0))
RENT_VS_BUY_WINDOW = "30d"


@dataclass(frozen=True, slots=True)
class TokenTotals:
    """A token source's cumulative (reset-corrected) tokens and the GPUs it runs on."""

    source: str
    gpus: tuple[int | str, ...]  # GPU indexes or uuids
    tokens_total: float


class CostEngine:
    """Keeps the ledger and the windowed histories of one host."""

    def __init__(self, catalog: GpuCatalog, rent_vs_buy: RentVsBuyConfig) -> None:
        self._catalog = catalog
        self._rent_vs_buy = rent_vs_buy
        self._ledger = CostLedger()
        self._utilization = CheckpointHistory(2)
        self._sources: dict[str, CheckpointHistory] = {}

    def observe(
        self,
        t: float,
        gpus: tuple[GpuSample, ...],
        verdicts: tuple[GpuVerdict, ...],
        prices: dict[str, GpuPrice],
        tokens: Sequence[TokenTotals] = (),
    ) -> CostSummary:
        """One tick at epoch time `t`; `prices` is keyed by GPU uuid."""
        costs = self._ledger.observe(t, verdicts, prices)
        every_gpu = self._ledger.totals()  # a GPU down this tick keeps its totals in the sums
        busy = sum(c.busy_seconds_total for c in every_gpu)
        observed = sum(c.observed_seconds_total for c in every_gpu)
        self._utilization.record(t, (busy, observed))
        utilization = tuple(
            (name, ratio)
            for name, seconds in WINDOWS
            if (ratio := self._busy_ratio(seconds)) is not None
        )
        return CostSummary(
            gpus=costs,
            tokens=self._token_costs(t, every_gpu, tokens),
            utilization_busy=utilization,
            rent_vs_buy=self._rent_vs_buy_positions(gpus, costs, dict(utilization)),
        )

    def _busy_ratio(self, window: float) -> float | None:
        increase = self._utilization.increase(window)
        if increase is None:
            return None
        _, (busy, observed) = increase
        return None if observed <= 0 else min(max(busy / observed, 0.0), 1.0)

    def _token_costs(
        self, t: float, costs: tuple[GpuCost, ...], tokens: Sequence[TokenTotals]
    ) -> tuple[TokenCostWindow, ...]:
        windows = []
        for source in tokens:
            wanted = set(source.gpus)
            cost = sum(c.cost_usd_total for c in costs if c.gpu_index in wanted or c.uuid in wanted)
            history = self._sources.setdefault(source.source, CheckpointHistory(2))
            history.record(t, (cost, source.tokens_total))
            for name, seconds in WINDOWS:
                increase = history.increase(seconds)
                if increase is None:
                    continue
                covered, (cost_delta, token_delta) = increase
                windows.append(
                    TokenCostWindow(
                        source=source.source,
                        window=name,
                        covered_seconds=covered,
                        tokens=token_delta,
                        cost_usd=cost_delta,
                        usd_per_million_tokens=(
                            cost_delta / token_delta * 1e6 if token_delta > 0 else None
                        ),
                    )
                )
        return tuple(windows)

    def _rent_vs_buy_positions(
        self,
        gpus: tuple[GpuSample, ...],
        costs: tuple[GpuCost, ...],
        utilization: dict[str, float],
    ) -> tuple[RentVsBuyPosition, ...]:
        busy = utilization.get(RENT_VS_BUY_WINDOW)
        if busy is None:
            return ()
        names = {g.identity.uuid: g.identity.name for g in gpus}
        config = self._rent_vs_buy
        positions = []
        for cost in costs:
            spec = self._catalog.match_nvml_name(names.get(cost.uuid, ""))
            if spec is None:
                continue
            rent = config.rent_usd_per_hour or (
                cost.price.usd_per_hour if cost.price is not None else spec.rent_usd_per_hour
            )
            owned = config.owned_usd_per_gpu_year(spec)
            positions.append(
                RentVsBuyPosition(
                    gpu_index=cost.gpu_index,
                    uuid=cost.uuid,
                    breakeven_utilization_ratio=model.breakeven_utilization(owned, rent),
                    monthly_delta_usd=model.monthly_delta_usd(rent, busy, owned),
                )
            )
        return tuple(positions)
