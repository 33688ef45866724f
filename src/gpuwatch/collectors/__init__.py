"""Data sources, one per module, run on the agent's scheduler.

Each source runs inside `timed()`, which turns its outcome into a `CollectorResult`
(exported as `gpuwatch_collector_success` and `..._duration_seconds`), so one failing
source never breaks a scrape or the other sources.

| name      | module                         | on by default | schedule                    |
|-----------|--------------------------------|---------------|-----------------------------|
| nvml      | gpuwatch.collectors.nvml       | yes           | every `agent.interval_seconds` |
| nvml_slow | gpuwatch.collectors.nvml       | yes           | every `agent.slow_interval_seconds` |
| xid       | gpuwatch.nvml.xid (a thread)   | yes           | event-driven                |
"""
