"""The static tier: prices written in the config (owned hardware, negotiated, spot).

Pure matching, no I/O. The most specific kind of entry wins: `host`, then
`instance_type`, then `gpu_model`; within a kind an entry for this instance's lifecycle
beats one without `lifecycle`, and then the first in config order wins.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Sequence

from gpuwatch.billing.config import StaticPrice
from gpuwatch.billing.quotes import PriceQuote, make_quote, normalize_lifecycle
from gpuwatch.core.text import counted


def _normalize(text: str) -> str:
    return " ".join(text.split()).casefold()


def matches(
    entry: StaticPrice,
    *,
    hostname: str,
    gpu_name: str,
    catalog_id: str | None,
    instance_type: str | None,
) -> bool:
    """Whether `entry` names this host (hostname glob, GPU model or instance type)."""
    if entry.host is not None:
        return fnmatch.fnmatchcase(hostname.casefold(), entry.host.casefold())
    if entry.instance_type is not None:
        return instance_type is not None and entry.instance_type == instance_type
    if entry.gpu_model is not None:
        wanted = _normalize(entry.gpu_model)
        if catalog_id is not None and wanted == catalog_id.casefold():
            return True
        return bool(gpu_name) and fnmatch.fnmatchcase(_normalize(gpu_name), wanted)
    return False


def _kind_rank(entry: StaticPrice) -> int:
    if entry.host is not None:
        return 0
    return 1 if entry.instance_type is not None else 2


def _describe(entry: StaticPrice) -> str:
    if entry.host is not None:
        return f"host {entry.host!r}"
    if entry.instance_type is not None:
        return f"instance type {entry.instance_type}"
    return f"GPU model {entry.gpu_model!r}"


def best_static(
    prices: Sequence[StaticPrice],
    *,
    hostname: str,
    gpu_name: str,
    catalog_id: str | None,
    instance_type: str | None,
    lifecycle: str | None,
) -> StaticPrice | None:
    """The entry that prices this host, or None when none matches."""
    lifecycle = normalize_lifecycle(lifecycle)
    candidates = [
        (index, entry)
        for index, entry in enumerate(prices)
        if (entry.lifecycle is None or entry.lifecycle == lifecycle)
        and matches(
            entry,
            hostname=hostname,
            gpu_name=gpu_name,
            catalog_id=catalog_id,
            instance_type=instance_type,
        )
    ]
    if not candidates:
        return None
    _, best = min(
        candidates, key=lambda item: (_kind_rank(item[1]), item[1].lifecycle is None, item[0])
    )
    return best


def static_quote(
    prices: Sequence[StaticPrice],
    *,
    hostname: str,
    gpu_name: str,
    catalog_id: str | None,
    instance_type: str | None,
    lifecycle: str | None,
    gpus: int,
) -> PriceQuote | None:
    """The static tier's quote for this host over `gpus` GPUs, or None."""
    entry = best_static(
        prices,
        hostname=hostname,
        gpu_name=gpu_name,
        catalog_id=catalog_id,
        instance_type=instance_type,
        lifecycle=lifecycle,
    )
    if entry is None:
        return None
    gpus = max(gpus, 1)
    if entry.per_gpu:
        instance_usd = entry.usd_per_hour * gpus
        how = f"${entry.usd_per_hour:g} per GPU-hour x {counted(gpus, 'GPU')}"
    else:
        instance_usd = entry.usd_per_hour
        how = f"${entry.usd_per_hour:g} per instance-hour / {counted(gpus, 'GPU')}"
    spot = " (spot price)" if entry.lifecycle == "spot" else ""
    return make_quote(
        "static",
        instance_usd,
        gpus,
        instance_type=instance_type,
        lifecycle=entry.lifecycle or normalize_lifecycle(lifecycle),
        detail=f"configured price for {_describe(entry)}{spot}: {how}",
    )
