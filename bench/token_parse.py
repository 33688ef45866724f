"""Token-source scrape and parse of a ~200 KB vLLM /metrics page.

The page is what a data-parallel vLLM deployment exposes: prometheus-client's text
format with vLLM v1's histograms (latencies, token counts per request and per
iteration) for several model_name/engine label sets, built with real prometheus-client
metrics. It is served as static bytes by a `ThreadingHTTPServer` on 127.0.0.1.

Measured in the same run, interleaved round by round (median of each):

* scrape: `TokenCollector.scrape()` — HTTP GET over loopback, the pre-filtering parse
  of the two vLLM counters, reset correction;
* parse: `gpuwatch.tokens.parse.counter_series` on the page's bytes;
* baseline: prometheus-client's parser alone on the same bytes
  (`text_string_to_metric_families`, decoding included, summing the two counters).

Target: scrape <= 1.2x the baseline. Both methods must agree on the totals.

    python bench/token_parse.py [--quick]
"""

from __future__ import annotations

import argparse
import random
import statistics
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from benchlib import format_table, verdict
from gpuwatch.core.clock import SystemClock
from gpuwatch.tokens import COUNTER_NAMES, TokenCollector, TokenSourceConfig
from gpuwatch.tokens.parse import counter_series

TARGET_RATIO = 1.2
PAGE_BYTES = 200_000
NAMES = COUNTER_NAMES["vllm"]
MODELS = ("meta-llama/Llama-3.1-8B-Instruct", "Qwen/Qwen2.5-7B-Instruct")

LATENCY = (0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0,
           60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0)  # fmt: skip
TTFT = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0,
        7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0)  # fmt: skip
ITL = (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5,
       10.0, 20.0, 40.0, 80.0)  # fmt: skip
TOKENS = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000)
ITERATION = (1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384)
HISTOGRAMS: dict[str, tuple[tuple[float, ...], Callable[[random.Random], float]]] = {
    "vllm:time_to_first_token_seconds": (TTFT, lambda r: r.expovariate(1 / 0.15)),
    "vllm:inter_token_latency_seconds": (ITL, lambda r: r.expovariate(1 / 0.03)),
    "vllm:time_per_output_token_seconds": (ITL, lambda r: r.expovariate(1 / 0.03)),
    "vllm:e2e_request_latency_seconds": (LATENCY, lambda r: r.expovariate(1 / 6.0)),
    "vllm:request_queue_time_seconds": (LATENCY, lambda r: r.expovariate(1 / 0.5)),
    "vllm:request_inference_time_seconds": (LATENCY, lambda r: r.expovariate(1 / 5.0)),
    "vllm:request_prefill_time_seconds": (LATENCY, lambda r: r.expovariate(1 / 0.2)),
    "vllm:request_decode_time_seconds": (LATENCY, lambda r: r.expovariate(1 / 5.0)),
    "vllm:request_prompt_tokens": (TOKENS, lambda r: r.expovariate(1 / 900.0)),
    "vllm:request_generation_tokens": (TOKENS, lambda r: r.expovariate(1 / 250.0)),
    "vllm:request_max_num_generation_tokens": (TOKENS, lambda r: r.choice((256, 1024, 4096))),
    "vllm:request_params_max_tokens": (TOKENS, lambda r: r.choice((256, 1024, 4096))),
    "vllm:iteration_tokens_total": (ITERATION, lambda r: r.expovariate(1 / 300.0)),
}


def vllm_page(engines: int, seed: int = 0) -> bytes:
    """A vLLM /metrics page with `engines` engines per model (prometheus-client format)."""
    rng = random.Random(seed)
    registry = CollectorRegistry()
    labels = ("model_name", "engine")
    gauges = [
        Gauge(name, "gauge", labels, registry=registry)
        for name in ("vllm:num_requests_running", "vllm:num_requests_waiting",
                     "vllm:kv_cache_usage_perc")
    ]  # fmt: skip
    counters = [
        Counter(name, "counter", labels, registry=registry)
        for name in ("vllm:prompt_tokens", "vllm:generation_tokens", "vllm:num_preemptions",
                     "vllm:prefix_cache_queries", "vllm:prefix_cache_hits")
    ]  # fmt: skip
    success = Counter(
        "vllm:request_success", "requests", (*labels, "finished_reason"), registry=registry
    )
    histograms = [
        (Histogram(name, "histogram", labels, buckets=buckets, registry=registry), draw)
        for name, (buckets, draw) in HISTOGRAMS.items()
    ]
    for model in MODELS:
        for engine in range(engines):
            values = (model, str(engine))
            for gauge in gauges:
                gauge.labels(*values).set(rng.random() * 10)
            for counter in counters:
                counter.labels(*values).inc(rng.randint(10**6, 10**9))
            for reason in ("stop", "length", "abort"):
                success.labels(*values, reason).inc(rng.randint(0, 10**5))
            for histogram, draw in histograms:
                child = histogram.labels(*values)
                for _ in range(40):
                    child.observe(draw(rng))
    return generate_latest(registry)


def page_of_about(size: int) -> bytes:
    """The vLLM page whose size is closest to `size` bytes."""
    pages = [vllm_page(engines) for engines in range(1, 7)]
    return min(pages, key=lambda page: abs(len(page) - size))


class StaticServer:
    """`body` at every path, over HTTP/1.0 on 127.0.0.1 (vLLM's server closes likewise)."""

    def __init__(self, body: bytes) -> None:
        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}/metrics"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> StaticServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()


def baseline_totals(body: bytes) -> tuple[float, float]:
    """prometheus-client's parser alone: every family parsed, the two counters summed."""
    sums = dict.fromkeys(NAMES, 0.0)
    for family in text_string_to_metric_families(body.decode("utf-8")):
        for sample in family.samples:
            if sample.name in sums:
                sums[sample.name] += sample.value
    return sums[NAMES[0]], sums[NAMES[1]]


def gpuwatch_totals(body: bytes) -> tuple[float, float]:
    """gpuwatch's parse: the two counters' series, summed."""
    series = counter_series(body, NAMES, {})
    return sum(series[NAMES[0]].values()), sum(series[NAMES[1]].values())


def timed(run: Callable[[], object]) -> float:
    start = time.perf_counter()
    run()
    return time.perf_counter() - start


def rounds(measures: dict[str, Callable[[], object]], count: int) -> Iterator[dict[str, float]]:
    """`count` rounds, each timing every measure once, the order rotating per round."""
    names = list(measures)
    for i in range(count):
        order = names[i % len(names) :] + names[: i % len(names)]
        yield {name: timed(measures[name]) for name in order}


def run(quick: bool) -> dict[str, Any]:
    body = page_of_about(PAGE_BYTES)
    expected = baseline_totals(body)
    if gpuwatch_totals(body) != expected:
        raise AssertionError("gpuwatch and prometheus-client disagree on the totals")
    with StaticServer(body) as server:
        source = TokenSourceConfig(name="vllm", url=server.url, timeout_seconds=2.0)
        collector = TokenCollector([source], SystemClock())
        reading = collector.scrape("vllm")
        if not reading.up:
            raise AssertionError(f"the scrape failed: {reading.error}")
        measures: dict[str, Callable[[], object]] = {
            "scrape": lambda: collector.scrape("vllm"),
            "parse": lambda: gpuwatch_totals(body),
            "baseline": lambda: baseline_totals(body),
        }
        for _ in rounds(measures, 3):  # warm-up
            pass
        samples = list(rounds(measures, 15 if quick else 80))
        if not collector.scrape("vllm").up:
            raise AssertionError("a scrape failed during the run")
    median = {name: statistics.median(s[name] for s in samples) for name in measures}
    return {
        "page_bytes": len(body),
        "page_lines": body.count(b"\n"),
        "rounds": len(samples),
        "median_seconds": median,
    }


def report(result: dict[str, Any]) -> str:
    median = result["median_seconds"]
    base = median["baseline"]
    rows = []
    for name, label in (
        ("scrape", "scrape (HTTP GET over loopback + parse)"),
        ("parse", "parse only"),
    ):
        ratio = median[name] / base
        rows.append(
            [label, f"{median[name] * 1e3:.3f} ms", f"{base * 1e3:.3f} ms", f"{ratio:.3f}x",
             verdict(ratio <= TARGET_RATIO)]
        )  # fmt: skip
    table = format_table(
        ["measurement", "gpuwatch", "prometheus-client parser", "ratio", "target"], rows
    )
    return (
        f"token source: vLLM page of {result['page_bytes'] / 1000:.0f} KB "
        f"({result['page_lines']} lines), median of {result['rounds']} rounds "
        f"(target <= {TARGET_RATIO}x prometheus-client's parser alone)\n{table}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    print(report(run(parser.parse_args().quick)))


if __name__ == "__main__":
    main()
