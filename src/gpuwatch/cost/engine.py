"""The cost engine: prices and verdicts in, cost, $/1M tokens and rent vs buy out.

Per tick: the ledger charges every GPU its price for the sampled time and classes that
time (busy, idle, held, unknown) as the analysis settles it. Each token source is charged
its GPUs' cost — a GPU named by n sources charges each of them 1/n of its cost, so no GPU
is charged twice — and at each of its scrapes the cost charged so far (interpolated
between ticks) and its token counts are checkpointed, so that realized $/1M tokens over
1 h, 24 h and 30 d is a subtraction: *all* the cost of the source's GPUs in the window,
idle included, divided by the tokens of one kind (`prompt`, `generation`, `all`) served
in the window. A scrape-to-scrape span counts only when every GPU of the source was
charged for all of it; a span with a sampling gap the ledger did not charge (agent
stalled, host asleep, ticks further apart than the ledger's gap limit), or across a
token increase the collector refused as implausible (`TokenTotals.baseline_seconds`), is
charged to neither cost nor tokens, so $/1M tokens is absent, never 0, until a span with tokens of
that kind was charged.

Busy fraction over a window = busy seconds / (busy + idle + held seconds) settled in it;
unsettled and unknown seconds count in neither. Each GPU's 30-day busy fraction is the
utilization its rent-vs-buy position is judged at; the host's position is the sum.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from gpuwatch.core.costs import (
    TOKEN_KINDS,
    CostSummary,
    GpuCost,
    GpuCostSplit,
    GpuPrice,
    RentVsBuyPosition,
    TokenCostWindow,
    TokenSourceCost,
)
from gpuwatch.core.jobs import JobAttribution
from gpuwatch.core.snapshot import Attribution, GpuSample
from gpuwatch.core.units import HOUR_SECONDS
from gpuwatch.core.verdict import GpuVerdict
from gpuwatch.cost.history import CheckpointHistory
from gpuwatch.cost.jobs import JobLedger
from gpuwatch.cost.ledger import WINDOWS, CostLedger, tick_cost_usd
from gpuwatch.cost.pods import PodLedger, split_gpu_cost, unattributed_split
from gpuwatch.sizing import GpuCatalog
from gpuwatch.tco import RentVsBuyConfig, model

RENT_VS_BUY_WINDOW = "30d"


CHARGED_SLACK_SECONDS = 0.01
"""A scrape-to-scrape span counts when each GPU of the source was charged for all of it
but this much (float rounding of epoch-second arithmetic, not a real gap)."""


@dataclass(frozen=True, slots=True)
class TokenTotals:
    """A token source's cumulative (reset-corrected) tokens by kind, when they were
    scraped, and the GPUs the source runs on."""

    source: str
    gpus: tuple[int | str, ...]  # GPU indexes or uuids
    prompt_tokens_total: float
    generation_tokens_total: float
    scraped_at_seconds: float | None  # epoch s of the scrape behind the totals; None: none yet
    baseline_seconds: float | None = None
    """Epoch s of the scrape the totals count from (`TokenReading.baseline_seconds`): a
    span between scrapes of two baselines (a refused, implausible increase between them)
    is charged neither cost nor tokens."""


@dataclass(frozen=True, slots=True)
class _Mark:
    """A token source at one instant: the cost charged to it (USD), the seconds each of
    its GPUs was charged for (by uuid; None when a named GPU is unknown or none is
    named), and its token totals."""

    t: float
    cost_usd: float
    charged_seconds: Mapping[str, float] | None
    prompt: float = 0.0
    generation: float = 0.0
    baseline: float | None = None  # TokenTotals.baseline_seconds

    def at(self, later: _Mark, t: float) -> _Mark:
        """The mark at `t` (clamped between the two), cost and seconds interpolated."""
        t = min(max(t, self.t), later.t)
        f = (t - self.t) / (later.t - self.t) if later.t > self.t else 1.0
        seconds = None
        if self.charged_seconds is not None and later.charged_seconds is not None:
            seconds = {
                gpu: self.charged_seconds.get(gpu, value)
                + (value - self.charged_seconds.get(gpu, value)) * f
                for gpu, value in later.charged_seconds.items()
            }
        return _Mark(t, self.cost_usd + (later.cost_usd - self.cost_usd) * f, seconds)

    def charged_in_full_since(self, start: _Mark) -> bool:
        """True when every GPU was charged for all the time from `start` to this mark."""
        span = self.t - start.t
        if span <= 0 or self.charged_seconds is None or start.charged_seconds is None:
            return False
        if self.charged_seconds.keys() != start.charged_seconds.keys():
            return False
        return all(
            value - start.charged_seconds[gpu] >= span - CHARGED_SLACK_SECONDS
            for gpu, value in self.charged_seconds.items()
        )


class _TokenAccount:
    """One token source: its marks and the checkpointed (cost, prompt, generation) of the
    spans that count."""

    def __init__(self) -> None:
        self.tick: _Mark | None = None  # at the previous tick
        self.span_start: _Mark | None = None  # at the last scrape
        self.scraped_at: float | None = None
        self.counted = (0.0, 0.0, 0.0)  # USD, prompt tokens, generation tokens
        self.history = CheckpointHistory(3)

    def observe(self, mark: _Mark, source: TokenTotals) -> None:
        """One tick; closes the open span when the source was scraped since the last."""
        previous, self.tick = self.tick, mark
        scraped = source.scraped_at_seconds
        if scraped is None or scraped == self.scraped_at:
            return
        self.scraped_at = scraped
        at = mark if previous is None else previous.at(mark, scraped)
        at = _Mark(
            at.t,
            at.cost_usd,
            at.charged_seconds,
            source.prompt_tokens_total,
            source.generation_tokens_total,
            source.baseline_seconds,
        )
        start, self.span_start = self.span_start, at
        if start is not None and start.baseline == at.baseline and at.charged_in_full_since(start):
            cost, prompt, generation = self.counted
            self.counted = (
                cost + (at.cost_usd - start.cost_usd),
                prompt + (at.prompt - start.prompt),
                generation + (at.generation - start.generation),
            )
        self.history.record(at.t, self.counted)

    def windows(self, source: str) -> list[TokenCostWindow]:
        """The source's cost per token by window and kind, once two scrapes are in."""
        windows = []
        for name, seconds in WINDOWS:
            increase = self.history.increase(seconds)
            if increase is None:
                continue
            covered, (cost, prompt, generation) = increase
            by_kind = (prompt, generation, prompt + generation)
            for kind, tokens in zip(TOKEN_KINDS, by_kind, strict=True):
                windows.append(
                    TokenCostWindow(
                        source=source,
                        window=name,
                        kind=kind,
                        covered_seconds=covered,
                        tokens=tokens,
                        cost_usd=cost,
                        usd_per_million_tokens=cost / tokens * 1e6 if tokens > 0 else None,
                    )
                )
        return windows


class CostEngine:
    """Keeps the ledger and the windowed histories of one host."""

    def __init__(self, catalog: GpuCatalog, rent_vs_buy: RentVsBuyConfig) -> None:
        self._catalog = catalog
        self._rent_vs_buy = rent_vs_buy
        self._ledger = CostLedger()
        self._names: dict[str, str] = {}
        self._token_accounts: dict[str, _TokenAccount] = {}
        self._gpu_charged: dict[str, tuple[float, float]] = {}  # uuid: (cost seen, seconds)
        self._pods = PodLedger()
        self._jobs = JobLedger()

    @property
    def ledger(self) -> CostLedger:
        """The per-GPU ledger (the history store restores its windows at start)."""
        return self._ledger

    def restore_tokens(
        self, source: str, hours: Sequence[tuple[float, float, Sequence[float]]]
    ) -> None:
        """Seed a token source's $/1M-token windows from stored hours, before its first tick.

        `hours`: (start, end, (cost USD, prompt tokens, generation tokens)) per stored
        hour, oldest first. They become checkpoints only: the live totals start from 0.
        Ignored once the source has been seen.
        """
        if source in self._token_accounts or not hours:
            return
        account = self._token_accounts[source] = _TokenAccount()
        running = (0.0, 0.0, 0.0)
        cumulative = [(hours[0][0], running)]
        for _, end, (cost, prompt, generation) in hours:
            running = (running[0] + cost, running[1] + prompt, running[2] + generation)
            cumulative.append((end, running))
        for end, values in cumulative:
            account.history.record(end, tuple(v - r for v, r in zip(values, running, strict=True)))

    def observe(
        self,
        t: float,
        gpus: tuple[GpuSample, ...],
        verdicts: tuple[GpuVerdict, ...],
        prices: dict[str, GpuPrice],
        tokens: Sequence[TokenTotals] = (),
        *,
        attribution: Attribution | None = None,
        kubernetes: bool = False,
        jobs: JobAttribution | None = None,
        slurm: bool = False,
    ) -> CostSummary:
        """One tick at epoch time `t`; `prices` is keyed by GPU uuid. With `kubernetes`
        on, each GPU's tick cost is split among pods (`attribution`: None when the pod
        view failed this tick, which charges the tick to no pod, as a stale listing does).
        With `slurm` on, it is split among the Slurm jobs (`jobs`) and totalled per account
        and per user (`gpuwatch.cost.jobs`)."""
        costs = self._ledger.observe(t, verdicts, prices)
        splits = self._split(gpus, verdicts, prices, attribution) if kubernetes else ()
        self._pods.observe(splits, attribution)
        if slurm:
            self._jobs.observe(gpus, verdicts, prices, jobs)
        every_gpu = self._ledger.totals(t)  # a GPU down this tick keeps its totals in the sums
        self._names.update((g.identity.uuid, g.identity.name) for g in gpus)
        positions = self._rent_vs_buy_positions(every_gpu)
        token_windows, token_sources = self._token_costs(t, every_gpu, tokens)
        return CostSummary(
            gpus=costs,
            tokens=token_windows,
            utilization_busy=host_busy_ratios(every_gpu),
            rent_vs_buy=positions,
            rent_vs_buy_host_monthly_delta_usd=(
                sum(p.monthly_delta_usd for p in positions) if positions else None
            ),
            token_sources=token_sources,
            splits=splits,
            pods=self._pods.pods() if kubernetes else (),
            unattributed=self._pods.unattributed() if kubernetes else (),
            slurm_accounts=self._jobs.accounts() if slurm else (),
            slurm_users=self._jobs.users() if slurm else (),
        )

    def _split(
        self,
        gpus: tuple[GpuSample, ...],
        verdicts: tuple[GpuVerdict, ...],
        prices: dict[str, GpuPrice],
        attribution: Attribution | None,
    ) -> tuple[GpuCostSplit, ...]:
        """Each sampled GPU's tick cost (as the ledger charged it) split among pods."""
        samples = {g.identity.uuid: g for g in gpus}
        holders = {} if attribution is None else {g.uuid: g for g in attribution.gpus}
        splits = []
        for verdict in verdicts:
            gpu = samples.get(verdict.uuid)
            if gpu is None:
                continue
            cost = tick_cost_usd(prices.get(verdict.uuid), verdict.tick_seconds)
            if attribution is None or attribution.stale:
                splits.append(unattributed_split(gpu, cost))
            else:
                splits.append(split_gpu_cost(gpu, holders.get(verdict.uuid), cost))
        return tuple(splits)

    def _charged_seconds(self, costs: tuple[GpuCost, ...]) -> dict[str, float]:
        """Seconds each GPU has been charged for since first seen, by uuid: its cost
        increase divided by its price (0 while it has no price)."""
        seconds = {}
        for cost in costs:
            last, total = self._gpu_charged.get(cost.uuid, (cost.cost_usd_total, 0.0))
            price = cost.price
            if price is not None and price.usd_per_hour > 0:
                total += max(cost.cost_usd_total - last, 0.0) * HOUR_SECONDS / price.usd_per_hour
            self._gpu_charged[cost.uuid] = (cost.cost_usd_total, total)
            seconds[cost.uuid] = total
        return seconds

    def _token_costs(
        self, t: float, costs: tuple[GpuCost, ...], tokens: Sequence[TokenTotals]
    ) -> tuple[tuple[TokenCostWindow, ...], tuple[TokenSourceCost, ...]]:
        """Charge each source its GPUs' cost (shared GPUs split equally), close the spans
        of sources scraped since the last tick, and compute the windows."""
        charged = self._charged_seconds(costs)
        members: dict[str, list[GpuCost]] = {}
        sharing: dict[str, int] = {}
        for source in tokens:
            wanted = set(source.gpus)
            mine = [c for c in costs if c.gpu_index in wanted or c.uuid in wanted]
            members[source.source] = mine
            for cost in mine:
                sharing[cost.uuid] = sharing.get(cost.uuid, 0) + 1
        windows: list[TokenCostWindow] = []
        totals = []
        for source in tokens:
            mine = members[source.source]
            cost_usd = sum(c.cost_usd_total / sharing[c.uuid] for c in mine)
            known = {c.gpu_index for c in mine} | {c.uuid for c in mine}
            complete = bool(source.gpus) and all(gpu in known for gpu in source.gpus)
            seconds = {c.uuid: charged[c.uuid] for c in mine} if complete else None
            account = self._token_accounts.setdefault(source.source, _TokenAccount())
            account.observe(_Mark(t, cost_usd, seconds), source)
            windows.extend(account.windows(source.source))
            counted_cost, counted_prompt, counted_generation = account.counted
            totals.append(
                TokenSourceCost(
                    source.source,
                    cost_usd,
                    counted_prompt_tokens_total=counted_prompt,
                    counted_generation_tokens_total=counted_generation,
                    counted_cost_usd_total=counted_cost,
                )
            )
        return tuple(windows), tuple(totals)

    def _rent_vs_buy_positions(self, costs: tuple[GpuCost, ...]) -> tuple[RentVsBuyPosition, ...]:
        """Each GPU judged at its own 30-day busy fraction; GPUs with none are left out."""
        positions = []
        for cost in costs:
            window = next((w for w in cost.windows if w.window == RENT_VS_BUY_WINDOW), None)
            position = rent_vs_buy_position(
                self._catalog,
                self._rent_vs_buy,
                name=self._names.get(cost.uuid, ""),
                gpu_index=cost.gpu_index,
                uuid=cost.uuid,
                busy_ratio=None if window is None else window.busy_ratio,
                price_usd_per_hour=None if cost.price is None else cost.price.usd_per_hour,
            )
            if position is not None:
                positions.append(position)
        return tuple(positions)


def rent_vs_buy_position(
    catalog: GpuCatalog,
    config: RentVsBuyConfig,
    *,
    name: str,
    gpu_index: int,
    uuid: str,
    busy_ratio: float | None,
    price_usd_per_hour: float | None,
) -> RentVsBuyPosition | None:
    """One GPU's rent-vs-buy position at `busy_ratio` (the agent's, and the local
    report's from the history): rent = [rent_vs_buy] rent_usd_per_hour, else the GPU's
    price, else its catalog rent; owned = the config's $/GPU-year with the host share.
    None when the NVML `name` is not in the catalog or there is no busy fraction."""
    spec = catalog.match_nvml_name(name)
    if spec is None or busy_ratio is None:
        return None
    rent = config.rent_usd_per_hour or (
        price_usd_per_hour if price_usd_per_hour is not None else spec.rent_usd_per_hour
    )
    owned = config.owned_usd_per_gpu_year(spec)
    inputs = config.owned_inputs_for(spec)
    return RentVsBuyPosition(
        gpu_index=gpu_index,
        uuid=uuid,
        breakeven_utilization_ratio=model.breakeven_utilization(owned, rent),
        monthly_delta_usd=model.monthly_delta_usd(rent, busy_ratio, owned),
        busy_ratio=busy_ratio,
        owned_usd_per_year=owned,
        rent_usd_per_hour=rent,
        life_years=inputs.years,
        cost_of_capital=inputs.cost_of_capital,
        ops_usd_per_year=inputs.ops_usd_per_year,
        facility=inputs.facility,
        pue_applied=inputs.applied_pue,
        hosting_usd_per_kw_month=inputs.hosting_usd_per_kw_month,
        host_share=config.host_share,
        capex_usd=inputs.capex_usd,
        it_power_watts=inputs.it_power_watts,
    )


def host_busy_ratios(costs: tuple[GpuCost, ...]) -> tuple[tuple[str, float], ...]:
    """(window, busy / judged seconds summed over the host's GPUs), windows with data."""
    ratios = []
    for name, _ in WINDOWS:
        windows = [w for c in costs for w in c.windows if w.window == name]
        judged = sum(w.judged_seconds for w in windows)
        if judged > 0:
            ratios.append((name, sum(w.busy_seconds for w in windows) / judged))
    return tuple(ratios)
