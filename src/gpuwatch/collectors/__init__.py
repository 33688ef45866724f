"""Data sources, one per module, run on the agent's scheduler.

Each source runs inside `timed()`, which turns its outcome into a `CollectorResult`
(exported as `gpuwatch_collector_success` and `..._duration_seconds`), so one failing
source never breaks a scrape or the other sources.

| name      | module                         | on by default | schedule                    |
|-----------|--------------------------------|---------------|-----------------------------|
| nvml      | gpuwatch.collectors.nvml       | yes           | every `agent.interval_seconds` |
| nvml_slow | gpuwatch.collectors.nvml       | yes           | every `agent.slow_interval_seconds` |
| xid       | gpuwatch.nvml.xid (a thread)   | yes           | event-driven                |
| analysis  | gpuwatch.analysis.engine       | yes           | in every tick, after nvml   |
| cost      | gpuwatch.cost.engine           | yes           | in every tick, after analysis |
| billing   | gpuwatch.billing (own metrics) | AWS opt-in    | 60 s thread, per-tier TTLs  |
| tokens    | gpuwatch.tokens (own metrics)  | if configured | 1 s thread, per-source      |

billing and tokens report their own health (`gpuwatch_billing_up{source}`,
`gpuwatch_token_source_up{source}`) because each has several independent sources.
"""
