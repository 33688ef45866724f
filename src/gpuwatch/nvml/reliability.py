"""Reliability: volatile ECC totals, remapped rows and the PCIe replay counter (one
field-values call, else one call each), and `SlowReadings`, what the slow job read."""

from __future__ import annotations

from dataclasses import dataclass

from gpuwatch.nvml.calls import DeviceCalls
from gpuwatch.nvml.mig import MigDevice


@dataclass(frozen=True, slots=True)
class SlowReadings:
    """Values read on the slow job: calls that block or change rarely."""

    pcie_tx_bytes_per_second: float | None = None
    pcie_rx_bytes_per_second: float | None = None
    ecc_uncorrected_errors_total: int | None = None
    ecc_corrected_errors_total: int | None = None
    remapped_rows_correctable: int | None = None
    remapped_rows_uncorrectable: int | None = None
    remapped_rows_pending: bool | None = None
    remapped_rows_failure: bool | None = None
    pcie_replay_errors_total: int | None = None
    mig_enabled: bool | None = None
    mig_devices: tuple[MigDevice, ...] = ()
    power_limit_watts: float | None = None  # re-read: `nvidia-smi -pl` changes it


class ReliabilityReads(DeviceCalls):
    """The ECC, remapped-row and PCIe-replay reading of the slow job."""

    def _read_reliability(self) -> SlowReadings:
        """Volatile ECC totals, remapped rows and the PCIe replay counter in one
        field-values call.

        Falls back to `nvmlDeviceGetTotalEccErrors`, `nvmlDeviceGetRemappedRows` and
        `nvmlDeviceGetPcieReplayCounter` where `nvmlDeviceGetFieldValues` itself is
        unsupported.
        """
        nv = self._nv
        if "field_values" in self.unsupported:
            return self._read_reliability_by_calls()
        fields: list[tuple[str, int, int]] = []
        if "ecc" not in self.unsupported:
            fields.append(("ecc_uncorrected", nv.NVML_FI_DEV_ECC_DBE_VOL_TOTAL, 0))
            fields.append(("ecc_corrected", nv.NVML_FI_DEV_ECC_SBE_VOL_TOTAL, 0))
        if "remapped_rows" not in self.unsupported:
            fields.append(("remapped_correctable", nv.NVML_FI_DEV_REMAPPED_COR, 0))
            fields.append(("remapped_uncorrectable", nv.NVML_FI_DEV_REMAPPED_UNC, 0))
            fields.append(("remapped_pending", nv.NVML_FI_DEV_REMAPPED_PENDING, 0))
            fields.append(("remapped_failure", nv.NVML_FI_DEV_REMAPPED_FAILURE, 0))
        if "pcie_replay" not in self.unsupported:
            fields.append(("pcie_replay", nv.NVML_FI_DEV_PCIE_REPLAY_COUNTER, 0))
        got = self._read_fields(fields)
        if "field_values" in self.unsupported:
            return self._read_reliability_by_calls()
        if {"ecc_uncorrected", "ecc_corrected"} <= self.unsupported:
            self.unsupported.add("ecc")
        if "remapped_pending" in self.unsupported:
            self.unsupported.add("remapped_rows")

        def count(key: str) -> int | None:
            value = got.get(key)
            return None if value is None else int(value)

        def flag(key: str) -> bool | None:
            value = got.get(key)
            return None if value is None else bool(value)

        return SlowReadings(
            ecc_uncorrected_errors_total=count("ecc_uncorrected"),
            ecc_corrected_errors_total=count("ecc_corrected"),
            remapped_rows_correctable=count("remapped_correctable"),
            remapped_rows_uncorrectable=count("remapped_uncorrectable"),
            remapped_rows_pending=flag("remapped_pending"),
            remapped_rows_failure=flag("remapped_failure"),
            pcie_replay_errors_total=count("pcie_replay"),
        )

    def _read_reliability_by_calls(self) -> SlowReadings:
        nv, h = self._nv, self.handle
        uncorrected = self._optional(
            "ecc",
            nv.nvmlDeviceGetTotalEccErrors,
            h,
            nv.NVML_MEMORY_ERROR_TYPE_UNCORRECTED,
            nv.NVML_VOLATILE_ECC,
        )
        corrected = self._optional(
            "ecc",
            nv.nvmlDeviceGetTotalEccErrors,
            h,
            nv.NVML_MEMORY_ERROR_TYPE_CORRECTED,
            nv.NVML_VOLATILE_ECC,
        )
        remapped = self._optional("remapped_rows", nv.nvmlDeviceGetRemappedRows, h)
        replays = self._optional("pcie_replay", nv.nvmlDeviceGetPcieReplayCounter, h)
        return SlowReadings(
            ecc_uncorrected_errors_total=None if uncorrected is None else int(uncorrected),
            ecc_corrected_errors_total=None if corrected is None else int(corrected),
            remapped_rows_correctable=None if remapped is None else int(remapped[0]),
            remapped_rows_uncorrectable=None if remapped is None else int(remapped[1]),
            remapped_rows_pending=None if remapped is None else bool(remapped[2]),
            remapped_rows_failure=None if remapped is None else bool(remapped[3]),
            pcie_replay_errors_total=None if replays is None else int(replays),
        )
