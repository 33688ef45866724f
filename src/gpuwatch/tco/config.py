"""The `[rent_vs_buy]` config section, and the `TcoInputs` it gives for a catalog GPU.

Figures left unset come from the sizing catalog entry of the GPU being judged: its
purchase price, its on-demand rent and its TDP, plus the host's share of owning it
(server, networking, host power, colocation: `gpuwatch.tco.host_share`, by tier).
The life is explicit (3 years by default) because it is the most disputed input: 3-year
depreciation against the 5-6 years datacenter GPUs are often kept. `gpuwatch tco`,
`gpuwatch size`'s owned column and the agent all price a catalog GPU through this
class, so the same section gives the same break-even everywhere. This module must
not import `gpuwatch.config`.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from gpuwatch.sizing.gpus import GpuSpec
from gpuwatch.tco import model
from gpuwatch.tco.host_share import DATACENTER, defaults_for_tier
from gpuwatch.tco.model import (
    DEFAULT_COST_OF_CAPITAL,
    DEFAULT_HOSTING_USD_PER_KW_MONTH,
    DEFAULT_OPS_USD_PER_YEAR,
    DEFAULT_PUE,
    DEFAULT_USD_PER_KWH,
    Facility,
    TcoInputs,
)

DEFAULT_LIFE_YEARS = 3.0
"""Amortization life, years: seed 001's cost table and break-even example."""


class RentVsBuyConfig(BaseModel):
    """[rent_vs_buy]: what owning a GPU costs, for the break-even against renting it.

    `purchase_usd`, `rent_usd_per_hour` and `power_watts` (W) default to the sizing
    catalog's figures for the GPU (purchase price, on-demand rent, TDP).
    `life_years`: amortization life and period compared. `cost_of_capital`: the yearly
    rate the purchase is financed at, 0-1 (monthly payments over the life).
    `usd_per_kwh`: electricity. `facility`: "colocation" (a $/kW-month fee covering
    cooling and power delivery: PUE not applied) or "owned" (energy x `pue`); unset, by
    the GPU's tier (datacenter: colocation; workstation, consumer: owned).
    `pue`: facility watts per IT watt. `hosting_usd_per_kw_month`: the fee per kW of
    IT load (GPU and host); unset, the tier's colocation fee in colocation, 0 in a room
    of your own. `ops_usd_per_year_per_gpu`: operations, support and spares per GPU.
    The host's share per GPU — `host_server_usd`, `host_networking_usd`,
    `host_power_watts` — defaults to the catalog tier's figures
    (`gpuwatch.tco.host_share`); `host_share = false` leaves the host out (a bare card
    against a bare card, in the same facility).
    """

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    purchase_usd: float | None = Field(default=None, ge=0.0, allow_inf_nan=False)
    rent_usd_per_hour: float | None = Field(default=None, gt=0.0, allow_inf_nan=False)
    life_years: float = Field(default=DEFAULT_LIFE_YEARS, gt=0.0, le=30.0)
    cost_of_capital: float = Field(default=DEFAULT_COST_OF_CAPITAL, ge=0.0, le=1.0)
    facility: Facility | None = None
    usd_per_kwh: float = Field(default=DEFAULT_USD_PER_KWH, ge=0.0, le=10.0)
    pue: float = Field(default=DEFAULT_PUE, ge=1.0, le=5.0)
    hosting_usd_per_kw_month: float | None = Field(default=None, ge=0.0, allow_inf_nan=False)
    host_share: bool = True
    host_server_usd: float | None = Field(default=None, ge=0.0, allow_inf_nan=False)
    host_networking_usd: float | None = Field(default=None, ge=0.0, allow_inf_nan=False)
    host_power_watts: float | None = Field(default=None, ge=0.0, le=10_000.0)
    ops_usd_per_year_per_gpu: float = Field(
        default=DEFAULT_OPS_USD_PER_YEAR, ge=0.0, allow_inf_nan=False
    )
    power_watts: float | None = Field(default=None, ge=0.0, le=10_000.0)

    def purchase_usd_for(self, gpu: GpuSpec) -> float:
        """Price of one `gpu`, $: this section's, else the catalog's."""
        return gpu.purchase_usd if self.purchase_usd is None else self.purchase_usd

    def rent_usd_per_hour_for(self, gpu: GpuSpec) -> float:
        """Rent of one `gpu`, $/h: this section's, else the catalog's on-demand price."""
        return gpu.rent_usd_per_hour if self.rent_usd_per_hour is None else self.rent_usd_per_hour

    def power_watts_for(self, gpu: GpuSpec) -> float:
        """Power drawn by one owned `gpu`, W: this section's, else the catalog's TDP."""
        return gpu.tdp_watts if self.power_watts is None else self.power_watts

    def host_capex_usd_for(self, gpu: GpuSpec) -> float:
        """The host's server and networking per `gpu`, $ (0 with `host_share` off)."""
        if not self.host_share:
            return 0.0
        share = defaults_for_tier(gpu.tier)
        purchase = self.purchase_usd_for(gpu)
        server = (
            share.server_ratio * purchase if self.host_server_usd is None else self.host_server_usd
        )
        networking = (
            share.networking_ratio * purchase
            if self.host_networking_usd is None
            else self.host_networking_usd
        )
        return server + networking

    def host_power_watts_for(self, gpu: GpuSpec) -> float:
        """Power the host draws per `gpu` beside it, W (0 with `host_share` off)."""
        if not self.host_share:
            return 0.0
        if self.host_power_watts is not None:
            return self.host_power_watts
        return defaults_for_tier(gpu.tier).power_ratio * self.power_watts_for(gpu)

    def facility_for(self, gpu: GpuSpec) -> Facility:
        """Where the owned `gpu` stands: this section's, else its tier's usual place."""
        return defaults_for_tier(gpu.tier).facility if self.facility is None else self.facility

    def hosting_usd_per_kw_month_for(self, gpu: GpuSpec) -> float:
        """The fee per kW of IT load, $/kW-month: this section's, else in colocation the
        tier's colocation fee (a datacenter's for a tier with none), else 0."""
        if self.hosting_usd_per_kw_month is not None:
            return self.hosting_usd_per_kw_month
        if self.facility_for(gpu) != "colocation":
            return DEFAULT_HOSTING_USD_PER_KW_MONTH
        fee = defaults_for_tier(gpu.tier).colocation_usd_per_kw_month
        return fee if fee > 0 else DATACENTER.colocation_usd_per_kw_month

    def owned_usd_per_gpu_year(self, gpu: GpuSpec) -> float:
        """Cost of owning one `gpu` with its host share, $/year, busy or not."""
        return model.owned_usd_per_gpu_year(
            self.purchase_usd_for(gpu) + self.host_capex_usd_for(gpu),
            self.life_years,
            self.power_watts_for(gpu) + self.host_power_watts_for(gpu),
            usd_per_kwh=self.usd_per_kwh,
            pue=self.pue,
            hosting_usd_per_kw_month=self.hosting_usd_per_kw_month_for(gpu),
            ops_usd_per_year=self.ops_usd_per_year_per_gpu,
            cost_of_capital=self.cost_of_capital,
            facility=self.facility_for(gpu),
        )

    def breakeven_utilization(self, gpu: GpuSpec) -> float:
        """Busy fraction above which owning `gpu` is cheaper than renting it (a ratio)."""
        return model.breakeven_utilization(
            self.owned_usd_per_gpu_year(gpu), self.rent_usd_per_hour_for(gpu)
        )

    def monthly_delta_usd(self, gpu: GpuSpec, utilization: float) -> float:
        """Monthly rent of `gpu` at `utilization` [0, 1] minus its monthly owned cost, $.

        Positive when buying would be cheaper than renting the hours used.
        """
        return model.monthly_delta_usd(
            self.rent_usd_per_hour_for(gpu), utilization, self.owned_usd_per_gpu_year(gpu)
        )

    def owned_inputs_for(self, gpu: GpuSpec) -> TcoInputs:
        """Every figure owning `gpu` costs, resolved (what the agent exports beside its
        position and a report prints); the utilization in it (1.0) is not used by the
        owned side: `evaluate_tco` it only through `inputs_for`."""
        return self.inputs_for(gpu, 1.0)

    def inputs_for(
        self, gpu: GpuSpec, utilization: float, tokens_per_second: float | None = None
    ) -> TcoInputs:
        """`TcoInputs` for one `gpu` busy `utilization` (0, 1] of the time (ValueError else).

        Every figure the owned cost uses, resolved: `evaluate_tco` of it gives the same
        `owned_usd_per_gpu_year` as `owned_usd_per_gpu_year(gpu)`.
        """
        return TcoInputs(
            purchase_usd=self.purchase_usd_for(gpu),
            rent_usd_per_hour=self.rent_usd_per_hour_for(gpu),
            utilization=utilization,
            years=self.life_years,
            power_watts=self.power_watts_for(gpu),
            usd_per_kwh=self.usd_per_kwh,
            pue=self.pue,
            hosting_usd_per_kw_month=self.hosting_usd_per_kw_month_for(gpu),
            ops_usd_per_year=self.ops_usd_per_year_per_gpu,
            tokens_per_second=tokens_per_second,
            cost_of_capital=self.cost_of_capital,
            facility=self.facility_for(gpu),
            host_capex_usd=self.host_capex_usd_for(gpu),
            host_power_watts=self.host_power_watts_for(gpu),
        )
