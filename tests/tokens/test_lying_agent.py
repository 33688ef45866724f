"""`gpuwatch run --simulate demo` as a real subprocess, scraping an inference server that
lies about its KV cache pool, with the history on: the source is down with one log
line, the host's GPUs and history go on, and SIGTERM exits 0 with NVML and the kubelet
channel closed."""

from __future__ import annotations

import signal
import sqlite3
import time
from pathlib import Path

import pytest

from gpuwatch.history.store import HISTORY_FILE
from tests.agent_process import fetch, samples, start_agent
from tests.conftest import free_port
from tests.tokens.conftest import PageServer, vllm_page
from tests.tokens.test_lying_sources import LLAMA, blocks


@pytest.mark.parametrize("lie", ["1e15", "1e308"])
def test_sigterm_while_a_server_lies_exits_0_with_everything_closed(
    tmp_path: Path, page_server: PageServer, lie: str
) -> None:
    page_server.serve(vllm_page(10.0, 20.0, models=(LLAMA,)) + blocks(lie))
    config = tmp_path / "gpuwatch.toml"
    config.write_text(
        f'[agent]\ninterval_seconds = 0.2\nstate_dir = "{tmp_path}"\n'
        "[history]\nenabled = true\nwrite_interval_seconds = 1.0\n"
        '[[token_sources]]\nname = "liar"\n'
        f'url = "{page_server.url}"\ngpus = [0]\n'
        "interval_seconds = 1.0\ntimeout_seconds = 1.0\n",
        encoding="utf-8",
    )
    port = free_port()
    proc = start_agent(["--simulate", "demo", "--config", str(config)], port)
    try:
        deadline = time.monotonic() + 10.0
        while page_server.requests < 2 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert page_server.requests >= 2, "the lying server is scraped"
        metrics = samples(fetch(f"http://127.0.0.1:{port}/metrics"))
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=15)
    stderr = err.decode()
    assert proc.returncode == 0, stderr
    assert "Traceback" not in stderr
    assert "OverflowError" not in stderr
    down = [line for line in stderr.splitlines() if "'liar'" in line and "is down" in line]
    assert len(down) == 1, stderr
    assert "num_gpu_blocks" in down[0]
    assert metrics[("gpuwatch_token_source_up", frozenset({("source", "liar")}))] == 0.0
    need = [dict(labels) for name, labels in metrics if "need_info" in name]
    assert [n["status"] for n in need if n["source"] == "liar"] == ["down"]
    gpus_up = [v for (name, _), v in metrics.items() if name == "gpuwatch_gpu_up"]
    assert gpus_up == [1.0] * 4, "the other GPUs go on"
    assert "NVML shut down" in stderr
    assert "kubelet channel closed" in stderr
    with sqlite3.connect(tmp_path / HISTORY_FILE) as conn:
        rows = conn.execute("SELECT count(DISTINCT uuid), max(need_bytes) FROM gpu_hours")
        gpus, need_bytes = rows.fetchone()
    assert gpus == 4, "every GPU's hours are kept"
    assert need_bytes is None or need_bytes < 200e9
