"""The proxy's own client credentials in exchange mode: where the secret comes from, and how it is sent."""

from __future__ import annotations

import asyncio
import base64
import json

import pytest

from toolsearch.app import build_proxy
from toolsearch.auth.client_credentials import ClientCredentials, SecretUnavailable, read_aws_secret
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
        assert arn in str(refused.value)


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
