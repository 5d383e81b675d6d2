"""The proxy's own client credentials in exchange mode: where the secret comes from, and how it is sent."""

from __future__ import annotations

import asyncio
import base64
import json
import threading

import pytest

from fixtures.aws_endpoint import AwsRefusal, aws_environment, refusing_url, silent_endpoint
from fixtures.clock import Clock
from fixtures.logs import capture_logs
from fixtures.servers import serve_in_thread
from toolsearch.app import build_proxy
from toolsearch.auth.client_credentials import (
    FAILURE_TTL,
    ClientCredentials,
    SecretUnavailable,
    aws_error_code,
    read_aws_secret,
)
from toolsearch.settings import Settings

ARN = "arn:aws:secretsmanager:eu-west-1:123456789012:secret:toolsearch-client-AbCdEf"


async def test_a_secret_named_by_arn_is_read_once_for_everybody_waiting():
    reads: list[str] = []

    def reader(arn: str) -> str:
        reads.append(arn)
        return "s3:cr%t"

    credentials = ClientCredentials("proxy client", secret_arn=ARN, reader=reader)
    answers = await asyncio.gather(*(credentials() for _ in range(10)))
    assert reads == [ARN]
    form, headers = answers[0]
    assert form == {"client_id": "proxy client"}
    # RFC 6749 §2.3.1: both parts form-encoded before Basic.
    assert base64.b64decode(headers["Authorization"].removeprefix("Basic ")) == b"proxy%20client:s3%3Acr%25t"


async def test_client_secret_post_sends_both_in_the_form():
    credentials = ClientCredentials("proxy", "secret", method="client_secret_post")
    assert await credentials() == ({"client_id": "proxy", "client_secret": "secret"}, {})


def test_an_arn_that_is_not_one_is_refused_without_asking_aws():
    for arn in ("not-an-arn", "arn:aws:s3:::bucket/key"):
        with pytest.raises(SecretUnavailable) as refused:
            read_aws_secret(arn)
        assert arn in refused.value.detail and arn not in str(refused.value)


def test_a_json_secret_gives_its_client_secret_field():
    from toolsearch.auth.client_credentials import _field_or_whole

    assert _field_or_whole(json.dumps({"client_secret": "abc", "other": 1})) == "abc"
    assert _field_or_whole("plain") == "plain"
    assert _field_or_whole('["a"]') == '["a"]'


def test_exchange_mode_without_what_it_needs_does_not_start():
    with pytest.raises(ValueError) as refused:
        build_proxy(Settings(upstream="http://127.0.0.1:9/mcp", embedder="none", auth_mode="exchange"))
    message = str(refused.value)
    for name in ("public_url", "oauth_issuer", "oauth_token_url", "oauth_client_id", "oauth_jwks_url"):
        assert name in message
    assert "oauth_client_secret or oauth_client_secret_arn" in message


# -- an unreadable secret: real botocore against loopback endpoints that refuse or never answer

SSM_ARN = "arn:aws:ssm:eu-west-1:123456789012:parameter/toolsearch/client-secret"
ARN_PARTS = ("123456789012", "eu-west-1", "toolsearch-client", "toolsearch/client-secret", "arn:aws")


def quick_reader(arn: str) -> str:
    """The real reader with short timeouts and one attempt (the defaults take seconds to fail)."""
    from botocore.config import Config

    retries = {"total_max_attempts": 1, "mode": "standard"}
    config = Config(connect_timeout=0.3, read_timeout=0.3, retries=retries)
    return read_aws_secret(arn, config=config)


def names_no_arn(text: str) -> bool:
    return not any(part in text for part in ARN_PARTS)


@pytest.mark.parametrize("arn", [ARN, SSM_ARN], ids=["secretsmanager", "ssm"])
async def test_a_secrets_endpoint_that_never_answers_is_read_once_for_everybody_and_remembered(
    monkeypatch, arn
):
    clock = Clock()
    with silent_endpoint() as aws, capture_logs() as logs:
        aws_environment(monkeypatch, aws.url)
        credentials = ClientCredentials("proxy", secret_arn=arn, reader=quick_reader, clock=clock)
        outcomes = await asyncio.gather(*(credentials() for _ in range(3)), return_exceptions=True)
        # The timeout error carries response=None: its handling must not fail in turn (a 500).
        assert all(isinstance(outcome, SecretUnavailable) for outcome in outcomes), outcomes
        assert aws.accepted == 1, "three waiting requests made more than one read"
        for _ in range(20):  # within the failure's window: told at once, AWS not asked
            with pytest.raises(SecretUnavailable) as refused:
                await credentials()
        assert aws.accepted == 1
        assert all(names_no_arn(str(outcome)) for outcome in [*outcomes, refused.value])
        clock.now += FAILURE_TTL
        with pytest.raises(SecretUnavailable):
            await credentials()
        assert aws.accepted == 2, "after the window the secret is read again"
    # The operator's log says what failed, once per read: the ARN and the error's kind.
    failures = [line for line in logs.lines if "client secret unavailable" in line]
    assert len(failures) == 2
    assert arn in failures[0] and "ReadTimeoutError" in failures[0]


async def test_a_refused_connection_or_an_aws_refusal_is_secret_unavailable_with_its_code(monkeypatch):
    with capture_logs() as logs:
        aws_environment(monkeypatch, refusing_url())
        with pytest.raises(SecretUnavailable) as refused:
            await ClientCredentials("proxy", secret_arn=ARN, reader=quick_reader)()
        assert names_no_arn(str(refused.value))
        assert "EndpointConnectionError" in refused.value.detail
        aws = AwsRefusal()
        with serve_in_thread(aws) as url:
            aws_environment(monkeypatch, url)
            for arn in (ARN, SSM_ARN):
                with pytest.raises(SecretUnavailable) as refused:
                    await ClientCredentials("proxy", secret_arn=arn, reader=quick_reader)()
                assert names_no_arn(str(refused.value))
                assert arn in refused.value.detail and "AccessDeniedException" in refused.value.detail
        assert aws.hits == 2
    assert "AccessDeniedException" in logs.text()


async def test_a_request_waits_for_a_read_under_way_at_most_its_wait_then_the_read_goes_on():
    release = threading.Event()
    reads: list[str] = []

    def slow_reader(arn: str) -> str:
        reads.append(arn)
        release.wait(10)
        return "late"

    credentials = ClientCredentials("proxy", secret_arn=ARN, reader=slow_reader, wait=0.05)
    with pytest.raises(SecretUnavailable) as refused:
        await credentials.secret()
    assert names_no_arn(str(refused.value))
    release.set()
    assert await credentials.secret() == "late"  # joined the read under way
    assert reads == [ARN]


@pytest.mark.parametrize(
    "error",
    [
        type("Timeout", (Exception,), {"response": None})(),
        type("Odd", (Exception,), {"response": {"Error": None}})(),
        type("Odd2", (Exception,), {"response": "text"})(),
        KeyError("x"),
    ],
    ids=["none", "error-none", "text", "no-response"],
)
def test_the_error_code_of_any_exception_is_a_name_never_a_failure(error):
    assert aws_error_code(error) == type(error).__name__
