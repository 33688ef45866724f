"""The plan in words a team can follow: one `Move` per planned GPU or reclaimed unit.

Names stay raw here (they are data); each renderer escapes them for its own syntax.
Dollars per month are $/h x `HOURS_PER_MONTH` (730 h). A move's saving is what its
units' GPUs cost now less what its planned GPU costs; a unit kept on the part it runs
on is no move (listed as "keep").
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from gpuwatch.core.text import duration, with_article
from gpuwatch.core.units import GIB, HOURS_PER_MONTH
from gpuwatch.plan.model import Placement, Plan, WorkloadNeed


@dataclass(frozen=True, slots=True)
class Move:
    """One step of the plan."""

    kind: str  # release (idle), reclaim (held), move, share, mig, keep, unplaced
    names: tuple[str, ...]  # the units' labels (raw names: escape when rendering)
    action: str  # what to do, in words, with no names in it
    savings_usd_per_month: float
    pods: tuple[str, ...] = ()


def _reclaim(need: WorkloadNeed) -> Move:
    saved = need.current_usd_per_hour * HOURS_PER_MONTH
    gpus = "the GPU" if need.gpus_now == 1 else f"the {need.gpus_now} GPUs"
    if need.activity == "held":
        held = need.held_memory_bytes or need.memory_peak_bytes or 0.0
        action = (
            f"held {held / GIB:.0f} GiB for {duration(need.observed_seconds)} with no work "
            f"-> reclaim {gpus}"
        )
        return Move("reclaim", (need.label,), action, saved, need.pods)
    action = f"idle for {duration(need.observed_seconds)} -> release {gpus}"
    return Move("release", (need.label,), action, saved, need.pods)


def _placed(placement: Placement, units: Sequence[WorkloadNeed], labels: Mapping[str, str]) -> Move:
    move = _placed_plain(placement, units)
    label = labels.get(placement.gpu_id)
    if label and move.kind != "keep":
        return Move(move.kind, move.names, f"{move.action} ({label})", *_tail(move))
    return move


def _tail(move: Move) -> tuple[float, tuple[str, ...]]:
    return move.savings_usd_per_month, move.pods


def _placed_plain(placement: Placement, units: Sequence[WorkloadNeed]) -> Move:
    current = sum(unit.current_usd_per_hour for unit in units)
    planned = placement.usd_per_hour
    names = tuple(unit.label for unit in units)
    pods = tuple(pod for unit in units for pod in unit.pods)
    saved = (current - planned) * HOURS_PER_MONTH
    gpu = placement.gpu_id
    if placement.mode == "mig":
        layout = " + ".join(placement.mig_profiles)
        return Move("mig", names, f"-> one {gpu} as {layout}", saved, pods)
    if placement.mode == "shared" and max(placement.replicas, len(units)) > 1:
        return Move("share", names, f"-> one {gpu}, time-sliced", saved, pods)
    if len(units) == 1 and units[0].current_gpu_id == gpu:
        return Move("keep", names, f"keeps its {gpu}", saved, pods)
    return Move("move", names, f"-> {with_article(gpu)}", saved, pods)


def plan_moves(
    plan: Plan, needs: Sequence[WorkloadNeed], labels: Mapping[str, str] | None = None
) -> list[Move]:
    """Every step: reclaimed units first, then planned GPUs by saving (largest first),
    then units kept because no candidate holds them. `labels`: part -> the label its
    price carries where used ("estimated price"), appended to the move's action."""
    labels = labels or {}
    by_key: Mapping[str, WorkloadNeed] = {need.key: need for need in needs}
    moves = [_reclaim(by_key[key]) for key in plan.reclaimed if key in by_key]
    groups: dict[int, list[Placement]] = {}
    placed: list[Move] = []
    for placement in plan.placements:
        if placement.group > 0:
            groups.setdefault(placement.group, []).append(placement)
            continue
        placed.append(
            _placed(placement, [by_key[k] for k in placement.units if k in by_key], labels)
        )
    for group in groups.values():
        unit = by_key.get(group[0].units[0])
        if unit is None:
            continue
        merged = Placement(
            gpu_id=group[0].gpu_id,
            mode="whole",
            usd_per_hour=sum(p.usd_per_hour for p in group),
            units=group[0].units,
        )
        move = _placed(merged, [unit], {})
        if move.kind == "move":
            label = labels.get(merged.gpu_id)
            move = Move(
                "move",
                move.names,
                f"-> {len(group)} x {merged.gpu_id}" + (f" ({label})" if label else ""),
                move.savings_usd_per_month,
                move.pods,
            )
        elif move.kind == "keep":
            move = Move(
                "keep",
                move.names,
                f"keeps its {len(group)} x {merged.gpu_id}",
                move.savings_usd_per_month,
                move.pods,
            )
        placed.append(move)
    placed.sort(key=lambda m: (m.kind == "keep", -m.savings_usd_per_month, m.names))
    moves.extend(placed)
    for key in plan.unplaced:
        if key in by_key:
            need = by_key[key]
            moves.append(
                Move(
                    "unplaced",
                    (need.label,),
                    "keeps its GPU: its need is above its GPU's memory (a measurement error)"
                    if need.memory_error_bytes is not None
                    else "keeps its GPU: need unknown (no memory need or memory used in the "
                    "lookback)"
                    if need.memory_bytes is None
                    else "keeps its GPU: no candidate holds its need with headroom",
                    0.0,
                    need.pods,
                )
            )
    return moves
