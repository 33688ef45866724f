"""What the plan may buy: the parts the account can get, at prices it can be charged.

The catalog's reference rents mix cloud list prices, marketplace prices and estimates
(`gpus.toml` names each rent's source: "estimate: ..." or "..., marketplace: ..."). A
plan is something a team acts on, so by default it chooses only parts it can buy:

- the models the fleet already runs, at what the fleet pays (`FLEET_PRICE_SOURCE`);
- with AWS billing configured (`[billing] region`, `instance_type` or `pricing_api`),
  the rule ``aws:<region>``: the parts of the EC2 GPU instance families
  (`AWS_GPU_FAMILIES`, the agent's candidate rule), at the list price of the instance
  type the catalog's rent comes from (`AWS_OFFERS`), or at a `[[billing.static]]`
  price for that instance type;
- otherwise ``priced``: every part whose rent is a provider's list price or set in the
  config (never an estimate, never a marketplace price).

A part named in `--candidates` or `[analysis] candidate_gpus` is used whatever its
price's kind, and labelled where the plan uses it ("estimated price", "marketplace
price"). A part sold only as a multi-GPU instance (8 H100 in a p5.48xlarge) is bought by
the node: `whole_nodes` counts the GPUs a plan's new instances leave spare.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from gpuwatch.billing.aws_pricing import AWS_GPU_FAMILIES
from gpuwatch.billing.config import BillingConfig
from gpuwatch.core.text import counted
from gpuwatch.plan.model import Plan, WorkloadNeed
from gpuwatch.sizing import GpuCatalog, GpuCatalogEntry, GpuSpec
from gpuwatch.sizing.gpus import CONFIG_SOURCE

PriceKind = Literal["fleet", "billing", "config", "list", "estimate", "marketplace"]
"""Where a part's $/h comes from: what the fleet pays, the account's own billing price,
the agent config, a provider's list price, an estimate, or a marketplace's price."""

UNBUYABLE: frozenset[PriceKind] = frozenset({"estimate", "marketplace"})
"""Price kinds the plan never chooses unless a part is named as a candidate."""

_KIND_PHRASE: Mapping[PriceKind, str] = {
    "estimate": "an estimated price",
    "marketplace": "a marketplace price",
}

FLEET_PRICE_SOURCE = "the fleet's own price: the median $/GPU-h its GPUs of this model paid"
BILLING_PRICE_SOURCE = "[[billing.static]] price of {instance_type} / {gpus} GPUs"

AWS_OFFERS: Mapping[str, tuple[str, int]] = {
    "H100-SXM-80GB": ("p5.48xlarge", 8),
    "H200-141GB": ("p5en.48xlarge", 8),
    "B200-180GB": ("p6-b200.48xlarge", 8),
    "A100-SXM-80GB": ("p4de.24xlarge", 8),
    "A100-SXM-40GB": ("p4d.24xlarge", 8),
    "V100-SXM2-32GB": ("p3dn.24xlarge", 8),
    "V100-SXM2-16GB": ("p3.2xlarge", 1),
    "L40S-48GB": ("g6e.xlarge", 1),
    "A10G-24GB": ("g5.xlarge", 1),
    "L4-24GB": ("g6.xlarge", 1),
    "T4-16GB": ("g4dn.xlarge", 1),
}
"""Catalog id -> (the EC2 instance type its reference rent is the list price of, GPUs in
it): the smallest instance AWS sells the part in (AWS, "Amazon EC2 instance types:
accelerated computing"; each type is named in the part's rent source in gpus.toml,
tested). The 8-GPU ones are sold by the node."""


def price_kind(gpu: GpuSpec) -> PriceKind:
    """The kind of `gpu`'s rent, read from its source in the catalog."""
    source = gpu.sources.get("rent_usd_per_hour", "")
    if source == FLEET_PRICE_SOURCE:
        return "fleet"
    if source.startswith("[[billing.static]]"):
        return "billing"
    if source == CONFIG_SOURCE:
        return "config"
    text = source.casefold()
    if text.startswith("estimate"):
        return "estimate"
    return "marketplace" if "marketplace" in text else "list"


def price_label(kind: PriceKind) -> str:
    """The label a used price of this kind carries ("" for a price that needs none)."""
    return {"estimate": "estimated price", "marketplace": "marketplace price"}.get(kind, "")


@dataclass(frozen=True, slots=True)
class Buying:
    """What the plan was allowed to buy, and how each used part is priced."""

    rule: str  # "allow_list", "aws:<region>" or "priced"
    catalog: GpuCatalog  # the parts the solver may use (the fleet's own always among them)
    left_out: tuple[tuple[str, PriceKind], ...] = ()  # (part, kind) not chosen by default
    offers: Mapping[str, tuple[str, int]] = field(default_factory=dict)  # id -> (type, GPUs)

    def labels(self) -> dict[str, str]:
        """Part -> "estimated price" / "marketplace price" for the parts that need a label."""
        out = {gpu.id: price_label(price_kind(gpu)) for gpu in self.catalog}
        return {gpu_id: label for gpu_id, label in out.items() if label}

    def sentence(self) -> str:
        """The rule in one sentence of ours (the report's assumptions)."""
        if self.rule == "allow_list":
            text = "Parts: the candidates named (any price kind, labelled where used)."
        elif self.rule.startswith("aws:"):
            text = (
                f"Parts: {self.rule}, the EC2 GPU instance families AWS rents, at the "
                "us-east-1 list price of the instance type (or the account's "
                "[[billing.static]] price), and the models the fleet runs at what it pays."
            )
        else:
            text = (
                "Parts: the models the fleet runs at what it pays, and parts with a "
                "provider's list price or a config price."
            )
        kinds = Counter(kind for _, kind in self.left_out)
        if kinds:
            text += " Never chosen by default: " + ", ".join(
                f"{counted(n, 'part')} with {_KIND_PHRASE[kind]}"
                for kind, n in sorted(kinds.items())
            )
            text += " (name them with --candidates to use them)."
        return text


def billing_overrides(billing: BillingConfig, catalog: GpuCatalog) -> list[GpuCatalogEntry]:
    """Catalog overrides pricing a part at the account's `[[billing.static]]` price of the
    instance type that sells it (`AWS_OFFERS`): whole-instance $/h / its GPUs."""
    by_type = {offer[0]: (gpu_id, offer[1]) for gpu_id, offer in AWS_OFFERS.items()}
    out: dict[str, GpuCatalogEntry] = {}
    for entry in billing.static:
        if entry.instance_type not in by_type or entry.lifecycle == "spot":
            continue
        gpu_id, gpus = by_type[entry.instance_type]
        if gpu_id in out or gpu_id not in catalog:
            continue  # the first entry for a type wins, as in the billing tier
        per_gpu = entry.usd_per_hour if entry.per_gpu else entry.usd_per_hour / gpus
        source = BILLING_PRICE_SOURCE.format(instance_type=entry.instance_type, gpus=gpus)
        out[gpu_id] = GpuCatalogEntry.model_validate(
            {"id": gpu_id, "rent_usd_per_hour": per_gpu, "sources": {"rent_usd_per_hour": source}},
            context={"builtin": True},
        )
    return list(out.values())


def _aws_region(billing: BillingConfig) -> str | None:
    if billing.region is None and billing.instance_type is None and not billing.pricing_api:
        return None
    return billing.region or "unknown-region"


def buyable(
    catalog: GpuCatalog,
    needs: Sequence[WorkloadNeed],
    billing: BillingConfig,
    named: Iterable[str] | None,
) -> Buying:
    """The parts the plan may use (see the module docstring); `named`: the candidates
    given by the flag or the config, None for the default rule."""
    fleet = {need.current_gpu_id for need in needs if need.current_gpu_id is not None}
    if named is not None:
        return Buying("allow_list", catalog)
    region = _aws_region(billing)
    keep: list[GpuSpec] = []
    left_out: list[tuple[str, PriceKind]] = []
    offers: dict[str, tuple[str, int]] = {}
    aws_parts = set(AWS_GPU_FAMILIES.values())
    for gpu in catalog:
        kind = price_kind(gpu)
        if gpu.id in fleet:
            keep.append(gpu)
        elif kind in UNBUYABLE:
            left_out.append((gpu.id, kind))
        elif region is None or gpu.id in aws_parts:
            keep.append(gpu)
        if region is not None and gpu.id in AWS_OFFERS:
            offers[gpu.id] = AWS_OFFERS[gpu.id]
    rule = "priced" if region is None else f"aws:{region}"
    return Buying(rule, GpuCatalog(keep), tuple(left_out), offers)


@dataclass(frozen=True, slots=True)
class SpareNodes:
    """GPUs a plan's new instances of one part leave spare (bought by the node)."""

    gpu_id: str
    instance_type: str
    gpus_per_instance: int
    new_gpus: int  # the plan's GPUs of this part beyond those the fleet runs
    spare_gpus: int
    usd_per_hour: float  # what the spare GPUs cost, $/h


def whole_nodes(plan: Plan, needs: Sequence[WorkloadNeed], buying: Buying) -> list[SpareNodes]:
    """Per part sold by the node: the instances the plan's new GPUs take and the GPUs
    they leave spare. GPUs of a model the fleet already runs are on its own nodes."""
    have = Counter[str]()
    for need in needs:
        if need.current_gpu_id is not None:
            have[need.current_gpu_id] += need.gpu_count
    planned = Counter(placement.gpu_id for placement in plan.placements)
    out = []
    for gpu_id, count in sorted(planned.items()):
        offer = buying.offers.get(gpu_id)
        if offer is None or offer[1] <= 1 or count <= have[gpu_id]:
            continue
        new = count - have[gpu_id]
        spare = math.ceil(new / offer[1]) * offer[1] - new
        if spare:
            price = buying.catalog.get(gpu_id).rent_usd_per_hour
            out.append(SpareNodes(gpu_id, offer[0], offer[1], new, spare, spare * price))
    return out


def spare_note(spare: SpareNodes) -> str:
    """One sentence of ours on a part's spare GPUs."""
    instances = math.ceil(spare.new_gpus / spare.gpus_per_instance)
    return (
        f"{spare.gpu_id} is sold by the node ({spare.instance_type}, "
        f"{spare.gpus_per_instance} GPUs): the plan's {counted(spare.new_gpus, 'new GPU')} "
        f"take {counted(instances, 'instance')}, {counted(spare.spare_gpus, 'GPU')} spare, "
        f"counted in the plan's cost"
    )
