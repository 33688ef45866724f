"""Byte and time units, defined once for every layer.

A bottom module (it imports nothing of gpuwatch), so that a consumer such as the
exporter need not import the NVML adapter for a constant. The sizing model's decimal
units (GB, TERA) and parameter-count parsing live in `gpuwatch.sizing.units`.
"""

from __future__ import annotations

KIB = 1024
"""One kibibyte in bytes: NVML's field values for NVLink and PCIe throughput."""

MIB = 1024 * 1024
"""One mebibyte in bytes: what NVML, nvidia-smi and dcgm-exporter call "MB"."""

GIB = 1024 * 1024 * 1024
"""One gibibyte in bytes: what NVML-derived tools print as "GB"."""

MINUTE_SECONDS = 60
"""One minute in seconds."""

HOUR_SECONDS = 3600
"""One hour in seconds."""

DAY_SECONDS = 86400
"""One day in seconds."""

HOURS_PER_YEAR = 365 * 24
"""8760: seed 001 amortizes over 365-day years."""

HOURS_PER_MONTH = HOURS_PER_YEAR / 12
"""730.0: the month every $/month figure (plan, report, tco) is counted in."""
