"""The proxy's own client credentials at the authorization server, and where its secret comes from.

The secret is given in the environment (`TOOLSEARCH_OAUTH_CLIENT_SECRET`) or,
on Lambda, named by the ARN of a Secrets Manager secret or an SSM SecureString
parameter and read when first needed (in a worker thread: boto3 blocks), then
kept in memory. One read is in flight at a time, shared by every request that
needs it; a caller waits for it at most `wait` seconds (the read goes on). A
failed read is remembered for `FAILURE_TTL` seconds, so an outage costs AWS one
read per window whatever callers send, and each waiting request is told so at
once. The secret is never logged; a failed read is logged once, for the
operator, with the ARN and the AWS error code; callers are told a reason that
names no ARN (the account, region and secret name are the operator's business).
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import quote

from toolsearch.ops.tasks import retrieve

from ..errors import ToolsearchError

logger = logging.getLogger(__name__)

FAILURE_TTL = 5.0  # seconds a failed read is remembered before AWS is asked again
WAIT = 5.0  # seconds a request waits for a read under way (it then gets a 503; the read goes on)
PUBLIC_REASON = "the proxy's client secret could not be read"


class SecretUnavailable(ToolsearchError):
    """The client secret could not be read: `str()` is fit for callers (no ARN, no secret);
    `detail` is for the operator's log (the ARN and the AWS error code, never the secret)."""

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(reason)
        self.detail = detail or reason


def _aws_config() -> Any:
    from botocore.config import Config

    # Bounded: a Secrets Manager that does not answer must not hold requests for long.
    return Config(connect_timeout=2, read_timeout=3, retries={"total_max_attempts": 2, "mode": "standard"})


def read_aws_secret(arn: str, *, config: Any = None) -> str:
    """The secret value an ARN names: a Secrets Manager secret, or an SSM parameter (decrypted).

    A Secrets Manager secret that is a JSON object gives its `client_secret` field. `config`: the
    botocore `Config` (bounded timeouts and retries by default).
    """
    import boto3  # only here: the local server runs without AWS libraries

    parts = arn.split(":", 5)
    if len(parts) < 6 or parts[0] != "arn":
        raise SecretUnavailable(PUBLIC_REASON, f"{arn!r} is not an ARN")
    service, region = parts[2], parts[3] or None
    if service not in ("secretsmanager", "ssm"):
        detail = f"{arn} is neither a Secrets Manager secret nor an SSM parameter"
        raise SecretUnavailable(PUBLIC_REASON, detail)
    try:
        client = boto3.session.Session().client(service, region_name=region, config=config or _aws_config())
        if service == "secretsmanager":
            return _field_or_whole(client.get_secret_value(SecretId=arn)["SecretString"])
        answer = client.get_parameter(Name=arn, WithDecryption=True)  # GetParameter takes the ARN
        return str(answer["Parameter"]["Value"])
    except Exception as exc:  # boto3's errors; the message may quote request values, so the code only
        raise SecretUnavailable(
            PUBLIC_REASON, f"the client secret at {arn} could not be read ({aws_error_code(exc)})"
        ) from None


def aws_error_code(exc: BaseException) -> str:
    """The AWS error code of a botocore error, else its type's name.

    Only a `ClientError` (AWS answered) has a `response`; a timeout or connection error has none, or
    None: nothing here may assume one, or the error's handling fails in turn.
    """
    response = getattr(exc, "response", None)
    error = response.get("Error") if isinstance(response, dict) else None
    code = error.get("Code") if isinstance(error, dict) else None
    return code if isinstance(code, str) and code else type(exc).__name__


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
        wait: float = WAIT,
        failure_ttl: float = FAILURE_TTL,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.client_id = client_id
        self._secret = secret or None
        self._secret_arn = secret_arn
        self._method = method
        self._reader = reader
        self._wait = wait
        self._failure_ttl = failure_ttl
        self._clock = clock
        self._failed: tuple[float, SecretUnavailable] | None = None  # until when, and why
        self._reading: asyncio.Task[str] | None = None

    async def secret(self) -> str:
        """The secret; SecretUnavailable when it cannot be read (or could not, moments ago)."""
        if self._secret is not None:
            return self._secret
        if not self._secret_arn:
            raise SecretUnavailable("no client secret is configured (oauth_client_secret or its ARN)")
        if self._failed is not None and self._clock() < self._failed[0]:
            remembered = self._failed[1]  # a new exception each time: a raised one keeps its traceback
            raise SecretUnavailable(str(remembered), remembered.detail)
        if self._reading is None:  # one read for everybody waiting
            self._reading = asyncio.create_task(self._read())
            self._reading.add_done_callback(retrieve)  # every waiter may have given up
        try:
            # shield: a request that gives up must not cancel the read the others wait for.
            return await asyncio.wait_for(asyncio.shield(self._reading), self._wait)
        except TimeoutError:
            raise SecretUnavailable(f"{PUBLIC_REASON} in time") from None

    async def _read(self) -> str:
        try:
            self._secret = await asyncio.to_thread(self._reader, self._secret_arn)
            return self._secret
        except Exception as exc:  # the reader's own (SecretUnavailable), or anything else, e.g. no boto3
            if isinstance(exc, SecretUnavailable):
                failure = exc
            else:
                failure = SecretUnavailable(
                    PUBLIC_REASON, f"the client secret could not be read ({type(exc).__name__})"
                )
            self._failed = (self._clock() + self._failure_ttl, failure)
            # The operator's log: which secret and why (the callers are told neither).
            extra = {"outcome": failure.detail, "retry_in_s": self._failure_ttl}
            logger.error("client secret unavailable", extra=extra)
            raise failure from None
        finally:
            self._reading = None

    async def __call__(self) -> tuple[dict[str, str], dict[str, str]]:
        """The form fields and headers that authenticate the proxy's request."""
        secret = await self.secret()
        if self._method == "client_secret_post":
            return {"client_id": self.client_id, "client_secret": secret}, {}
        pair = f"{quote(self.client_id, safe='')}:{quote(secret, safe='')}"
        basic = base64.b64encode(pair.encode()).decode()
        # The SDK's token handler (and RFC 6749 servers generally) also take client_id in the form.
        return {"client_id": self.client_id}, {"Authorization": f"Basic {basic}"}
