"""Hand-made mutants of the NVML adapter: each a small source patch a test must notice.

A mutant replaces `old` (which must occur exactly once in `path`, relative to
`src/gpuwatch`, unless the mutant names its `line`) with `new`. `required` mutants
must be killed: `make mutation` fails when one survives. When the code moves on and
`old` no longer matches, the harness reports the mutant as stale; update it here.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Mutant:
    """One source patch."""

    name: str
    path: str
    old: str
    new: str
    required: bool = False
    line: int = 0
    """For a generic mutant: the 1-based line `old` is (then it need not be unique)."""


DEVICE = "nvml/device.py"
CALLS = "nvml/calls.py"
GPM = "nvml/gpm.py"
MIG = "nvml/mig.py"
PROCESSES = "nvml/processes.py"
RELIABILITY = "nvml/reliability.py"

NAMED: tuple[Mutant, ...] = (
    # -- the survivors issue 8 lists: each must be killed ---------------------------------
    Mutant(
        "gpm_sample_swap",
        GPM,
        "request.sample1 = buffers.previous\n            request.sample2 = buffers.current",
        "request.sample1 = buffers.current\n            request.sample2 = buffers.previous",
        required=True,
    ),
    Mutant(
        "gpm_interval_guard_removed",
        GPM,
        "now - buffers.previous_time < GPM_MIN_INTERVAL_SECONDS",
        "now - buffers.previous_time < 0",
        required=True,
    ),
    Mutant(
        "last_seen_never_advances",
        PROCESSES,
        "fresh, self._process_util_last_us = parse.latest_process_utilization(",
        "fresh, _ = parse.latest_process_utilization(",
        required=True,
    ),
    Mutant(
        "mig_memory_from_parent",
        MIG,
        'memory = self._read_memory(mig.handle, key_prefix="mig_")',
        'memory = self._read_memory(None, key_prefix="mig_")',
        required=True,
    ),
    Mutant(
        "mig_gpm_from_whole_gpu",
        MIG,
        "gpm_by_instance[gi] = self._read_gpm(buffers, now, gi)",
        "gpm_by_instance[gi] = self._read_gpm(buffers, now, None)",
        required=True,
    ),
    Mutant(
        "remapped_pending_failure_swapped",
        RELIABILITY,
        'remapped_rows_pending=flag("remapped_pending"),\n'
        '            remapped_rows_failure=flag("remapped_failure"),',
        'remapped_rows_pending=flag("remapped_failure"),\n'
        '            remapped_rows_failure=flag("remapped_pending"),',
        required=True,
    ),
    Mutant(
        "remapped_pending_failure_swapped_in_fallback",
        RELIABILITY,
        "else bool(remapped[2]),\n            remapped_rows_failure=None if remapped is None "
        "else bool(remapped[3]),",
        "else bool(remapped[3]),\n            remapped_rows_failure=None if remapped is None "
        "else bool(remapped[2]),",
    ),
    Mutant(
        "ecc_aggregate_read",
        RELIABILITY,
        '("ecc_uncorrected", nv.NVML_FI_DEV_ECC_DBE_VOL_TOTAL, 0)',
        '("ecc_uncorrected", nv.NVML_FI_DEV_ECC_DBE_AGG_TOTAL, 0)',
        required=True,
    ),
    Mutant(
        "ecc_aggregate_read_in_fallback",
        RELIABILITY,
        "nv.NVML_MEMORY_ERROR_TYPE_UNCORRECTED,\n            nv.NVML_VOLATILE_ECC,",
        "nv.NVML_MEMORY_ERROR_TYPE_UNCORRECTED,\n            nv.NVML_AGGREGATE_ECC,",
    ),
    Mutant(
        "xid_never_unhealthy",
        "nvml/xid.py",
        "return self.healthy and thread is not None and thread.is_alive()",
        "return True",
        required=True,
    ),
    # -- more adapter mistakes the strict stand-in makes visible ------------------------
    Mutant(
        "gpm_same_buffer",
        GPM,
        "request.sample1 = buffers.previous",
        "request.sample1 = buffers.current",
        required=True,
    ),
    Mutant(
        "gpm_buffers_never_swapped",
        GPM,
        "        buffers.swap(now)\n",
        "        buffers.previous_time = now\n",
        required=True,
    ),
    Mutant(
        "mig_mode_pending_read",
        DEVICE,
        "bool(mig_mode[0])",
        "bool(mig_mode[1])",
        required=True,
    ),
    Mutant(
        "mig_change_keeps_unsupported",
        MIG,
        "        self.unsupported.clear()\n",
        "        pass\n",
        required=True,
    ),
    Mutant(
        "ecc_corrected_aggregate_read",
        RELIABILITY,
        '("ecc_corrected", nv.NVML_FI_DEV_ECC_SBE_VOL_TOTAL, 0)',
        '("ecc_corrected", nv.NVML_FI_DEV_ECC_SBE_AGG_TOTAL, 0)',
    ),
    Mutant(
        "xid_collector_always_healthy",
        "collectors/nvml.py",
        'CollectorResult("xid", self._sampler.xid_healthy, 0.0)',
        'CollectorResult("xid", True, 0.0)',
        required=True,
    ),
    # -- the habits of mature tools --------------------------------------------------------
    Mutant(
        "unsupported_never_remembered",
        CALLS,
        "                    self.unsupported.add(key)\n",
        "                    pass\n",
    ),
    Mutant(
        "lost_gpu_reported_up",
        DEVICE,
        "                up=False,\n                error=str(exc),",
        "                up=True,\n                error=str(exc),",
    ),
    Mutant(
        "memory_v1_fallback_removed",
        CALLS,
        '        if info is None:\n            info = self._optional(key_prefix + "memory_v1"',
        '        if False:\n            info = self._optional(key_prefix + "memory_v1"',
    ),
    Mutant(
        "nvlink_link_zero_only",
        DEVICE,
        '("nvlink_tx", nv.NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX, ALL_LINKS)',
        '("nvlink_tx", nv.NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX, 0)',
    ),
    Mutant(
        "throttle_reasons_fallback_removed",
        DEVICE,
        '("clock_throttle_reasons", nv.nvmlDeviceGetCurrentClocksThrottleReasons),',
        "",
    ),
    Mutant(
        "processes_v2_fallback_removed",
        PROCESSES,
        '("processes_compute_v2", nv.nvmlDeviceGetComputeRunningProcesses_v2),',
        "",
    ),
    Mutant(
        "process_hold_ignored",
        PROCESSES,
        "held = parse.held_process_utilization(self._process_util, fresh, self._clock.monotonic())",
        "held = {pid: (ratio, 0.0) for pid, ratio in fresh.items()}",
    ),
    Mutant(
        "gpm_per_entry_return_ignored",
        "nvml/parse.py",
        "if int(metrics[i].nvmlReturn) == success_code",
        "if True",
    ),
    Mutant(
        "down_gpu_loses_xid_counts",
        "nvml/sampler.py",
        "xid_errors_total=self._xid_counts.for_gpu(uuid) if uuid else (),",
        "xid_errors_total=(),",
    ),
    Mutant(
        "driver_error_not_retried",
        "nvml/sampler.py",
        "        if self.fatal is not None or self._clock.monotonic() < self._next_retry:\n"
        "            return",
        "        if True:\n            return",
    ),
    Mutant(
        "collector_failure_reported_success",
        "collectors/base.py",
        "        success = False",
        "        success = True",
    ),
    Mutant(
        "xid_lost_gpu_uuid_by_name",
        "nvml/xid.py",
        'uuid = self._uuid_by_address.get(handle_address(data.device), "")',
        "uuid = str(nv.nvmlDeviceGetUUID(data.device))",
    ),
    Mutant(
        "slow_failure_keeps_stale_values",
        DEVICE,
        "        self.slow = replace(SlowReadings(), mig_enabled=self.slow.mig_enabled)",
        "        pass",
    ),
)
"""The hand-made mutants, required ones first."""
