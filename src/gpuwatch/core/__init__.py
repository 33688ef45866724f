"""The bottom layer: text, units and failure-episode helpers every other layer may use.

Nothing here imports another gpuwatch module, so any module can import `core` without
pulling in a feature. What belongs here: one home per shared concept (the money
formatter, the name sanitisers per medium, byte and time units, one-log-line-per-outage
bookkeeping, the error a failing data source raises, the command line's number type
`flag_types`, the one-line hint to install an extra `install`). What does not: anything
that knows a GPU, a config or an output format's transport.
"""
