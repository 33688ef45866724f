"""Reaching the API: basic auth against a real Prometheus (web config), credentials never
shown, options refused with one line naming the flag, label values escaped."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from gpuwatch.promapi.client import Client, PrometheusError, PrometheusOptions, redact_url
from gpuwatch.promapi.labels import selector
from gpuwatch.report.model import Period
from gpuwatch.report.prometheus import load
from tests.report_prometheus.conftest import start_prometheus, stop

PASSWORD = "s3cret-pass"
# bcrypt of PASSWORD (cost 4), as Prometheus's --web.config.file wants it
PASSWORD_HASH = "$2b$04$04AYKJdHBYIdJnsA2jtDH.hwo4AcDYAcbgfeFsJiAQbWH.zWS4iAO"
PERIOD = Period(datetime(2026, 10, 1, tzinfo=UTC), datetime(2026, 10, 2, tzinfo=UTC), "d")


@pytest.fixture(scope="module")
def authed_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    workdir = tmp_path_factory.mktemp("prometheus-auth")
    web = workdir / "web.yml"
    web.write_text(f"basic_auth_users:\n  reporter: {PASSWORD_HASH}\n")
    url, proc = start_prometheus(
        workdir / "data", workdir, [f"--web.config.file={web}"], ready_user=("reporter", PASSWORD)
    )
    try:
        yield url
    finally:
        stop(proc)


def test_basic_auth_from_a_password_file(authed_url: str, tmp_path: Path) -> None:
    secret = tmp_path / "password"
    secret.write_text(PASSWORD + "\n")
    options = PrometheusOptions(
        authed_url, basic_auth_user="reporter", basic_auth_password_file=secret
    )
    data = load(options, PERIOD)
    assert data.gpu_days == ()
    assert data.expected_gpu_seconds is None


def test_credentials_in_the_url_are_used_and_never_shown(authed_url: str) -> None:
    url = authed_url.replace("http://", f"http://reporter:{PASSWORD}@") + "/?x=1"
    data = load(PrometheusOptions(url), PERIOD)
    assert data.source == authed_url
    assert PASSWORD not in data.source


def test_wrong_password_is_one_line_without_secrets(authed_url: str) -> None:
    url = authed_url.replace("http://", "http://reporter:not-the-password@")
    with pytest.raises(PrometheusError) as failure:
        load(PrometheusOptions(url), PERIOD)
    message = str(failure.value)
    assert message.startswith(f"{authed_url}: HTTP 401")
    assert "not-the-password" not in message
    assert "\n" not in message


def test_unreachable_names_the_url_only() -> None:
    options = PrometheusOptions("http://user:hunter2@127.0.0.1:9/prefix?token=abc")
    with pytest.raises(PrometheusError) as failure:
        Client(options).vector("up", 0.0)
    assert str(failure.value).startswith("http://127.0.0.1:9/prefix: ")
    assert "hunter2" not in str(failure.value)
    assert "abc" not in str(failure.value)


def test_unreadable_token_file_names_the_flag(tmp_path: Path) -> None:
    options = PrometheusOptions("http://127.0.0.1:9", bearer_token_file=tmp_path / "absent")
    with pytest.raises(PrometheusError, match=r"^--prometheus-bearer-token-file: cannot read"):
        Client(options)


@pytest.mark.parametrize(
    ("kwargs", "flag"),
    [
        ({"url": "ftp://h"}, "--prometheus:"),
        ({"url": "http://h", "timeout_seconds": 0.0}, "--prometheus-timeout:"),
        ({"url": "http://h", "basic_auth_user": "u"}, "--prometheus-password-file:"),
        ({"url": "http://h", "headers": (("X-A", "b\r\nEvil: 1"),)}, "--prometheus-header:"),
        (
            {"url": "http://h", "bearer_token_file": Path("t"), "basic_auth_user": "u"},
            "--prometheus-bearer-token-file:",
        ),
        ({"url": "http://h", "scrape_interval_seconds": -1.0}, "--prometheus-scrape-interval:"),
    ],
)
def test_bad_options_name_the_flag(kwargs: dict[str, object], flag: str) -> None:
    with pytest.raises(ValueError, match=f"^{flag}"):
        PrometheusOptions(**kwargs)  # type: ignore[arg-type]


def test_redaction_keeps_path_prefix_and_ipv6() -> None:
    assert redact_url("https://u:p@[::1]:8428/select/0/prometheus/?a=b#f") == (
        "https://[::1]:8428/select/0/prometheus"
    )


def test_hostile_label_values_are_escaped_against_a_real_prometheus(prometheus_url: str) -> None:
    labels = (("instance", 'x"} or vector(1) or {a="'), ("uuid", "back\\slash\nnew"))
    promql = selector("gpuwatch_gpu_cost_usd_total", labels)
    assert Client(PrometheusOptions(prometheus_url)).vector(promql, PERIOD.end_epoch) == {}
