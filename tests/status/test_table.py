"""`gpuwatch status` as a table: 80 columns, one line per row, names that cannot escape."""

from __future__ import annotations

import io
from typing import Any

import pytest
from rich.cells import cell_len
from rich.console import Console

from gpuwatch.status import render_table
from gpuwatch.status.table import duration
from tests.status.conftest import HOSTILE_NAME, replayed_document, write_hostile

WIDTH = 80


def rendered(document: Any, width: int = WIDTH) -> list[str]:
    """The table as plain text lines on a `width`-column console without colours."""
    out = io.StringIO()
    render_table(document, Console(file=out, width=width, color_system=None))
    return out.getvalue().splitlines()


@pytest.fixture(scope="module")
def demo() -> Any:
    return replayed_document("demo", 2000)


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> Any:
    path = write_hostile(tmp_path_factory.mktemp("scenario"))
    return replayed_document(path, 120, hostname="evil\x1b[2J\x1b[Hhost")


def gpu_lines(lines: list[str]) -> dict[str, str]:
    """The GPU table's rows by GPU index."""
    header = next(i for i, line in enumerate(lines) if line.lstrip().startswith("#"))
    rows = {}
    for line in lines[header + 2 :]:
        if not line.strip() or not line.split()[0].isdigit():
            break
        rows[line.split()[0]] = line
    return rows


def test_demo_fits_80_columns_and_says_what_each_gpu_costs(demo: Any) -> None:
    lines = rendered(demo)
    assert all(cell_len(line) <= WIDTH for line in lines), "\n".join(lines)
    rows = gpu_lines(lines)
    assert sorted(rows) == ["0", "1", "2", "3"]
    states = {index: row.split()[4] for index, row in rows.items()}  # "#", 3 words of name
    assert states["1"] == "idle"
    assert states["2"] == "held"
    now = demo["timestamp_seconds"]
    for gpu in demo["gpus"]:
        row = rows[str(gpu["index"])]
        assert "$6.88" in row  # the demo's price: p5.48xlarge list ÷ 8
        assert f" {duration(now - gpu['verdict']['state_since_seconds'])} " in row
    assert duration(2000) == "33m"
    assert duration(3900) == "1h05m"
    assert duration(3 * 86400 + 4 * 3600) == "3d04h"
    idle_cost = demo["gpus"][1]["cost"]["idle_cost_usd_total"]
    assert f"${idle_cost:,.2f}" in rows["1"]
    note = " ".join(" ".join(lines).split())  # the note wraps at 80 columns
    assert "GPU 3: overprovisioned for llama-3.1-8b (need measured from the server's" in note
    assert "would do, saving $" in note


def test_process_names_are_short_and_take_one_line_each(demo: Any) -> None:
    lines = rendered(demo)
    processes = [line for line in lines if line.split()[:2] in (["0", "48213"], ["2", "30517"])]
    assert [line.split()[2] for line in processes] == ["train.py", "ipykernel_launcher"]
    assert any(" vllm…api_server " in line for line in lines)
    assert not any("--config" in line or "kernel-7f3a9c.json" in line for line in lines)


def test_a_long_command_line_takes_one_line(hostile: Any) -> None:
    lines = rendered(hostile)
    assert all(cell_len(line) <= WIDTH for line in lines), "\n".join(lines)
    (row,) = [line for line in lines if " 4242 " in line]
    assert "train_with_a_really_long_script_name" in row
    following = lines[lines.index(row) + 1]
    assert " 4343 " in following  # the next process, not a wrapped continuation


def test_escape_sequences_and_markup_in_names_are_shown_not_obeyed(hostile: Any) -> None:
    text = "\n".join(rendered(hostile))
    for raw in ("\x1b", "\x07", "\u202e"):
        assert raw not in text
    assert "\\x1b[2J" in text  # the hostname, escaped
    (row,) = [line for line in text.splitlines() if " 4343 " in line]
    assert "\\x1b" in row
    assert "EVIL" in row
    assert hostile["gpus"][0]["processes"][1]["name"] == HOSTILE_NAME  # JSON keeps it whole


def test_markup_in_a_name_stays_literal(hostile: Any) -> None:
    name = "[bold red]x[/bold red] :smile:"
    document = {**hostile, "hostname": name}
    (first, *_) = rendered(document)
    assert first.startswith(name + ":")


@pytest.mark.parametrize("markup", ["[/bold]", "[/]", "x[/bold red]y", "[link=http://x]z", "[bold"])
def test_unbalanced_markup_in_any_name_is_shown_not_parsed(hostile: Any, markup: str) -> None:
    """rich raises MarkupError on a closing tag with no opening one: every name must reach
    the table as text, never as markup."""
    gpus = [
        {
            **g,
            "name": f"GPU{markup}",
            "processes": [{**proc, "name": f"p{markup}"} for proc in g["processes"] or []],
        }
        for g in hostile["gpus"]
    ]
    lines = rendered({**hostile, "hostname": f"h{markup}", "gpus": gpus})
    assert lines[0].startswith(f"h{markup}:")
    assert [line.split()[1] for line in lines if " 4242 " in line or " 4343 " in line] == [
        "4242",
        "4343",
    ]


def test_a_narrow_terminal_cuts_cells_instead_of_wrapping(demo: Any) -> None:
    lines = rendered(demo, width=60)
    assert all(cell_len(line) <= 60 for line in lines)
    assert sorted(gpu_lines(lines)) == ["0", "1", "2", "3"]


def test_a_local_sample_has_no_state_and_says_so() -> None:
    document = replayed_document("demo", 10)
    local = {**document, "source": "local"}
    for gpu in local["gpus"]:
        gpu["verdict"] = gpu["cost"] = None
    lines = rendered(local)
    assert "no agent" in lines[0]
    for row in gpu_lines(lines).values():
        assert "no agent" in row


def test_a_lost_gpu_shows_down_with_its_xid() -> None:
    document = replayed_document("faults", 250)
    assert document["gpus"][3]["up"] is False
    # the XID thread waits in real time; its counting is tested in test_nvml_sampler.py
    document["gpus"][3]["xid_errors_total"] = {"79": 1}
    document["gpus"][0]["xid_errors_total"] = {"48": 2}
    lines = rendered(document)
    assert all(cell_len(line) <= WIDTH for line in lines)
    rows = gpu_lines(lines)
    assert rows["3"].split()[4] == "down"
    assert "GPU 3: down (GpuIsLost (GPU is lost)); XID 79" in lines
    assert "GPU 0: XID 48 (2 times)" in lines


def test_a_pending_gpu_says_how_long_it_has_looked_idle() -> None:
    lines = rendered(replayed_document("demo", 600))
    rows = gpu_lines(lines)
    assert all("pending" in rows[i] for i in ("0", "1", "2", "3")), "no evidence yet"
    assert "GPU 1: pending, inactive for 10m so far" in lines
    assert not any(line.startswith("GPU 0: pending") for line in lines), "GPU 0 is active"
