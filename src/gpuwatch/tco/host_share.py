"""The host's share of owning a GPU: server, networking, host power and colocation.

A rented cloud GPU comes with its slice of a server — CPUs, RAM, NICs, chassis, the
network fabric and the room it stands in (a p5.48xlarge is 8 H100s *and* 192 vCPUs,
2 TiB of RAM and 3.2 Tb/s of EFA). Owning only the bare card would compare unlike
things, so the owned side adds, per GPU, defaults by catalog tier:

- `server_ratio` x the GPU's price: the rest of the server, bought with it;
- `networking_ratio` x the GPU's price: switches, NICs' share of the fabric, cables;
- `power_ratio` x the GPU's power: CPUs, fans, NICs and drives drawing beside it;
- `colocation_usd_per_kw_month` x (GPU + host kW): the room (rent, cooling plant);
- `facility`: where such a GPU usually stands, "colocation" (datacenter parts: the fee
  covers cooling and power delivery, so PUE is not applied again) or "owned" (an office
  or room of your own: energy x PUE, no fee).

Every figure is overridable in `[rent_vs_buy]`; `docs/tco.md` shows the arithmetic.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal


@dataclass(frozen=True, slots=True)
class HostShareDefaults:
    """Per-GPU host share as ratios of the GPU's own price and power, with sources."""

    server_ratio: float
    networking_ratio: float
    power_ratio: float
    colocation_usd_per_kw_month: float
    source: str
    facility: Literal["colocation", "owned"] = "colocation"


DATACENTER = HostShareDefaults(
    server_ratio=0.32,
    networking_ratio=0.10,
    power_ratio=0.82,
    colocation_usd_per_kw_month=150.0,
    source=(
        "server: an HGX H100 8-GPU server quoted at $317k with its InfiniBand NICs "
        "(Thinkmate quotation, Aug 2024) less 8 x the catalog's $30k GPU = $77k, 0.32 of "
        "the GPUs' price; networking: transceivers, cabling and top-of-rack switches add "
        "10-15 % to the hardware capex (industry TCO guides), low end taken; power: an "
        "NVIDIA DGX H100 draws up to 10.2 kW for 8 x 700 W GPUs, so the host draws "
        "4.6 kW = 0.82 x the GPUs' power; colocation: $150-250 per kW-month for "
        "high-density space, low end taken"
    ),
)

WORKSTATION = HostShareDefaults(
    server_ratio=0.5,
    networking_ratio=0.0,
    power_ratio=0.3,
    colocation_usd_per_kw_month=0.0,
    source=(
        "estimate: a workstation or desktop host (CPU, RAM, board, PSU, case) costs about "
        "half of the card it carries and draws ~30 % of its power; it stands in an office "
        "(no colocation, no fabric)"
    ),
    facility="owned",
)

BY_TIER = {"datacenter": DATACENTER, "workstation": WORKSTATION, "consumer": WORKSTATION}
"""Host share defaults by the sizing catalog's tier."""


def defaults_for_tier(tier: str) -> HostShareDefaults:
    """The host share defaults of a catalog tier (a datacenter host when unknown)."""
    return BY_TIER.get(tier, DATACENTER)
