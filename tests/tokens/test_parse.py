"""gpuwatch.tokens.parse on literal /metrics bodies."""

from __future__ import annotations

import random

import pytest
from prometheus_client.parser import text_string_to_metric_families

from gpuwatch.tokens.config import COUNTER_NAMES
from gpuwatch.tokens.parse import (
    ExpositionError,
    counter_series,
    find_samples,
    parse_sample_line,
)
from tests.tokens.conftest import vllm_page

VLLM = COUNTER_NAMES["vllm"]

SGLANG_GAUGES = b"""\
# HELP sglang:prompt_tokens_total Number of prefill tokens processed.
# TYPE sglang:prompt_tokens_total gauge
sglang:prompt_tokens_total{model_name="qwen"} 1200.0
# HELP sglang:generation_tokens_total Number of generation tokens processed.
# TYPE sglang:generation_tokens_total gauge
sglang:generation_tokens_total{model_name="qwen"} 300.0
"""

LLAMACPP = b"""\
# HELP llamacpp:prompt_tokens_total Number of prompt tokens processed.
# TYPE llamacpp:prompt_tokens_total counter
llamacpp:prompt_tokens_total 812
# HELP llamacpp:prompt_seconds_total Prompt process time
# TYPE llamacpp:prompt_seconds_total counter
llamacpp:prompt_seconds_total 1.5
# HELP llamacpp:tokens_predicted_total Number of generation tokens processed.
# TYPE llamacpp:tokens_predicted_total counter
llamacpp:tokens_predicted_total 2048
"""

TGI = b"""\
# TYPE tgi_request_input_length histogram
tgi_request_input_length_bucket{le="10"} 1
tgi_request_input_length_bucket{le="+Inf"} 3
tgi_request_input_length_sum 420
tgi_request_input_length_count 3
# TYPE tgi_request_generated_tokens histogram
tgi_request_generated_tokens_bucket{le="+Inf"} 3
tgi_request_generated_tokens_sum 96
tgi_request_generated_tokens_count 3
"""


def totals(
    body: bytes, names: tuple[str, str], matchers: dict[str, str] | None = None
) -> list[float]:
    series = counter_series(body, names, matchers or {})
    return [sum(series[name].values()) for name in names]


def test_vllm_counters_summed_over_series_created_samples_ignored() -> None:
    body = vllm_page(100.0, 40.0, models=("a", "b")).encode()
    assert totals(body, VLLM) == [300.0, 120.0]


@pytest.mark.parametrize(
    ("kind", "body", "expected"),
    [
        ("sglang", SGLANG_GAUGES, [1200.0, 300.0]),
        ("llamacpp", LLAMACPP, [812.0, 2048.0]),
        ("tgi", TGI, [420.0, 96.0]),
    ],
)
def test_every_server_kind(kind: str, body: bytes, expected: list[float]) -> None:
    assert totals(body, COUNTER_NAMES[kind]) == expected


def test_label_matchers_select_series() -> None:
    body = vllm_page(100.0, 40.0, models=("a", "b")).encode()
    assert totals(body, VLLM, {"model_name": "b"}) == [200.0, 80.0]
    assert totals(body, VLLM, {"model_name": "b", "engine": "0"}) == [200.0, 80.0]


def test_matchers_that_match_nothing_are_an_error() -> None:
    body = vllm_page(100.0, 40.0).encode()
    with pytest.raises(ExpositionError):
        counter_series(body, VLLM, {"model_name": "nope"})


def test_declared_family_without_samples_counts_zero() -> None:
    body = b"# HELP vllm:prompt_tokens_total x\n# TYPE vllm:prompt_tokens_total counter\n" + (
        b"# TYPE vllm:generation_tokens counter\n"  # OpenMetrics style: family name only
    )
    assert find_samples(body, VLLM) == {VLLM[0]: [], VLLM[1]: []}
    assert totals(body, VLLM) == [0.0, 0.0]


@pytest.mark.parametrize(
    "body",
    [
        b"",
        b"<html><body>502 Bad Gateway</body></html>",
        b"\x00\xff\xfe garbage \x89PNG",
        b"vllm:prompt_tokens_total_extra 5\nvllm:generation_tokens_total_x 1\n",
        b"# HELP vllm:prompt_tokens_created x\nvllm:prompt_tokens_created 5\n",
        b'other{x="vllm:prompt_tokens_total 5"} 1\nvllm:generation_tokens_total 1\n',
    ],
)
def test_missing_counters_are_an_error(body: bytes) -> None:
    with pytest.raises(ExpositionError):
        counter_series(body, VLLM, {})


@pytest.mark.parametrize(
    "line",
    [
        'vllm:prompt_tokens_total{model_name="a"',  # truncated labels
        'vllm:prompt_tokens_total{model_name="a} 5',  # unterminated quote
        "vllm:prompt_tokens_total{model_name=a} 5",
        'vllm:prompt_tokens_total{model_name="a"}',  # no value
        'vllm:prompt_tokens_total{model_name="a"} five',
        "vllm:prompt_tokens_total 1_000",
        "vllm:prompt_tokens_total 5 6 7",
        'vllm:prompt_tokens_total{a="1",a="2"} 5',
        'vllm:prompt_tokens_total{a="1" b="2"} 5',
    ],
)
def test_malformed_wanted_lines_are_an_error(line: str) -> None:
    with pytest.raises(ExpositionError):
        parse_sample_line(line, VLLM[0])
    body = f"{line}\nvllm:generation_tokens_total 1\n".encode()
    with pytest.raises(ExpositionError):
        counter_series(body, VLLM, {})


def test_escaped_label_values_timestamps_and_exemplars() -> None:
    line = (
        r'vllm:prompt_tokens_total{model_name="a\"b\\c\n} d",engine="0",} 7 1700000000000'
        r' # {trace_id="x y}"} 1.0 1700000000.5'
    )
    labels, value = parse_sample_line(line, VLLM[0])
    assert value == 7.0
    assert labels == (("engine", "0"), ("model_name", 'a"b\\c\n} d'))
    assert parse_sample_line("vllm:prompt_tokens_total\t+Inf", VLLM[0]) == ((), float("inf"))
    assert parse_sample_line('vllm:prompt_tokens_total 3 # {a="b"} 1', VLLM[0]) == ((), 3.0)


def test_non_finite_or_negative_counts_are_an_error() -> None:
    for value in ("NaN", "+Inf", "-1"):
        body = f"vllm:prompt_tokens_total {value}\nvllm:generation_tokens_total 1\n".encode()
        with pytest.raises(ExpositionError):
            counter_series(body, VLLM, {})


def test_duplicate_series_are_an_error() -> None:
    body = (
        b"vllm:prompt_tokens_total 1\nvllm:prompt_tokens_total 2\nvllm:generation_tokens_total 1\n"
    )
    with pytest.raises(ExpositionError):
        counter_series(body, VLLM, {})


def test_openmetrics_eof_crlf_and_leading_blanks() -> None:
    body = (
        b"# TYPE vllm:prompt_tokens counter\r\n"
        b'vllm:prompt_tokens_total{model_name="a"} 5\r\n'
        b"  vllm:generation_tokens_total 2\r\n"
        b"# EOF\r\n"
        b"vllm:prompt_tokens_total 99\n"
    )
    assert totals(body, VLLM) == [5.0, 2.0]
    with pytest.raises(ExpositionError):  # nothing counts after # EOF
        counter_series(
            b"# EOF\nvllm:prompt_tokens_total 1\nvllm:generation_tokens_total 1\n", VLLM, {}
        )


def test_non_utf8_wanted_line_is_an_error() -> None:
    body = b'vllm:prompt_tokens_total{model_name="\xff"} 1\nvllm:generation_tokens_total 1\n'
    with pytest.raises(ExpositionError):
        counter_series(body, VLLM, {})


def _random_value(rng: random.Random) -> str:
    alphabet = 'ab "\\\n}{,=#'
    return "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 8)))


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def test_agrees_with_prometheus_client_on_random_pages() -> None:
    rng = random.Random(7)
    for _ in range(200):
        lines = []
        for name in VLLM:
            lines.append(f"# TYPE {name} counter")
            for i in range(rng.randint(1, 4)):
                value = _escape(_random_value(rng))
                lines.append(f'{name}{{engine="{i}",model_name="{value}"}} {rng.randint(0, 10**9)}')
        lines.append(
            '# TYPE vllm:x histogram\nvllm:x_bucket{le="+Inf",m="vllm:prompt_tokens_total 9"} 1'
        )
        text = "\n".join(lines) + "\n"
        expected = dict.fromkeys(VLLM, 0.0)
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                if sample.name in expected:
                    expected[sample.name] += sample.value
        assert totals(text.encode(), VLLM) == [expected[n] for n in VLLM]


BY_SOURCE = "vllm:prompt_tokens_by_source_total"


def test_an_optional_counter_is_read_when_present_and_left_out_when_not() -> None:
    origins = {"local_compute": 70.0, "local_cache_hit": 30.0}
    body = vllm_page(100.0, 40.0, models=("a", "b"), by_source=origins).encode()
    series = counter_series(body, VLLM, {"model_name": "b"}, optional=(BY_SOURCE,))
    assert {dict(labels)["source"]: v for labels, v in series[BY_SOURCE].items()} == {
        "local_compute": 140.0,
        "local_cache_hit": 60.0,
    }
    assert sum(series[VLLM[0]].values()) == 200.0
    plain = vllm_page(100.0, 40.0).encode()
    assert BY_SOURCE not in counter_series(plain, VLLM, {}, optional=(BY_SOURCE,))


def test_an_optional_counter_without_a_matching_series_is_empty_not_an_error() -> None:
    body = vllm_page(100.0, 40.0, models=("a",), by_source={"local_compute": 1.0}).encode()
    body = body.replace(b'model_name="a",source=', b'model_name="z",source=')
    series = counter_series(body, VLLM, {"model_name": "a"}, optional=(BY_SOURCE,))
    assert series[BY_SOURCE] == {}
    assert sum(series[VLLM[1]].values()) == 40.0
