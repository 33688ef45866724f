"""A simulated vLLM server: a real HTTP server on loopback whose /metrics looks like vLLM's.

The demo scenario's GPU 3 runs vLLM; `SimulatedVllmServer` serves the token counters
(`vllm:prompt_tokens_total`, `vllm:generation_tokens_total`) that a token source reads,
the prompt tokens split by origin as recent vLLM releases do
(`vllm:prompt_tokens_by_source_total{source=local_compute|local_cache_hit|
external_kv_transfer}`, a fixed prefix-cache hit ratio), its KV cache as vLLM v1 does
(`vllm:cache_config_info` with the `num_gpu_blocks` that `vllm_num_gpu_blocks` computes
as vLLM's profiling does, and `vllm:kv_cache_usage_perc` following the load,
`kv_cache_tokens_in_use`), and a few other vLLM families (request gauges, latency
histograms) a parser must skip.
The counters are the integral over simulated time of a rate function, which
`activity_rate()` derives from the scenario's SM activity of a GPU. Nothing here is
started at import; the agent starts and stops the server.
"""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
)
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector, CollectorRegistry

from gpuwatch.core.clock import Clock
from gpuwatch.simulate.device import GpuDevice
from gpuwatch.simulate.faults import FaultPlan
from gpuwatch.simulate.stand_in import SimulatedNvml

log = logging.getLogger(__name__)

RateFunction = Callable[[float], tuple[float, float]]
"""rate(t) -> (prompt tokens/s, generation tokens/s) at `t` seconds since the start."""

DEFAULT_MODEL = "meta-llama/Llama-3.1-8B-Instruct"
DEMO_PROMPT_TOKENS_PER_SECOND = 20_000.0
"""A suggested prompt rate at full SM activity (an 8B model on an H100), tokens/s."""
DEMO_GENERATION_TOKENS_PER_SECOND = 4_000.0
"""A suggested generation rate at full SM activity, tokens/s."""

_OUTPUT_TOKENS_PER_REQUEST = 250.0
_TOKENS_PER_SECOND_PER_SEQUENCE = 40.0
DEFAULT_BLOCK_SIZE = 16
"""vLLM's default KV cache block size on CUDA, tokens."""
DEFAULT_GPU_MEMORY_UTILIZATION = 0.9
"""vLLM's default share of the GPU's memory it may use."""
NON_TORCH_BYTES = round(1.79 * 2**30)
ACTIVATION_PEAK_BYTES = round(1.26 * 2**30)
"""What vLLM's memory profiling subtracts besides the weights before the KV cache, from
its log for meta-llama/Meta-Llama-3-8B on an H100 (the same shape as Llama-3.1-8B): "non
torch memory 1.79GiB, PyTorch activation peak memory 1.26GiB" (vllm-project/vllm pull
request #10511, "[core] overhaul memory profiling", Dec 2024)."""
_E2E_MEAN_SECONDS = 6.0
_TTFT_MEAN_SECONDS = 0.15
_E2E_BUCKETS = (0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0,
                60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0)  # fmt: skip
_TTFT_BUCKETS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5,
                 5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0)  # fmt: skip


class TokenIntegral:
    """∫₀ᵗ rate(s) ds for both rates, by steps of `step_seconds` (rate taken at each
    step's start): exact for rates constant over each step, deterministic, and cached,
    so calls at increasing times cost O(1) amortized."""

    def __init__(self, rate: RateFunction, step_seconds: float = 1.0) -> None:
        if step_seconds <= 0:
            raise ValueError("step_seconds must be positive")
        self._rate = rate
        self._step = step_seconds
        self._lock = threading.Lock()
        self._steps = 0  # whole steps summed so far
        self._sums = (0.0, 0.0)

    def _advance(self, steps: int, sums: tuple[float, float], until: int) -> tuple[float, float]:
        prompt, generation = sums
        for k in range(steps, until):
            p, g = self._rate(k * self._step)
            prompt += p * self._step
            generation += g * self._step
        return prompt, generation

    def at(self, t: float) -> tuple[float, float]:
        """(prompt, generation) tokens from 0 to `t` seconds (0 before 0)."""
        if t <= 0:
            return 0.0, 0.0
        k = math.floor(t / self._step)
        with self._lock:
            if k >= self._steps:
                self._sums = self._advance(self._steps, self._sums, k)
                self._steps = k
                sums = self._sums
            else:  # an earlier time: recompute (same order of additions, same result)
                sums = self._advance(0, (0.0, 0.0), k)
        p, g = self._rate(k * self._step)
        partial = t - k * self._step
        return sums[0] + p * partial, sums[1] + g * partial


def activity_rate(
    nv: SimulatedNvml, gpu_index: int, prompt_per_sm: float, generation_per_sm: float
) -> RateFunction:
    """A rate that follows GPU `gpu_index`'s noise-free SM activity in `nv`'s scenario:
    (prompt_per_sm x sm, generation_per_sm x sm) tokens/s, `sm` the 0-1 fraction.

    `t` is scenario time, so serve it with `start_time` = the stand-in's scenario start
    (`clock.time() - nv.scenario_time()`).
    """
    scenario = nv.scenario
    if not 0 <= gpu_index < len(scenario.gpus):
        raise ValueError(f"GPU {gpu_index} does not exist (the scenario has {len(scenario.gpus)})")
    if prompt_per_sm < 0 or generation_per_sm < 0:
        raise ValueError("token rates must be >= 0")
    # the same device the stand-in builds (same seed): its timeline, without the jitter
    device = GpuDevice(scenario, gpu_index, scenario.gpus[gpu_index], FaultPlan(scenario.faults))
    source = device.source

    def rate(t: float) -> tuple[float, float]:
        sm = source.at(max(t, 0.0)).sm
        return prompt_per_sm * sm, generation_per_sm * sm

    return rate


def vllm_num_gpu_blocks(
    total_bytes: int,
    weights_bytes: int,
    kv_bytes_per_token: float,
    *,
    gpu_memory_utilization: float = DEFAULT_GPU_MEMORY_UTILIZATION,
    block_size: int = DEFAULT_BLOCK_SIZE,
    non_torch_bytes: int = NON_TORCH_BYTES,
    activation_peak_bytes: int = ACTIVATION_PEAK_BYTES,
) -> int:
    """KV cache blocks as vLLM's profiling sizes them: (total x utilization - weights -
    non-torch memory - activation peak) / (block_size x KV bytes per token), rounded
    down, 0 when nothing is left. `total_bytes` is the memory CUDA sees (NVML's total
    less the driver's reservation).

    The demo's H100 (81,559 MiB, 454 reserved: 85,044,756,480 B) with Llama-3.1-8B in
    bf16 (weights 16,060,522,496 B, 131,072 B per token): (76,540,280,832 -
    16,060,522,496 - 1,921,997,783 - 1,352,914,698) / 2,097,152 = 27,277 blocks, 436,432
    tokens (vLLM's own log in the PR above: 53.29 GiB of KV cache, 27,284 blocks).
    """
    available = total_bytes * gpu_memory_utilization - weights_bytes
    available -= non_torch_bytes + activation_peak_bytes
    per_block = block_size * kv_bytes_per_token
    return max(math.floor(available / per_block), 0) if per_block > 0 else 0


def kv_cache_tokens_in_use(prompt_rate: float, generation_rate: float) -> float:
    """Tokens held in the KV cache at these rates (tokens/s), by Little's law.

    Requests arrive at generation_rate / 250 per second (250 output tokens each) and
    decode at 40 tokens/s, so each stays 6.25 s and generation_rate / 40 run at once
    (`vllm:num_requests_running`); each holds its prompt (prompt_rate / request rate
    tokens) and on average half its output (125): tokens in use = running x (prompt per
    request + 125) = 6.25 x prompt_rate + 3.125 x generation_rate. The demo at SM
    activity 0.35: 6.25 x 7,000 + 3.125 x 1,400 = 48,125 tokens, 11.0 % of its pool.
    """
    if generation_rate <= 0:
        return 0.0
    running = generation_rate / _TOKENS_PER_SECOND_PER_SEQUENCE
    prompt_per_request = prompt_rate * _OUTPUT_TOKENS_PER_REQUEST / generation_rate
    return running * (prompt_per_request + _OUTPUT_TOKENS_PER_REQUEST / 2)


def _exponential_buckets(
    count: float, mean: float, bounds: tuple[float, ...]
) -> list[tuple[str, float]]:
    """Cumulative whole-request buckets of `count` requests with exponential latencies."""
    buckets = [(repr(b), float(math.floor(count * (1.0 - math.exp(-b / mean))))) for b in bounds]
    buckets.append(("+Inf", float(math.floor(count))))
    return buckets


class _VllmFamilies(Collector):
    """The families of one /metrics response, from the integrated counters at one time;
    without `extras`, only those a token source reads."""

    def __init__(self, server: SimulatedVllmServer, *, extras: bool = True) -> None:
        self._server = server
        self._extras = extras

    def collect(self) -> Iterator[Metric]:
        server = self._server
        labels = ("model_name", "engine")
        values = [server.model_name, "0"]
        (prompt, generation), (prompt_rate, generation_rate) = server.counters()
        requests = generation / _OUTPUT_TOKENS_PER_REQUEST
        running = round(generation_rate / _TOKENS_PER_SECOND_PER_SEQUENCE)

        for name, doc, value in (
            ("vllm:num_requests_running", "Number of requests in model execution batches.",
             running),
            ("vllm:num_requests_waiting", "Number of requests waiting to be processed.", 0.0),
            ("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.",
             server.kv_cache_usage(prompt_rate, generation_rate)),
        ):  # fmt: skip
            gauge = GaugeMetricFamily(name, doc, labels=labels)
            gauge.add_metric(values, float(value))
            yield gauge
        for name, doc, value in (
            ("vllm:prompt_tokens", "Number of prefill tokens processed.", prompt),
            ("vllm:generation_tokens", "Number of generation tokens processed.", generation),
        ):
            counter = CounterMetricFamily(name, doc, labels=labels)
            counter.add_metric(values, value, created=server.start_time)
            yield counter
        by_source = CounterMetricFamily(
            "vllm:prompt_tokens_by_source",
            "Number of prompt tokens by source.",
            labels=(*labels, "source"),
        )
        cached = prompt * server.prefix_cache_hit_ratio
        for origin, value in (
            ("local_compute", prompt - cached),
            ("local_cache_hit", cached),
            ("external_kv_transfer", 0.0),
        ):
            by_source.add_metric([*values, origin], value, created=server.start_time)
        yield by_source
        yield from self._cache_info()
        if self._extras:
            yield from self._others(values, requests)

    def _others(self, values: list[str], requests: float) -> Iterator[Metric]:
        """The families no token source reads (a parser must skip them)."""
        labels = ("model_name", "engine")
        success = CounterMetricFamily(
            "vllm:request_success",
            "Count of successfully processed requests.",
            labels=(*labels, "finished_reason"),
        )
        success.add_metric([*values, "stop"], float(math.floor(requests * 0.9)))
        success.add_metric([*values, "length"], float(math.floor(requests * 0.1)))
        yield success
        for name, doc, mean, bounds in (
            ("vllm:e2e_request_latency_seconds", "Histogram of e2e request latency in seconds.",
             _E2E_MEAN_SECONDS, _E2E_BUCKETS),
            ("vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.",
             _TTFT_MEAN_SECONDS, _TTFT_BUCKETS),
        ):  # fmt: skip
            histogram = HistogramMetricFamily(name, doc, labels=labels)
            count = math.floor(requests)
            histogram.add_metric(values, _exponential_buckets(count, mean, bounds), count * mean)
            yield histogram

    def _cache_info(self) -> Iterator[Metric]:
        server = self._server
        info = GaugeMetricFamily(
            "vllm:cache_config_info",
            "Information of the LLMEngine CacheConfig",
            labels=(
                "block_size",
                "cache_dtype",
                "enable_prefix_caching",
                "engine",
                "gpu_memory_utilization",
                "num_cpu_blocks",
                "num_gpu_blocks",
            ),
        )
        blocks = server.num_gpu_blocks
        info.add_metric(
            [
                str(server.block_size),
                "auto",
                "True",
                "0",
                repr(server.gpu_memory_utilization),
                "None",
                "None" if blocks is None else str(blocks),
            ],
            1.0,
        )
        yield info


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def do_GET(self) -> None:
        path = self.path.split("?", 1)[0]
        if path == "/metrics":
            body, content_type, status = self.server.owner.render(), CONTENT_TYPE_LATEST, 200
        elif path == "/health":
            body, content_type, status = b"", "text/plain", 200
        else:
            body, content_type, status = b"Not Found", "text/plain", 404
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: a request log line per scrape would drown the agent's own logs."""


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    owner: SimulatedVllmServer

    def handle_error(self, request: Any, client_address: Any) -> None:  # noqa: ARG002
        """A scraper that gave up mid-response: log quietly, never a traceback on stderr."""
        log.debug("simulated vLLM server: request from %s failed", client_address, exc_info=True)


class SimulatedVllmServer:
    """vLLM's /metrics over real HTTP, counters integrated from `rate` over simulated time.

    `start_time` (epoch s on `clock`) is t = 0 of `rate`. Bind with `port=0` for a free
    port; `url` is known once started.
    """

    def __init__(
        self,
        clock: Clock,
        start_time: float,
        rate: RateFunction,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        model_name: str = DEFAULT_MODEL,
        step_seconds: float = 1.0,
        prefix_cache_hit_ratio: float = 0.0,
        num_gpu_blocks: int | None = None,
        block_size: int = DEFAULT_BLOCK_SIZE,
        gpu_memory_utilization: float = DEFAULT_GPU_MEMORY_UTILIZATION,
    ) -> None:
        """`prefix_cache_hit_ratio` (0-1): the share of prompt tokens served from the
        prefix cache (`local_cache_hit`); the rest is `local_compute`. `num_gpu_blocks`
        of `block_size` tokens: the KV cache pool (`vllm_num_gpu_blocks`); None is
        published as "None" (before vLLM's profiling), with a usage of 0."""
        if not 0.0 <= prefix_cache_hit_ratio <= 1.0:
            raise ValueError("prefix_cache_hit_ratio must be within 0-1")
        if block_size < 1 or (num_gpu_blocks is not None and num_gpu_blocks < 0):
            raise ValueError("block_size must be >= 1 and num_gpu_blocks >= 0")
        self.prefix_cache_hit_ratio = prefix_cache_hit_ratio
        self.num_gpu_blocks = num_gpu_blocks
        self.block_size = block_size
        self.gpu_memory_utilization = gpu_memory_utilization
        self.clock = clock
        self.start_time = start_time
        self.model_name = model_name
        self._rate = rate
        self._integral = TokenIntegral(rate, step_seconds)
        self._host = host
        self._port = port
        self._latest = 0.0
        self._time_lock = threading.Lock()
        self._registry = CollectorRegistry(auto_describe=False)
        self._registry.register(_VllmFamilies(self))
        self._read_registry = CollectorRegistry(auto_describe=False)
        self._read_registry.register(_VllmFamilies(self, extras=False))
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        """http://host:port/metrics; RuntimeError before `start()`."""
        if self._server is None:
            raise RuntimeError("the server is not started")
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}/metrics"

    def elapsed_seconds(self) -> float:
        """Simulated seconds since `start_time`, never going backwards between calls."""
        with self._time_lock:
            self._latest = max(self._latest, self.clock.time() - self.start_time)
            return self._latest

    def counters(self) -> tuple[tuple[float, float], tuple[float, float]]:
        """((prompt, generation) tokens so far, (prompt, generation) tokens/s now)."""
        t = self.elapsed_seconds()
        return self._integral.at(t), self._rate(t)

    def kv_cache_usage(self, prompt_rate: float, generation_rate: float) -> float:
        """`vllm:kv_cache_usage_perc` at these rates: `kv_cache_tokens_in_use` over the
        pool (num_gpu_blocks x block_size), at most 1; 0 without a pool."""
        pool = (self.num_gpu_blocks or 0) * self.block_size
        if pool <= 0:
            return 0.0
        return min(kv_cache_tokens_in_use(prompt_rate, generation_rate) / pool, 1.0)

    def render(self) -> bytes:
        """The /metrics body now (Prometheus text format)."""
        return generate_latest(self._registry)

    def render_read(self) -> bytes:
        """The /metrics body now with only the families a token source reads (counters,
        KV cache): what an in-process replay needs, at a quarter of the cost."""
        return generate_latest(self._read_registry)

    def start(self) -> None:
        """Bind and serve in a daemon thread; RuntimeError if already started."""
        if self._server is not None:
            raise RuntimeError("the server is already started")
        server = _Server((self._host, self._port), _Handler)
        server.owner = self
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever,
            kwargs={"poll_interval": 0.05},
            name="simulated-vllm",
            daemon=True,
        )
        self._thread.start()

    def stop(self) -> None:
        """Stop serving and close the socket (a no-op when not started)."""
        server, thread = self._server, self._thread
        if server is None:
            return
        server.shutdown()
        server.server_close()
        if thread is not None:
            thread.join(timeout=5.0)
        self._server = None
        self._thread = None

    def __enter__(self) -> SimulatedVllmServer:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()
