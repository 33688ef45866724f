"""Which units an inference server of this host's config runs (`WorkloadNeed.server`).

A `[[token_sources]]` entry names its server's kind (vllm, sglang, ...) and the GPUs it
runs on (indices or GPU UUIDs of this host). Only the local source is matched: the
config describes this host, not the fleet a Prometheus source covers. No I/O here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from gpuwatch.plan.model import WorkloadNeed
from gpuwatch.plan.usage import GpuUsage
from gpuwatch.tokens.config import TokenSourceConfig


def with_servers(
    needs: Sequence[WorkloadNeed],
    usages: Sequence[GpuUsage],
    sources: Sequence[TokenSourceConfig],
) -> tuple[WorkloadNeed, ...]:
    """`needs` with `server` set where a token source runs on one of the unit's GPUs."""
    by_index = {u.gpu_index: u.uuid for u in usages if u.gpu_index is not None}
    kind_of: dict[str, str] = {}
    for source in sources:
        for gpu in source.gpus:
            uuid = by_index.get(gpu) if isinstance(gpu, int) else gpu
            if uuid is not None:
                kind_of.setdefault(uuid, source.kind)
    return tuple(
        next(
            (replace(need, server=kind_of[u]) for u in need.gpu_uuids if u in kind_of),
            need,
        )
        for need in needs
    )
