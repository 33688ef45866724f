"""The cost engine: prices and verdicts in, cost, $/1M tokens and rent vs buy out.

Per tick: the ledger charges every GPU its price for the sampled time and classes that
time (busy, idle, held, unknown) as the analysis settles it; each token source's GPUs'
cost and its token count are checkpointed so that realized $/1M tokens over 1 h, 24 h
and 30 d is a subtraction: *all* the cost of the source's GPUs in the window, idle
included, divided by the tokens served in the window (prompt + generation).

Busy fraction over a window = busy seconds / (busy + idle + held seconds) settled in it;
unsettled and unknown seconds count in neither. Each GPU's 30-day busy fraction is the
utilization its rent-vs-buy position is judged at; the host's position is the sum.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from gpuwatch.cost.history import CheckpointHistory
from gpuwatch.cost.ledger import WINDOWS, CostLedger
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
        self._names: dict[str, str] = {}
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
        every_gpu = self._ledger.totals(t)  # a GPU down this tick keeps its totals in the sums
        self._names.update((g.identity.uuid, g.identity.name) for g in gpus)
        positions = self._rent_vs_buy_positions(every_gpu)
        return CostSummary(
            gpus=costs,
            tokens=self._token_costs(t, every_gpu, tokens),
            utilization_busy=host_busy_ratios(every_gpu),
            rent_vs_buy=positions,
            rent_vs_buy_host_monthly_delta_usd=(
                sum(p.monthly_delta_usd for p in positions) if positions else None
            ),
        )

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

    def _rent_vs_buy_positions(self, costs: tuple[GpuCost, ...]) -> tuple[RentVsBuyPosition, ...]:
        """Each GPU judged at its own 30-day busy fraction; GPUs with none are left out."""
        config = self._rent_vs_buy
        positions = []
        for cost in costs:
            spec = self._catalog.match_nvml_name(self._names.get(cost.uuid, ""))
            window = next((w for w in cost.windows if w.window == RENT_VS_BUY_WINDOW), None)
            busy = None if window is None else window.busy_ratio
            if spec is None or busy is None:
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
                    busy_ratio=busy,
                    owned_usd_per_year=owned,
                )
            )
        return tuple(positions)


def host_busy_ratios(costs: tuple[GpuCost, ...]) -> tuple[tuple[str, float], ...]:
    """(window, busy / judged seconds summed over the host's GPUs), windows with data."""
    ratios = []
    for name, _ in WINDOWS:
        windows = [w for c in costs for w in c.windows if w.window == name]
        judged = sum(w.judged_seconds for w in windows)
        if judged > 0:
            ratios.append((name, sum(w.busy_seconds for w in windows) / judged))
    return tuple(ratios)
