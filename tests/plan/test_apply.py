"""The files that apply a plan (`gpuwatch.plan.apply`): every emitted YAML parsed by a
real YAML parser (PyYAML) and validated against the tools' own types
(tests/plan/apply_validate.py) after the validators accept NVIDIA's own examples
(tests/plan/apply_examples/); hostile names round-trip as data; the migration order never
leaves a unit without a place; vLLM's memory fraction fits its planned share."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from gpuwatch.plan.apply import device_plugin, mig_parted, migration
from gpuwatch.plan.apply.evidence import evidence_document
from gpuwatch.plan.apply.files import apply_files, write_apply
from gpuwatch.plan.apply.layout import LABEL_VALUE_MAX_CHARS, label_value, plan_layout
from gpuwatch.plan.apply.workloads import workloads_document
from gpuwatch.plan.apply.yaml_text import Block, dump, quote
from gpuwatch.plan.mig import MIG_TABLES
from gpuwatch.plan.model import Placement, Plan, PlanOptions, WorkloadNeed
from gpuwatch.plan.render import PlanReport
from gpuwatch.plan.servers import with_servers
from gpuwatch.plan.solve import solve
from gpuwatch.plan.usage import GpuUsage
from gpuwatch.sizing import build_gpu_catalog
from gpuwatch.sizing.units import GB
from gpuwatch.tokens.config import TokenSourceConfig
from tests.alerts.test_hostile_names import HOSTILE
from tests.plan.apply_validate import validate_device_plugin, validate_mig_parted

EXAMPLES = Path(__file__).parent / "apply_examples"
CATALOG = build_gpu_catalog()
H100 = "H100-SXM-80GB"
L4 = "L4-24GB"
HEADROOM = 0.1
KUBERNETES_VERSION = "1.37.0"  # the newest tests/helm validates against
LABEL = re.compile(r"^[a-z0-9]([-a-z0-9_.]*[a-z0-9])?$")


def unit(
    key: str,
    host: str,
    memory_gb: float | None = 30.0,
    *,
    gpu: str = H100,
    gpus: int = 1,
    activity: str = "busy",
    p95_gb: float | None = None,
    server: str | None = None,
    label: str | None = None,
    namespace: str = "team-a",
) -> WorkloadNeed:
    uuids = tuple(f"GPU-{key}-{i}" for i in range(gpus))
    return WorkloadNeed(
        key=",".join(uuids),
        label=label if label is not None else key,
        host=host,
        gpu_uuids=uuids,
        current_gpu_id=gpu,
        current_usd_per_hour=CATALOG.get(gpu).rent_usd_per_hour * gpus,
        activity=activity,  # type: ignore[arg-type]
        memory_bytes=None if memory_gb is None else memory_gb * GB,
        memory_basis=None if memory_gb is None else "measured",
        activity_ratio=0.2,
        kernel_busy_ratio=0.2,  # kernel-busy as SM activity: the least it can be
        bandwidth_bytes_per_second=2e11,
        namespace=namespace,
        pods=(f"{namespace}/{key if label is None else label}",),
        memory_peak_bytes=72 * GB if server == "vllm" else None,  # NVML: vLLM preallocates
        memory_p95_bytes=None if p95_gb is None else p95_gb * GB,
        observed_seconds=86400.0,
        server=server,
    )


def report_of(plan: Plan, needs: list[WorkloadNeed]) -> PlanReport:
    return PlanReport(plan, tuple(needs), PlanOptions(headroom_ratio=HEADROOM), 30.0, "local", "")


def hand_plan(needs: list[WorkloadNeed]) -> Plan:
    """A plan with every mode: a MIG H100 (a, b), a time-sliced L4 (c, d), a kept H100
    (e), a 4-GPU job moved to four whole H100s (job), an idle unit released (idle), a
    unit of unknown need left on its L40S (odd)."""
    k = {n.label: n.key for n in needs}
    h100 = CATALOG.get(H100).rent_usd_per_hour
    placements = (
        Placement(H100, "mig", h100, (k["a"], k["b"]), ("3g.40gb", "3g.40gb")),
        Placement(L4, "shared", 0.8, (k["c"], k["d"])),
        Placement(H100, "whole", h100, (k["e"],)),
        *(Placement(H100, "whole", h100, (k["job"],), group=1) for _ in range(4)),
    )
    return Plan(placements, 10.0, 5.0, 5.0, 0.0, reclaimed=(k["idle"],), unplaced=(k["odd"],))


def fleet() -> list[WorkloadNeed]:
    return [
        unit("a", "node-1", 34, p95_gb=30, server="vllm"),
        unit("b", "node-1", 20, server="vllm"),
        unit("c", "node-2", 6, gpu=L4, server="vllm"),
        unit("d", "node-2", 8, gpu=L4, server="vllm"),
        unit("e", "node-3", 70),
        unit("job", "node-4", 60, gpu="A100-SXM-80GB", gpus=4),
        unit("idle", "node-1", 10, activity="idle"),
        unit("odd", "node-5", None, gpu="L40S-48GB"),
    ]


def parsed(files: dict[str, str]) -> dict[str, Any]:
    return {name: yaml.safe_load(text) for name, text in files.items()}


# -- the validators accept NVIDIA's examples and reject what the Go types reject -------


@pytest.mark.parametrize("name", ["mig-parted-config.yaml"])
def test_the_mig_parted_validator_accepts_nvidias_examples(name: str) -> None:
    assert validate_mig_parted(yaml.safe_load((EXAMPLES / name).read_text())) == []


def _hopper_blackwell_configs() -> dict[str, Any]:
    docs = yaml.safe_load_all((EXAMPLES / "mig-manager-example-hopper-blackwell.yaml").read_text())
    (config_map,) = [d for d in docs if d["kind"] == "ConfigMap"]
    return yaml.safe_load(config_map["data"]["config.yaml"])  # type: ignore[no-any-return]


def test_nvidias_hopper_blackwell_config_validates_and_names_our_profiles() -> None:
    """Every profile our MIG tables give an H100 80GB, H200 or B200 is one NVIDIA's own
    mig-manager example configures (the accepted values, not only the structure), but
    the 4g one: the example has no config with a 4g instance."""
    config = _hopper_blackwell_configs()
    assert validate_mig_parted(config) == []
    named = {
        profile
        for entries in config["mig-configs"].values()
        for entry in entries
        for profile in (entry.get("mig-devices") or {})
    }
    for gpu in ("H100-SXM-80GB", "H200-141GB", "B200-180GB"):
        ours = {p.name for p in MIG_TABLES[gpu].profiles if not p.name.startswith("4g.")}
        assert ours <= named, gpu


@pytest.mark.parametrize(
    "name",
    [
        "device-plugin-time-slicing.yaml",
        "device-plugin-time-slicing-rename.yaml",
        "device-plugin-mps-rename.yaml",
        "device-plugin-mig-mixed.yaml",
    ],
)
def test_the_device_plugin_validator_accepts_nvidias_examples(name: str) -> None:
    assert validate_device_plugin(yaml.safe_load((EXAMPLES / name).read_text())) == []


def _one(entry: dict[str, Any], version: str = "v1") -> dict[str, Any]:
    return {"version": version, "mig-configs": {"x": [entry]}}


_OFF = {"devices": "all", "mig-enabled": False}
_ON = {"devices": "all", "mig-enabled": True}


@pytest.mark.parametrize(
    ("doc", "problem"),
    [
        (_one(_OFF, version="v2"), "version"),
        ({"version": "v1", "mig-configs": {}}, "at least one"),
        ({"version": "v1", "mig-configs": {"x": []}}, "at least one"),
        (_one({**_OFF, "devices": "some"}), "devices"),
        (_one(_ON), "required when"),
        (_one({**_OFF, "mig-devices": {"1g.10gb": 1}}), "included"),
        (_one({**_ON, "mig-devices": {"3g.40GB": 1}}), "profile"),
        (_one({**_ON, "mig-devices": {}, "extra": 1}), "unexpected"),
    ],
)
def test_the_mig_parted_validator_rejects(doc: Any, problem: str) -> None:
    assert any(problem in error for error in validate_mig_parted(doc))


def _sliced(kind: str, resources: list[Any]) -> dict[str, Any]:
    return {"sharing": {kind: {"resources": resources}}}


@pytest.mark.parametrize(
    ("doc", "problem"),
    [
        ({"version": "v2"}, "version"),
        ({"flags": {"migStrategy": "both"}}, "migStrategy"),
        (_sliced("timeSlicing", [{"name": "nvidia.com/gpu", "replicas": 1}]), ">= 2"),
        (_sliced("timeSlicing", []), "no resources"),
        (_sliced("mps", [{"name": "nvidia.com/GPU!", "replicas": 2}]), "resource name"),
        ({"sharing": {"slicing": {}}}, "unexpected"),
    ],
)
def test_the_device_plugin_validator_rejects(doc: Any, problem: str) -> None:
    assert any(problem in error for error in validate_device_plugin(doc))


# -- our files --------------------------------------------------------------------------


def test_every_emitted_file_parses_and_the_nvidia_ones_validate() -> None:
    needs = fleet()
    docs = parsed(apply_files(report_of(hand_plan(needs), needs), CATALOG))
    assert validate_mig_parted(docs["mig-configs.yaml"]) == []
    configs = docs["mig-configs.yaml"]["mig-configs"]
    assert configs["gpuwatch-h100-sxm-80gb-2x3g.40gb"] == [
        {"devices": "all", "mig-enabled": True, "mig-devices": {"3g.40gb": 2}}
    ]
    config_map = docs["device-plugin-configs.yaml"]
    assert (config_map["apiVersion"], config_map["kind"]) == ("v1", "ConfigMap")
    kubernetes_validate.validate(config_map, KUBERNETES_VERSION, strict=True)
    plugin = {name: yaml.safe_load(text) for name, text in config_map["data"].items()}
    for config in plugin.values():
        assert validate_device_plugin(config) == []
    assert plugin["gpuwatch-mig-mixed"]["flags"]["migStrategy"] == "mixed"
    (sliced,) = plugin["gpuwatch-time-slicing-2"]["sharing"]["timeSlicing"]["resources"]
    assert sliced == {"name": "nvidia.com/gpu", "replicas": 2}
    # every label value a node carries is a valid Kubernetes label value, and names a config
    for node in docs["nodes.yaml"]["add"]:
        labels = node["labels"]
        assert all(LABEL.match(v) for v in labels.values())
        assert all(len(v) <= LABEL_VALUE_MAX_CHARS for v in labels.values())
        assert labels[mig_parted.MIG_CONFIG_LABEL] in configs
        assert labels[device_plugin.DEVICE_PLUGIN_LABEL] in plugin


def test_resource_requests_nodes_and_order() -> None:
    needs = fleet()
    docs = parsed(apply_files(report_of(hand_plan(needs), needs), CATALOG))
    work = {w["workload"]: w for w in docs["workloads.yaml"]["workloads"]}
    assert work["a"]["to"] == {"nvidia.com/mig-3g.40gb": 1}
    assert work["a"]["from"] == {"nvidia.com/gpu": 1}
    assert work["c"]["to"] == {"nvidia.com/gpu.shared": 1}
    assert (work["e"]["change"], work["e"]["node"]) == ("keep", "node-3")
    assert work["job"]["to"] == {"nvidia.com/gpu": 4}
    assert work["idle"]["change"] == "release"
    assert (work["odd"]["change"], work["odd"]["node"]) == ("keep", "node-5")
    nodes = docs["nodes.yaml"]
    # the 4-GPU job lands on one new node; node-1, -2 and -4 empty out, node-3 stays
    (job_node,) = [n for n in nodes["add"] if n["name"] == work["job"]["node"]]
    assert job_node["planned_gpus"] == 4
    assert {n["name"] for n in nodes["remove"]} == {"node-1", "node-2", "node-4"}
    assert {n["name"] for n in nodes["keep"]} == {"node-3", "node-5"}
    types = {t["instance_type"]: t for t in nodes["instance_types"]}
    a100 = types["A100-SXM-80GB x4"]
    assert (a100["add"], a100["remove"], a100["net"]) == (0, 1, -1)
    steps = docs["migration.yaml"]["steps"]
    actions = [s["action"] for s in steps]
    assert actions == sorted(actions, key=["add-node", "move", "release", "remove-node"].index)
    placed_on = {n.key: n.host for n in needs}
    assert migration.check_order(steps, placed_on, []) is None


def test_the_order_check_can_fail() -> None:
    needs = fleet()
    steps = migration.steps(plan_layout(hand_plan(needs), needs))
    placed_on = {n.key: n.host for n in needs}
    reordered = sorted(steps, key=lambda s: s["action"] != "remove-node")
    assert "removes" in (migration.check_order(reordered, placed_on, []) or "")
    no_capacity = [s for s in steps if s["action"] != "add-node"]
    assert "before it is added" in (migration.check_order(no_capacity, placed_on, []) or "")


def test_vllm_memory_fraction_fits_its_share() -> None:
    """Two vLLM servers time-sliced on one L4 (24 GB): 6 and 8 GB need, x 1.1 = 6.6 and
    8.8 GB = 0.275 and 0.367 of it; the 0.308 left below 0.95 is split evenly: 0.429 and
    0.521, rounded down to 0.42 and 0.52, each above its need (where two servers at
    vLLM's default 0.9 would ask for 1.8 GPUs). On MIG 3g.40gb instances (40 GB), unit b
    (20 GB, 22 with headroom) keeps the default 0.9; unit a (34 GB, 37.4 with headroom =
    0.935 of it) gets 0.94."""
    needs = fleet()
    layout = plan_layout(hand_plan(needs), needs)
    document: Any = workloads_document(layout, CATALOG, HEADROOM)
    work = {w["workload"]: w for w in document["workloads"]}
    c = work["c"]["vllm_args"]["--gpu-memory-utilization"]
    d = work["d"]["vllm_args"]["--gpu-memory-utilization"]
    assert (c, d) == (0.42, 0.52)
    assert c + d <= 0.95
    memory = CATALOG.get(L4).memory_bytes
    assert c * memory >= 6 * GB * 1.1
    assert d * memory >= 8 * GB * 1.1
    assert work["a"]["vllm_args"]["--gpu-memory-utilization"] == 0.94
    assert work["b"]["vllm_args"]["--gpu-memory-utilization"] == 0.9
    assert "vllm_args" not in work["e"]  # not a vLLM server


def test_evidence_and_the_20_percent_stress() -> None:
    """Unit a's need peaked at 34 GB (p95 30 GB) on a 3g.40gb (40e9 bytes): 37.4 GB with
    headroom fits, x 1.2 = 40.8 GB overflows by 0.8 GB. NVML's 72 GB (vLLM preallocates)
    is shown, never used. The time-sliced L4 holds (6 + 8) x 1.2 = 16.8 GB <= 24 / 1.1:
    fits with headroom."""
    needs = fleet()
    doc: Any = evidence_document(plan_layout(hand_plan(needs), needs), CATALOG, HEADROOM)
    by_units = {tuple(u["workload"] for u in gpu["units"]): gpu for gpu in doc["moves"]}
    mig = by_units[("a", "b")]
    assert mig["isolation"] == "MIG"
    stress = mig["if_peak_20_percent_higher"]
    assert (stress["workload"], stress["verdict"]) == ("a", "overflows")
    assert stress["missing_bytes"] == pytest.approx(0.8 * GB)
    a = mig["units"][0]
    assert a["need_basis"] == "measured"
    assert (a["memory_need_peak_bytes"], a["memory_need_p95_bytes"]) == (34 * GB, 30 * GB)
    assert a["nvml_memory_used_peak_bytes"] == 72 * GB
    shared = by_units[("c", "d")]
    assert shared["isolation"] == "time-sliced"
    assert shared["if_peak_20_percent_higher"]["verdict"] == "fits with headroom"
    assert {gpu["isolation"] for gpu in doc["kept"]} == {"whole"}


@pytest.mark.parametrize("name", HOSTILE)
def test_hostile_names_are_data(name: str) -> None:
    """Pod, namespace, label and host names come back from the YAML exactly (a lone
    surrogate, unwritable in UTF-8, as U+FFFD), and never break the files' structure."""
    needs = [
        unit("x", name, 10, label=name, namespace=name, server="vllm"),
        unit("y", name, 10, label=name + "2", namespace=name, server="vllm"),
    ]
    h100 = CATALOG.get(H100).rent_usd_per_hour
    plan = Plan(
        (Placement(H100, "mig", h100, (needs[0].key, needs[1].key), ("3g.40gb", "3g.40gb")),),
        2 * h100, h100, h100, 0.0, (),
    )  # fmt: skip
    files = apply_files(report_of(plan, needs), CATALOG)
    assert all(text.isascii() for text in files.values())
    docs = parsed(files)
    expect = name.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    (first, second) = docs["workloads.yaml"]["workloads"]
    assert (first["workload"], first["namespace"], first["host"]) == (expect, expect, expect)
    assert first["pods"] == [f"{expect}/{expect}"]
    assert second["workload"] == expect + "2"
    assert [n["name"] for n in docs["nodes.yaml"]["remove"]] == [expect]
    assert validate_mig_parted(docs["mig-configs.yaml"]) == []
    steps = docs["migration.yaml"]["steps"]
    assert migration.check_order(steps, {n.key: n.host for n in needs}, []) is None


def test_the_emitter_quotes_what_yaml_would_read_as_another_type() -> None:
    for text in [
        "yes",
        "no",
        "null",
        "~",
        "1e3",
        "0x10",
        "- a",
        "a: b",
        "&x",
        "*x",
        "!!int 1",
        "---",
        "...",
        "#c",
        "'",
    ]:
        assert yaml.safe_load(dump({text: text})) == {text: text}
    assert quote("\U0001f600\u2028") == '"\\U0001F600\\u2028"'
    for text in ["a: 1\nb: [2]\n", "x\n\n", " lead\n", "tab\there\n", "no newline", "é\n"]:
        assert yaml.safe_load(dump({"k": Block(text)})) == {"k": text}
    assert "|" in dump({"k": Block("a: 1\n")})
    assert "|" not in dump({"k": Block("a\x85b\n")})
    with pytest.raises(ValueError, match="one printable line"):
        dump({}, ["two\nlines"])


def test_label_values_are_valid_and_distinct() -> None:
    long_a, long_b = "gpuwatch-" + "x" * 80 + "a", "gpuwatch-" + "x" * 80 + "b"
    assert label_value(long_a) != label_value(long_b)
    for text in (long_a, "-Weird GPU/ID!-", "é"):
        value = label_value(text)
        assert LABEL.match(value)
        assert len(value) <= LABEL_VALUE_MAX_CHARS


def test_a_solved_plan_writes_valid_files(tmp_path: Path) -> None:
    """From the real solver: two small H100 units become one H100 as 3g.40gb + 3g.40gb,
    five L4 notebooks time-sliced; every file written, parsed and validated."""
    pytest.importorskip("highspy")
    needs = [unit(k, "node-1", 30, server="vllm") for k in ("vllm-8b", "canary")]
    needs += [unit(f"nb-{i}", "node-2", 5, gpu=L4) for i in range(5)]
    options = PlanOptions(candidate_gpu_ids=(H100, L4), headroom_ratio=HEADROOM)
    plan = solve(needs, CATALOG, options)
    paths = write_apply(report_of(plan, needs), CATALOG, tmp_path)
    assert sorted(p.name for p in paths) == sorted(
        ["mig-configs.yaml", "device-plugin-configs.yaml", "nodes.yaml", "workloads.yaml",
         "migration.yaml", "evidence.yaml", "dra-claims.yaml"]
    )  # fmt: skip
    docs = {p.name: yaml.safe_load(p.read_text(encoding="ascii")) for p in paths}
    assert validate_mig_parted(docs["mig-configs.yaml"]) == []
    for text in docs["device-plugin-configs.yaml"]["data"].values():
        assert validate_device_plugin(yaml.safe_load(text)) == []
    placed = {n.key: n.host for n in needs}
    assert migration.check_order(docs["migration.yaml"]["steps"], placed, []) is None
    moved = {w["workload"] for w in docs["workloads.yaml"]["workloads"]}
    assert moved == {n.label for n in needs}


def test_the_mps_config_validates_and_a_single_replica_is_refused() -> None:
    """MPS (per-client memory limits) is written like time-slicing under sharing.mps."""
    config = device_plugin.device_plugin_config("none", "mps", 3)
    assert validate_device_plugin(yaml.safe_load(dump(config))) == []
    with pytest.raises(ValueError, match="at least 2 replicas"):
        device_plugin.device_plugin_config("none", "timeSlicing", 1)


def test_token_sources_name_the_units_server() -> None:
    """A [[token_sources]] entry's GPUs (an index of this host, or a UUID) name its kind
    on the unit holding them; other units keep None."""
    blank = (None,) * 6
    usages = [
        GpuUsage("h", f"GPU-{k}-0", "NVIDIA H100 80GB HBM3", i, 60.0, {}, *blank)
        for i, k in enumerate(("a", "b", "e"))
    ]
    needs = [unit(k, "h") for k in ("a", "b", "e")]
    url = "http://127.0.0.1:9/metrics"
    sources = [
        TokenSourceConfig(name="v", url=url, gpus=[0]),
        TokenSourceConfig(name="s", url=url, kind="sglang", gpus=["GPU-b-0"]),
    ]
    named = with_servers(needs, usages, sources)
    assert [n.server for n in named] == ["vllm", "sglang", None]


def test_a_time_sliced_node_is_checked_for_whichever_units_land_together() -> None:
    """Two L4s time-sliced as (13 + 1 GB) and (13 + 1 GB): each GPU holds its pair (15.4 GB
    with headroom), but the scheduler may put both 13 GB units on one 24 GB L4: 26 GB,
    2 GB over. The evidence says so."""
    needs = [unit(k, "n", gb, gpu=L4) for k, gb in (("p", 13), ("q", 1), ("r", 13), ("s", 1))]
    k = [n.key for n in needs]
    plan = Plan(
        (Placement(L4, "shared", 0.8, (k[0], k[1])), Placement(L4, "shared", 0.8, (k[2], k[3]))),
        3.2, 1.6, 1.6, 0.0, (),
    )  # fmt: skip
    doc: Any = evidence_document(plan_layout(plan, needs), CATALOG, HEADROOM)
    (landing,) = doc["time_sliced_worst_landing"]
    assert landing["replicas_per_gpu"] == 2
    assert (landing["memory_bytes"], landing["verdict"]) == (26 * GB, "overflows")
    assert landing["missing_bytes"] == pytest.approx(2 * GB)
    assert {g["if_peak_20_percent_higher"]["verdict"] for g in doc["moves"]} == {
        "fits with headroom"
    }


def test_two_time_sliced_classes_never_share_a_node() -> None:
    """Two teams, each with four 3 GB notebooks on L4s: the plan makes one class of
    2+ replicas per team (sharing across namespaces is off; at 0.2 kernel-busy plus the
    5 % allowance a notebook takes 0.28 of an L4's compute, so three to a class and the
    fourth alone, at the same price as two GPUs of two). Before, nodes to add were
    grouped by (model, replicas) only, so both teams' GPUs went on one node with one
    `gpuwatch/pool` label and the scheduler could put team-a's and team-b's pods on one
    GPU. Now each class has its own nodes and label, its units select that label, and
    each node's device-plugin replicas are its class's."""
    needs = [
        dataclasses.replace(
            unit(f"{team}-{n}", f"{team}-host", 3, gpu=L4, namespace=team),
            bandwidth_bytes_per_second=2e10,
        )
        for team in ("team-a", "team-b")
        for n in range(4)
    ]
    plan = solve(needs, CATALOG, PlanOptions(candidate_gpu_ids=(L4,), mig=False))
    shared = [p for p in plan.placements if p.mode == "shared"]
    assert len({p.share_class for p in shared}) == 2
    layout = plan_layout(plan, needs)
    by_key = {n.key: n for n in needs}
    pools: dict[str, set[str | None]] = {}
    for node in layout.nodes:
        if node.new:
            assert node.kind == ("shared", str(node.gpus[0].placement.replicas))
            namespaces = {by_key[k].namespace for g in node.gpus for k in g.placement.units}
            pools.setdefault(node.pool, set()).update(namespaces)
    assert len(pools) == 2
    assert all(len(namespaces) == 1 for namespaces in pools.values())
    assert all(LABEL.match(pool) for pool in pools)
    doc: Any = workloads_document(layout, CATALOG, HEADROOM)
    moved = [entry for entry in doc["workloads"] if entry["change"] == "move"]
    assert len(moved) == sum(len(p.units) for p in shared)
    for entry in moved:
        (pool,) = (p for p, namespaces in pools.items() if entry["namespace"] in namespaces)
        assert entry["node_selector"] == {"gpuwatch/pool": pool}
        assert entry["to"] == {"nvidia.com/gpu.shared": 1}
    for entry in doc["workloads"]:  # a unit left alone stays on its L4, selecting nothing
        assert entry in moved or (entry["change"] == "keep" and "node_selector" not in entry)
