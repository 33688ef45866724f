"""IMDSv2 against a loopback server: token handshake, overrides, failures, backoff."""

from __future__ import annotations

import logging
import time
import urllib.error
import urllib.request

import pytest

from gpuwatch.billing import BillingConfig, InstanceIdentity
from gpuwatch.billing.health import SourceError
from gpuwatch.billing.identity import IdentityResolver, ImdsClient
from tests.billing.conftest import INSTANCE_ID, START, FakeImds


def test_token_put_then_gets_with_the_token(imds: FakeImds) -> None:
    identity = ImdsClient(imds.endpoint, timeout_seconds=1.0).fetch()
    assert identity == InstanceIdentity(INSTANCE_ID, "p5.48xlarge", "us-east-1", "on-demand")
    methods = [(method, path) for method, path, _ in imds.requests]
    assert methods[0] == ("PUT", "/latest/api/token")
    assert all(status == 200 for *_, status in imds.requests)
    assert len(imds.tokens) == 1


def test_a_get_without_the_token_is_refused(imds: FakeImds) -> None:
    """The fake behaves like IMDSv2: no token, 401 (so the client must PUT first)."""
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with pytest.raises(urllib.error.HTTPError) as caught:
        opener.open(f"{imds.endpoint}/latest/meta-data/instance-id", timeout=1.0)
    caught.value.close()
    assert caught.value.code == 401


def test_a_rejected_token_is_a_failure_without_the_token_in_the_message(imds: FakeImds) -> None:
    imds.accept_tokens = False
    with pytest.raises(SourceError) as caught:
        ImdsClient(imds.endpoint, timeout_seconds=1.0).fetch()
    assert "HTTP 401" in str(caught.value)
    assert "IMDSTOKEN" not in str(caught.value)
    assert caught.value.__cause__ is None


def test_put_refused_when_imds_is_disabled(imds: FakeImds) -> None:
    imds.put_status = 403
    with pytest.raises(SourceError, match="HTTP 403"):
        ImdsClient(imds.endpoint, timeout_seconds=1.0).fetch()


def test_an_unanswered_put_times_out_quickly_and_names_the_hop_limit(imds: FakeImds) -> None:
    """What a container sees when the metadata hop limit is 1: the PUT never returns."""
    imds.hang_put = True
    started = time.monotonic()
    with pytest.raises(SourceError, match="hop limit must be 2"):
        ImdsClient(imds.endpoint, timeout_seconds=0.2).fetch()
    assert time.monotonic() - started < 2.0


def test_nothing_listening_is_a_failure() -> None:
    with pytest.raises(SourceError, match="no answer from IMDS"):
        ImdsClient("http://127.0.0.1:9", timeout_seconds=0.2).fetch()


def test_missing_lifecycle_is_none_but_missing_instance_type_fails(imds: FakeImds) -> None:
    del imds.metadata["meta-data/instance-life-cycle"]
    assert ImdsClient(imds.endpoint, timeout_seconds=1.0).fetch().lifecycle is None
    del imds.metadata["meta-data/instance-type"]
    with pytest.raises(SourceError, match="no meta-data/instance-type"):
        ImdsClient(imds.endpoint, timeout_seconds=1.0).fetch()


def test_garbage_values_are_refused(imds: FakeImds) -> None:
    imds.metadata["meta-data/instance-type"] = 'p5.48xlarge"} evil{'
    with pytest.raises(SourceError, match="unexpected meta-data/instance-type"):
        ImdsClient(imds.endpoint, timeout_seconds=1.0).fetch()


def test_config_overrides_win_and_the_identity_is_cached(imds: FakeImds) -> None:
    config = BillingConfig(imds=True, imds_endpoint=imds.endpoint, instance_type="p4d.24xlarge")
    resolver = IdentityResolver(config, timeout_seconds=1.0)
    first = resolver.resolve(START)
    assert first == InstanceIdentity(INSTANCE_ID, "p4d.24xlarge", "us-east-1", "on-demand")
    asked = len(imds.requests)
    assert resolver.resolve(START + 60) == first
    assert len(imds.requests) == asked  # asked once, then cached


def test_without_imds_the_identity_is_the_config_or_none() -> None:
    assert IdentityResolver(BillingConfig(), timeout_seconds=1.0).resolve(START) is None
    resolver = IdentityResolver(BillingConfig(region="eu-west-1"), timeout_seconds=1.0)
    assert resolver.resolve(START) == InstanceIdentity(None, None, "eu-west-1", None)
    assert not resolver.enabled


def test_failures_back_off_and_log_once_per_episode(
    imds: FakeImds, caplog: pytest.LogCaptureFixture
) -> None:
    imds.put_status = 500
    resolver = IdentityResolver(
        BillingConfig(imds=True, imds_endpoint=imds.endpoint), timeout_seconds=1.0
    )
    with caplog.at_level(logging.INFO, logger="gpuwatch.billing"):
        assert resolver.resolve(START) is None
        assert resolver.resolve(START + 10) is None  # within the 30 s backoff: not asked
        assert len(imds.requests) == 1
        assert resolver.resolve(START + 31) is None  # asked again, still failing
        assert len(imds.requests) == 2
        assert resolver.resolve(START + 60) is None  # backoff doubled to 60 s
        assert len(imds.requests) == 2
        imds.put_status = 200
        assert resolver.resolve(START + 92) is not None
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    infos = [r for r in caplog.records if r.levelno == logging.INFO]
    assert len(warnings) == 1
    assert len(infos) == 1  # the recovery
    assert resolver.health.up
