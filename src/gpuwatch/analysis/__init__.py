"""Waste analysis: idle, held, underutilized and overprovisioned GPUs.

Per-sample work is O(1): every window is kept as running aggregates (a last-active
timestamp, bucketed sums and maxima), never rescanned. `config` is the `[analysis]`
section (gathered into `gpuwatch.config.Config`), `engine` the per-tick analysis.

What must not live here: an import of `gpuwatch.config` (the config sits above the
analysis and embeds its section), which catalog GPUs a team can get
(`gpuwatch.sizing.candidates`: billing and the plan use it too), dollars (`gpuwatch.cost`).

Layer: analysis (beside alerts), above tco and the sources, below cost and config.
"""
