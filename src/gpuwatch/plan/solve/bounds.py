"""A lower bound on a pool's cost that needs no MILP: the fractional bound (each unit's
cheapest share of one resource)."""

from __future__ import annotations

from collections.abc import Sequence

from gpuwatch.plan.mig import mig_table
from gpuwatch.plan.model import PlanOptions
from gpuwatch.plan.solve.clock import Clock
from gpuwatch.plan.solve.fit import Fit, Unit, cheapest_alone


def fractional_bound(units: Sequence[Unit], fit: Fit, options: PlanOptions, clock: Clock) -> float:
    """A lower bound on a pool's cost: each unit's cheapest share of one resource.

    For a fixed resource (memory, compute or bandwidth), the units on one GPU take at most
    all of it (a time-sliced class's q units on n GPUs take at most n: any r of them fit
    one, and q <= r n), so the GPU costs at least the sum over its units of price x share. A unit
    alone pays the whole price; in a MIG instance its share is the profile's fraction.
    Each resource gives a valid bound; this is the largest of the three.
    """
    best = 0.0
    for k in range(3):
        total = 0.0
        for unit in units:
            clock.check()
            cheapest = cheapest_alone(unit, fit).rent_usd_per_hour
            for gpu in unit.candidates:
                price = gpu.rent_usd_per_hour
                if options.time_slicing and fit.whole(unit, gpu):
                    cheapest = min(cheapest, price * fit.shared_sizes(unit, gpu)[k])
                table = mig_table(gpu.id) if options.mig else None
                for index, profile in enumerate(table.profiles if table else ()):
                    if table is not None and fit.profile(unit, gpu, table, index):
                        # memory, compute, bandwidth (memory_slices / 8 of it)
                        fraction = (
                            profile.memory_fraction,
                            profile.compute_fraction,
                            profile.memory_fraction,
                        )[k]
                        cheapest = min(cheapest, price * fraction)
            total += cheapest
        best = max(best, total)
    return best
