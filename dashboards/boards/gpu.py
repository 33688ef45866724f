"""The GPU detail dashboard (gpuwatch-gpu.json): memory, activity, bandwidth, power,
temperature, clocks, throttling, XIDs, processes and MIG instances of the selected GPUs."""

from __future__ import annotations

from boards.blocks import Panel, Target, column_unit, instant, table, ts
from boards.promql import GPU


def gpu_panels() -> list[Panel]:
    """GPU detail: what each selected GPU is doing."""
    legend = "{{instance}} GPU {{gpu}}"
    return [
        ts(
            "Memory used",
            "Frame-buffer memory in use (gpuwatch_gpu_memory_used_bytes) and each GPU's total.",
            "bytes",
            Target(f"gpuwatch_gpu_memory_used_bytes{{{GPU}}}", legend=legend + " used"),
            Target(f"gpuwatch_gpu_memory_total_bytes{{{GPU}}}", legend=legend + " total"),
        ),
        ts(
            "SM activity",
            "Fraction of SMs busy (GPM, Hopper and newer: gpuwatch_gpu_sm_active_ratio) and the "
            "kernel-busy time older GPUs report (gpuwatch_gpu_utilization_ratio, which one "
            "spinning thread drives to 100 %).",
            "percentunit",
            Target(f"gpuwatch_gpu_sm_active_ratio{{{GPU}}}", legend=legend + " SM active"),
            Target(f"gpuwatch_gpu_utilization_ratio{{{GPU}}}", legend=legend + " kernel busy"),
        ),
        ts(
            "DRAM bandwidth",
            "DRAM bandwidth used over the GPU's peak (GPM: gpuwatch_gpu_dram_bandwidth_ratio).",
            "percentunit",
            Target(f"gpuwatch_gpu_dram_bandwidth_ratio{{{GPU}}}", legend=legend),
        ),
        ts(
            "Tensor activity",
            "Fraction of time any tensor pipe was active (GPM: gpuwatch_gpu_tensor_active_ratio).",
            "percentunit",
            Target(f"gpuwatch_gpu_tensor_active_ratio{{{GPU}}}", legend=legend),
        ),
        ts(
            "Power",
            "Power draw (gpuwatch_gpu_power_watts) against the enforced limit.",
            "watt",
            Target(f"gpuwatch_gpu_power_watts{{{GPU}}}", legend=legend),
            Target(f"gpuwatch_gpu_power_limit_watts{{{GPU}}}", legend=legend + " limit"),
        ),
        ts(
            "Temperature",
            "GPU core temperature (gpuwatch_gpu_temperature_celsius).",
            "celsius",
            Target(f"gpuwatch_gpu_temperature_celsius{{{GPU}}}", legend=legend),
        ),
        ts(
            "Clocks",
            "SM and memory clocks (gpuwatch_gpu_clock_hertz).",
            "hertz",
            Target(f"gpuwatch_gpu_clock_hertz{{{GPU}}}", legend=legend + " {{clock}}"),
        ),
        Panel(
            "state-timeline",
            "Throttle reasons",
            "The clocks-event (throttle) reasons in effect (gpuwatch_gpu_throttle_reason_active "
            "== 1): gpu_idle is harmless, the power and thermal reasons cost speed.",
            "none",
            (
                Target(
                    f"gpuwatch_gpu_throttle_reason_active{{{GPU}}} == 1",
                    legend=legend + " {{reason}}",
                ),
            ),
            width=12,
            options={"showValue": "never", "mergeValues": True},
            mappings=({"type": "value", "options": {"1": {"text": "active", "color": "orange"}}},),
        ),
        ts(
            "XID errors",
            "XID critical errors per interval by code (increase of gpuwatch_gpu_xid_errors_total): "
            "48 is an uncorrectable ECC error, 79 a GPU that fell off the bus.",
            "short",
            Target(
                f"sum by (instance, gpu, xid) "
                f"(increase(gpuwatch_gpu_xid_errors_total{{{GPU}}}[$__rate_interval]))",
                legend=legend + " XID {{xid}}",
            ),
        ),
        table(
            "Processes",
            "Processes on the selected GPUs: memory used and the newest per-process SM share "
            "(only with agent.per_process_metrics on; namespace and pod from the process's "
            "cgroup with pod attribution on). Ignores the namespace variable.",
            "bytes",
            instant(
                f"max by (instance, gpu, pid, process_name, namespace, pod) "
                f"(gpuwatch_process_memory_used_bytes{{{GPU}}})"
            ),
            instant(
                f"max by (instance, gpu, pid, process_name, namespace, pod) "
                f"(gpuwatch_process_sm_utilization_ratio{{{GPU}}})"
            ),
            columns={
                "instance": "host",
                "gpu": "GPU",
                "pid": "pid",
                "process_name": "process",
                "namespace": "namespace",
                "pod": "pod",
                "Value #A": "memory",
                "Value #B": "SM share",
            },
            overrides=(column_unit("SM share", "percentunit"),),
        ),
        table(
            "MIG instances",
            "MIG instances of the selected GPUs: memory used and total, and SM activity per GPU "
            "instance (GPM, Hopper and newer).",
            "bytes",
            instant(
                "max by (instance, gpu, gpu_instance_id, compute_instance_id) "
                f"(gpuwatch_mig_memory_used_bytes{{{GPU}}})"
            ),
            instant(
                "max by (instance, gpu, gpu_instance_id, compute_instance_id) "
                f"(gpuwatch_mig_memory_total_bytes{{{GPU}}})"
            ),
            instant(
                "max by (instance, gpu, gpu_instance_id, compute_instance_id) "
                f"(gpuwatch_mig_sm_active_ratio{{{GPU}}})"
            ),
            columns={
                "instance": "host",
                "gpu": "GPU",
                "gpu_instance_id": "GPU instance",
                "compute_instance_id": "compute instance",
                "Value #A": "memory used",
                "Value #B": "memory total",
                "Value #C": "SM active",
            },
            overrides=(column_unit("SM active", "percentunit"),),
        ),
    ]
