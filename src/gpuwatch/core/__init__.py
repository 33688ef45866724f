"""The bottom layer: the per-tick records and the helpers every other layer may use.

Nothing here imports another gpuwatch module, so any module can import `core` without
pulling in a feature. What belongs here: the immutable shapes that flow from sources to
consumers (`snapshot`: per-GPU samples, attribution and `FleetSnapshot`; `verdict`: the
waste analysis's records; `costs`: the cost engine's records), the injected `clock`,
and one home per shared concept (`text`: the money formatter and the name sanitisers
per medium; `units`: byte and time units; `values`: config value syntax; `health`:
one log line per outage; `failures`: the error a failing data source raises; `paths`:
whether a directory can hold state, atomic writes; `flag_types`: the command line's
number type; `install`: the one-line hint to install an extra). What does not: code
that reads NVML, the network or a config, computes an analysis or a cost, or renders
an output format.

Layer: core, below everything (core < sizing < sources < tco < analysis < cost < ...).
"""
