"""Waste analysis: idle, held, underutilized and overprovisioned GPUs.

Per-sample work is O(1): every window is kept as running aggregates (a last-active
timestamp, bucketed sums and maxima), never rescanned.
"""
