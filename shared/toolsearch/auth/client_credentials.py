"""The proxy's own client credentials at the authorization server, and where its secret comes from.

The secret is given in the environment (`TOOLSEARCH_OAUTH_CLIENT_SECRET`) or,
on Lambda, named by the ARN of a Secrets Manager secret or an SSM SecureString
parameter and read once, when first needed (in a worker thread: boto3 blocks),
then kept in memory. It is never logged; a failure to read it says which ARN and
the AWS error code only.
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
from collections.abc import Callable
from urllib.parse import quote

logger = logging.getLogger(__name__)


class SecretUnavailable(Exception):
    """The client secret could not be read; `str()` names the source, never the secret."""


def read_aws_secret(arn: str) -> str:
    """The secret value an ARN names: a Secrets Manager secret, or an SSM parameter (decrypted).

    A Secrets Manager secret that is a JSON object gives its `client_secret` field.
    """
    import boto3  # only here: the local server runs without AWS libraries
    from botocore.config import Config

    parts = arn.split(":", 5)
    if len(parts) < 6 or parts[0] != "arn":
        raise SecretUnavailable(f"{arn!r} is not an ARN")
    service, region = parts[2], parts[3] or None
    config = Config(connect_timeout=2, read_timeout=5, retries={"max_attempts": 2, "mode": "standard"})
    try:
        if service == "secretsmanager":
            client = boto3.session.Session().client("secretsmanager", region_name=region, config=config)
            value = client.get_secret_value(SecretId=arn)["SecretString"]
            return _field_or_whole(value)
        if service == "ssm":
            client = boto3.session.Session().client("ssm", region_name=region, config=config)
            answer = client.get_parameter(Name=arn, WithDecryption=True)  # GetParameter takes the ARN
            return str(answer["Parameter"]["Value"])
    except Exception as exc:  # boto3's errors; the message may quote request values, so the code only
        code = getattr(exc, "response", {}).get("Error", {}).get("Code", type(exc).__name__)
        raise SecretUnavailable(f"the client secret at {arn} could not be read ({code})") from None
    raise SecretUnavailable(f"{arn} is neither a Secrets Manager secret nor an SSM parameter")


def _field_or_whole(value: str) -> str:
    try:
        parsed = json.loads(value)
    except ValueError:
        return value
    if isinstance(parsed, dict) and isinstance(parsed.get("client_secret"), str):
        return parsed["client_secret"]
    return value


class ClientCredentials:
    """`client_id` and its secret, as a token or introspection request carries them (RFC 6749 §2.3.1)."""

    def __init__(
        self,
        client_id: str,
        secret: str = "",
        *,
        secret_arn: str = "",
        method: str = "client_secret_basic",
        reader: Callable[[str], str] = read_aws_secret,
    ) -> None:
        self.client_id = client_id
        self._secret = secret or None
        self._secret_arn = secret_arn
        self._method = method
        self._reader = reader
        self._lock = asyncio.Lock()

    async def secret(self) -> str:
        if self._secret is not None:
            return self._secret
        if not self._secret_arn:
            raise SecretUnavailable("no client secret is configured (oauth_client_secret or its ARN)")
        async with self._lock:  # one read for everybody waiting
            if self._secret is None:
                self._secret = await asyncio.to_thread(self._reader, self._secret_arn)
        return self._secret

    async def __call__(self) -> tuple[dict[str, str], dict[str, str]]:
        """The form fields and headers that authenticate the proxy's request."""
        secret = await self.secret()
        if self._method == "client_secret_post":
            return {"client_id": self.client_id, "client_secret": secret}, {}
        pair = f"{quote(self.client_id, safe='')}:{quote(secret, safe='')}"
        basic = base64.b64encode(pair.encode()).decode()
        # The SDK's token handler (and RFC 6749 servers generally) also take client_id in the form.
        return {"client_id": self.client_id}, {"Authorization": f"Basic {basic}"}
