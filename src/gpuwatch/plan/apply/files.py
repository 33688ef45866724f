"""The apply files of a plan, by name, and writing them (`DIR/apply/`)."""

from __future__ import annotations

from pathlib import Path

from gpuwatch.core.paths import write_atomic
from gpuwatch.plan.apply import (
    device_plugin,
    dra,
    evidence,
    mig_parted,
    migration,
    nodes,
    workloads,
)
from gpuwatch.plan.apply.layout import plan_layout
from gpuwatch.plan.render import PlanReport
from gpuwatch.sizing import GpuCatalog

APPLY_DIR = "apply"


def apply_files(report: PlanReport, catalog: GpuCatalog) -> dict[str, str]:
    """File name -> YAML text, for every apply file of the plan."""
    layout = plan_layout(report.plan, report.needs)
    headroom = report.options.headroom_ratio
    return {
        "mig-configs.yaml": mig_parted.render(layout),
        # DRA nodes take claims (dra-claims.yaml), not the device plugin's config
        "device-plugin-configs.yaml": device_plugin.render(dra.without_dra_nodes(layout)),
        "dra-claims.yaml": dra.render(layout),
        "nodes.yaml": nodes.render(layout),
        "workloads.yaml": workloads.render(layout, catalog, headroom),
        "migration.yaml": migration.render(layout),
        "evidence.yaml": evidence.render(layout, catalog, headroom),
    }


def write_apply(report: PlanReport, catalog: GpuCatalog, out: Path) -> list[Path]:
    """Write the apply files under `out/apply/`; returns their paths. Raises OSError."""
    folder = out / APPLY_DIR
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, text in apply_files(report, catalog).items():
        path = folder / name
        write_atomic(path, text.encode("ascii"))
        paths.append(path)
    return paths
