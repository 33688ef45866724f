"""Checks beyond one field's validator: cross-references that fail a config, and
warnings that do not.

`reference_problems`: the catalogs build, and every model, size and candidate GPU the
config names is known. `config_warnings`: valid settings that are likely not what was
meant (`gpuwatch check-config` prints them and still passes).
"""

from __future__ import annotations

import typing

from gpuwatch.config.schema import Config
from gpuwatch.sizing import (
    CatalogError,
    GpuCatalog,
    ModelCatalog,
    UnknownModelError,
    build_gpu_catalog,
    build_model_catalog,
)
from gpuwatch.workloads import config_json_workload, declared_workload, served_workload


def reference_problems(config: Config, skip: typing.AbstractSet[str] = frozenset()) -> list[str]:
    """Cross-field checks: catalogs build, and every declared model or size is known.

    Sections named in `skip` (invalid ones, at their defaults) are not checked.
    """
    if "sizing" in skip:
        return []
    problems = []
    try:
        catalog = build_gpu_catalog(config.sizing.gpus)
    except (CatalogError, ValueError) as exc:
        problems.append(f"sizing.gpus: {exc}")
    else:
        if config.analysis.candidate_gpus is not None and "analysis" not in skip:
            problems.extend(_candidate_problems(config, catalog))
    try:
        models = build_model_catalog(config.sizing.models)
    except (CatalogError, ValueError) as exc:
        problems.append(f"sizing.models: {exc}")
        return problems
    if "workloads" not in skip:
        for i, declaration in enumerate(config.workloads):
            field = (
                "config_json"
                if declaration.config_json is not None
                else "model"
                if declaration.model is not None
                else "params"
            )
            try:
                declared_workload(declaration, models)
            except UnknownModelError as exc:
                problems.append(f"workloads.{i}.model: {exc.args[0] if exc.args else exc}")
            except ValueError as exc:
                problems.append(f"workloads.{i}.{field}: {exc}")
    if "token_sources" not in skip:
        problems.extend(_token_source_problems(config, models))
    return problems


def _token_source_problems(config: Config, models: ModelCatalog) -> list[str]:
    """A token source's `model`, `config_json` and `precision` can be sized."""
    problems = []
    for i, source in enumerate(config.token_sources):
        if source.model is not None and source.model not in models:
            problems.append(
                f"token_sources.{i}.model: unknown model {source.model!r}; "
                f"known: {', '.join(models.names)}"
            )
        try:
            if source.config_json is not None:
                config_json_workload(source.config_json, source.precision)
            elif source.model is not None and source.model in models:
                served_workload(models.get(source.model), source.precision)
        except ValueError as exc:
            field = "config_json" if source.config_json is not None else "precision"
            problems.append(f"token_sources.{i}.{field}: {exc}")
    return problems


def _candidate_problems(config: Config, catalog: GpuCatalog) -> list[str]:
    """`[analysis] candidate_gpus` names catalog GPUs (built in or `[[sizing.gpus]]`)."""
    problems = []
    for i, gpu_id in enumerate(config.analysis.candidate_gpus or ()):
        if gpu_id not in catalog:
            problems.append(
                f"analysis.candidate_gpus.{i}: unknown GPU {gpu_id!r}; "
                f"known: {', '.join(catalog.ids)}"
            )
    return problems


OPENCOST_DCGM_FAMILIES = ("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "DCGM_FI_DEV_DEC_UTIL")
"""The dcgm-exporter families OpenCost's GPU queries read, by their classic names."""


def config_warnings(config: Config) -> list[str]:
    """Settings that are valid but likely not what was meant, one `path: reason` line each
    (`gpuwatch check-config` prints them; they never fail the check)."""
    exporter = config.exporter
    if exporter.dcgm_naming == "classic":
        return []
    if not exporter.dcgm_compat:
        return ["exporter.dcgm_naming: has no effect without exporter.dcgm_compat = true"]
    families = " and ".join(OPENCOST_DCGM_FAMILIES)
    return [
        f"exporter.dcgm_naming: OpenCost's GPU queries read {families}, "
        "names the 4.9 set does not export: OpenCost will find no GPU usage "
        '(keep dcgm_naming = "classic" where OpenCost reads this agent)'
    ]
