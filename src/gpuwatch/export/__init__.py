"""Prometheus exposition: the metric families, the DCGM-compatible set, the HTTP server.

Family groups, one module each, rendered from a published `FleetSnapshot` and each
declaring what it may emit: `families` (the gpuwatch_* GPU, process and MIG families),
`analysis_families`, `cost_families`, `attribution_families`, `dcgm` (dcgm-exporter's
names, both naming sets). `collector` puts the groups together (`SnapshotCollector`,
which checks at start-up that no two groups emit one family); `server`, `bounded` and
`serve` are the HTTP endpoint (`/metrics`, `/status.json`, health), `status_json` the
status document.

What must not live here: a call to NVML or any other source (a scrape reads the newest
snapshot only, tests/test_layering.py), analysis or cost arithmetic of its own (it calls
the engines' pure helpers, `analysis.activity`, `cost.pods`), global registries or
gauges. Layer: with collectors, history and simulate, above config and cost, below plan,
report and the agent that wires it.
"""
