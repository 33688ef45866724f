"""Which catalog GPUs a right-sizing recommendation may name: the ones a team can get.

The first rule that applies chooses, and the recommendation carries its name:

1. ``allow_list`` — `[analysis] candidate_gpus` is set: exactly those catalog ids.
2. ``aws:<region>`` — billing asks the AWS Pricing API and its listing of the region's
   GPU instance types has arrived: the catalog GPUs that AWS rents there.
3. ``same_class:<tier>`` — otherwise: the catalog GPUs of the current GPU's class
   (datacenter / workstation / consumer, the catalog's `tier`). A data-centre GPU is
   never told to move to a GeForce card: the clouds do not rent them and NVIDIA's
   GeForce driver licence (§2.1.3) does not allow data-centre deployment.

The current GPU itself is never a candidate that saves money (it is not cheaper), so it
needs no special case.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from gpuwatch.sizing.gpus import GpuCatalog, GpuSpec


@dataclass(frozen=True, slots=True)
class RentedGpus:
    """The catalog GPUs a cloud rents in a region (from billing's price listing)."""

    region: str
    gpu_ids: frozenset[str]  # catalog ids, casefolded


class CandidateRules:
    """Chooses the candidates of each GPU; `rented` may change while the agent runs."""

    def __init__(self, catalog: GpuCatalog, allow_list: Collection[str] | None = None) -> None:
        self._catalog = catalog
        self._allowed: GpuCatalog | None = None
        if allow_list is not None:
            wanted = {gpu_id.casefold() for gpu_id in allow_list}
            self._allowed = GpuCatalog(gpu for gpu in catalog if gpu.id.casefold() in wanted)
        self._by_tier: dict[str, GpuCatalog] = {}
        self._rented: tuple[RentedGpus, GpuCatalog] | None = None

    def set_rented(self, rented: RentedGpus | None) -> None:
        """Use (or, with None, stop using) a cloud's region listing."""
        if rented is None or not rented.gpu_ids:
            self._rented = None
            return
        if self._rented is not None and self._rented[0] == rented:
            return
        chosen = GpuCatalog(gpu for gpu in self._catalog if gpu.id.casefold() in rented.gpu_ids)
        self._rented = (rented, chosen)  # one assignment: readers see old or new, never half

    def candidates(self, current: GpuSpec) -> tuple[GpuCatalog, str]:
        """(the GPUs `current` may be moved to, the rule that chose them)."""
        if self._allowed is not None:
            return self._allowed, "allow_list"
        rented = self._rented
        if rented is not None:
            return rented[1], f"aws:{rented[0].region}"
        same = self._by_tier.get(current.tier)
        if same is None:
            same = self._by_tier[current.tier] = GpuCatalog(
                gpu for gpu in self._catalog if gpu.tier == current.tier
            )
        return same, f"same_class:{current.tier}"
