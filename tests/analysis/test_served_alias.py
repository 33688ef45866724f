"""A `--served-model-name` alias: the server's own /v1/models says which model it is (its
`root`), so the need is measured from sizing, not left to NVML's preallocated memory.
A real HTTP server answers both the metrics page and /v1/models."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from gpuwatch.analysis.measured import MeasuredNeeds
from gpuwatch.core.clock import ManualClock
from gpuwatch.core.snapshot import GpuIdentity, GpuSample
from gpuwatch.sizing import build_model_catalog
from gpuwatch.tokens import TokenCollector, TokenSourceConfig
from tests.tokens.conftest import vllm_page

ALIAS = "chat"
# vLLM v1 with `--served-model-name chat`: the metrics' model_name is the alias
CACHE = f"""\
# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig
# TYPE vllm:cache_config_info gauge
vllm:cache_config_info{{block_size="16",cache_dtype="auto",engine="0",\
gpu_memory_utilization="0.9",num_gpu_blocks="27277"}} 1.0
# HELP vllm:kv_cache_usage_perc KV-cache usage. 1 means 100 percent usage.
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{{engine="0",model_name="{ALIAS}"}} 0.25
"""
# vllm/entrypoints/openai/serving_models.py, show_available_models: ModelCard(id=the
# served name, root=the model path given to --model); a LoRA adapter's card has a parent
MODELS = {
    "object": "list",
    "data": [
        {"id": ALIAS, "object": "model", "root": "meta-llama/Llama-3.1-8B-Instruct"},
        {"id": "sql-lora", "object": "model", "root": "/adapters/sql", "parent": ALIAS},
    ],
}


class _Server(ThreadingHTTPServer):
    models: bytes
    asked: list[str]


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def do_GET(self) -> None:
        self.server.asked.append(self.path)
        if self.path == "/metrics":
            body = (vllm_page(10.0, 20.0, models=(ALIAS,)) + CACHE).encode()
            kind = "text/plain; version=0.0.4"
        elif self.path == "/v1/models" and self.server.models:
            body, kind = self.server.models, "application/json"
        else:
            self.send_error(404)
            return
        self.send_response(200)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def server() -> Iterator[_Server]:
    running = _Server(("127.0.0.1", 0), _Handler)
    running.models = json.dumps(MODELS).encode()
    running.asked = []
    thread = threading.Thread(target=running.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    yield running
    running.shutdown()
    running.server_close()
    thread.join(timeout=5)


def _gpu() -> GpuSample:
    identity = GpuIdentity(
        0, "GPU-00000000-0000", "NVIDIA H100 80GB HBM3", None, "0", 81_559 * 2**20, None, True
    )
    return GpuSample(identity=identity, up=True)


def _measure(server: _Server) -> tuple[MeasuredNeeds, dict[str, float]]:
    port = server.server_address[1]
    source = TokenSourceConfig(name="v", url=f"http://127.0.0.1:{port}/metrics", gpus=[0])
    clock = ManualClock(1_767_225_600.0)
    collector = TokenCollector([source], clock)
    reading = collector.scrape("v")
    assert reading.up
    needs = MeasuredNeeds([source], build_model_catalog())
    found = needs.per_gpu(clock.time(), [_gpu()], [reading])
    return needs, {uuid: sample.need_bytes for uuid, sample in found.items()}


def test_an_alias_resolves_through_the_servers_v1_models(server: _Server) -> None:
    """Llama-3.1-8B behind the alias "chat", 0.25 x 27,277 blocks x 16 = 109,108 tokens
    in use: 16,060,522,496 + 109,108 x 131,072 + 3,142,612,419 B (docs/analysis.md), not
    unknown_model and NVML's 90 % preallocation."""
    needs, found = _measure(server)
    status = needs.statuses()["v"]
    assert (status.status, status.served_model, status.model) == (
        "measured",
        ALIAS,
        "llama-3.1-8b",
    )
    assert found == {"GPU-00000000-0000": 16_060_522_496 + 109_108 * 131_072 + 3_142_612_419}
    assert "/v1/models" in server.asked


def test_without_v1_models_the_alias_stays_unknown(server: _Server) -> None:
    server.models = b""
    needs, found = _measure(server)
    assert found == {}
    assert needs.statuses()["v"].status == "unknown_model"
