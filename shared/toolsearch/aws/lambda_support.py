"""What the Lambda handler needs beyond the app: one event loop, EMF metrics, the DynamoDB tier.

Mangum 0.22 runs each invocation with `loop.run_until_complete(...)` on the
thread's current event loop, found with `asyncio.get_event_loop()`. Tasks the
app leaves behind (a background catalog refresh) stay on that loop, frozen
with the execution environment between invocations, and go on running during
the next one. So the handler owns one loop for the life of the environment
and makes it current before every invocation: pending work is neither lost
nor destroyed, and nothing depends on Python's deprecated implicit loop.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import sys
import threading
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, TextIO

from toolsearch.mcp import protocol as P
from toolsearch.ops import deadline
from toolsearch.ops.telemetry import Telemetry
from toolsearch.settings import Settings

if TYPE_CHECKING:  # boto3 is imported only when the table is configured
    from toolsearch.catalogs.cache.dynamo import DynamoSharedTier

logger = logging.getLogger(__name__)

DEFAULT_NAMESPACE = "McpToolsearchProxy"
# Seconds kept back from the function's remaining time to write the answer and hand it to the runtime.
LAMBDA_MARGIN = 1.0
_VALUES_PER_DOCUMENT = 90  # Powertools flushes on its own at 100 values; stay below it


class InvocationLoop:
    """The one asyncio loop of an execution environment, current for every invocation."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        asyncio.set_event_loop(self.loop)

    def make_current(self) -> None:
        asyncio.set_event_loop(self.loop)

    def pending(self) -> set[asyncio.Task[Any]]:
        """Tasks left running after an invocation (background refreshes)."""
        return {task for task in asyncio.all_tasks(self.loop) if not task.done()}

    def settle(self, timeout: float) -> bool:
        """Run the loop until no task is pending or `timeout` passes; True when none is left.

        For tests and benchmarks: in Lambda the next invocation carries pending work on.
        """
        tasks = self.pending()
        if not tasks:
            return True
        self.make_current()
        self.loop.run_until_complete(asyncio.wait(tasks, timeout=timeout))
        return not self.pending()


class EmfMetrics:
    """A telemetry sink that buffers one invocation's metrics and prints them as CloudWatch EMF.

    Metrics with the same dimensions go into one EMF document (Powertools'
    serialiser), so an invocation costs a few log lines, not one per event.
    Names ending in `_ms` are milliseconds; the rest are counts. Dimensions are
    what telemetry passes (tool names, outcomes, methods, cache events) plus
    `service`; never anything a caller sent.
    """

    def __init__(
        self,
        namespace: str | None = None,
        service: str | None = None,
        stream: TextIO | None = None,
    ) -> None:
        self.namespace = namespace or os.environ.get("POWERTOOLS_METRICS_NAMESPACE") or DEFAULT_NAMESPACE
        self.service = service or os.environ.get("POWERTOOLS_SERVICE_NAME") or "toolsearch"
        self._stream = stream
        self._pending: list[tuple[str, float, tuple[tuple[str, str], ...]]] = []
        self._lock = threading.Lock()  # the DynamoDB tier reports from worker threads

    def __call__(self, name: str, value: float, dimensions: dict[str, str]) -> None:
        with self._lock:
            self._pending.append((name, float(value), tuple(sorted(dimensions.items()))))

    def flush(self) -> list[Mapping[str, Any]]:
        """Print (and return) the buffered metrics as EMF documents, and forget them."""
        from aws_lambda_powertools.metrics.functions import is_metrics_disabled
        from aws_lambda_powertools.metrics.provider.cloudwatch_emf.cloudwatch import (
            AmazonCloudWatchEMFProvider,
        )

        with self._lock:
            pending, self._pending = self._pending, []
        if not pending or is_metrics_disabled():
            return []
        groups: dict[tuple[tuple[str, str], ...], list[tuple[str, float]]] = {}
        for name, value, dims in pending:
            groups.setdefault(dims, []).append((name, value))
        documents: list[Mapping[str, Any]] = []
        for dims, entries in groups.items():
            for start in range(0, len(entries), _VALUES_PER_DOCUMENT):
                provider = AmazonCloudWatchEMFProvider(namespace=self.namespace, service=self.service)
                for key, val in dims:
                    provider.add_dimension(name=key, value=val)
                for name, value in entries[start : start + _VALUES_PER_DOCUMENT]:
                    unit = "Milliseconds" if name.endswith("_ms") else "Count"
                    provider.add_metric(name=name, unit=unit, value=value)
                documents.append(provider.serialize_metric_set())
        stream = self._stream or sys.stdout
        for document in documents:
            stream.write(json.dumps(document, separators=(",", ":")) + "\n")
        stream.flush()
        return documents


def answer_in_time(app: Any, settings: Settings) -> Any:
    """The ASGI app, with each request's deadline set from the invocation it came in.

    Mangum puts the Lambda event and context in the scope. The answer is due one margin before
    the function times out and, for a request through API Gateway, `api_gateway_timeout` after
    the gateway received it: upstream work is cut then, so a slow upstream becomes a `timeout`
    result rather than the gateway's 503 or the function URL's bare 502.
    """

    async def with_deadline(scope: dict[str, Any], receive: Any, send: Any) -> None:
        with deadline.answer_by(_due(scope, settings)):
            await app(scope, receive, send)

    return with_deadline


def _due(scope: dict[str, Any], settings: Settings) -> float | None:
    now = asyncio.get_running_loop().time()
    due: list[float] = []
    remaining = getattr(scope.get("aws.context"), "get_remaining_time_in_millis", None)
    if callable(remaining):
        due.append(now + remaining() / 1000 - LAMBDA_MARGIN)
    event = scope.get("aws.event")
    if isinstance(event, dict) and through_api_gateway(event):
        due.append(now + settings.server.api_gateway_timeout - _waited_at_gateway(event, settings))
    return min(due) if due else None


def through_api_gateway(event: Any) -> bool:
    """An API Gateway event (HTTP API or REST API), not a function URL's (which has the same shape)."""
    context = event.get("requestContext") if isinstance(event, dict) else None
    if not isinstance(context, dict) or "apiId" not in context:
        return False
    return ".lambda-url." not in str(context.get("domainName", ""))


def _waited_at_gateway(event: dict[str, Any], settings: Settings) -> float:
    """Seconds since API Gateway received the request (a cold start's init among them), when its
    clock and ours agree well enough to tell; else 0."""
    context = event["requestContext"]
    arrived = context.get("timeEpoch", context.get("requestTimeEpoch"))
    if not isinstance(arrived, int | float) or isinstance(arrived, bool):
        return 0.0
    waited = time.time() - arrived / 1000
    return waited if 0 <= waited < settings.server.api_gateway_timeout else 0.0


NOT_HTTP_EVENT = "not an HTTP event: expected API Gateway or a function URL"


def answer_event(adapter: Any, event: Any, context: Any) -> dict[str, Any]:
    """The app's answer to an API Gateway or function-URL event, through Mangum; never a raise.

    Mangum reads the event while building the ASGI scope and body and raises on one it cannot
    read (invalid base64, a header that is not a string, an unknown version, a missing field),
    which API Gateway turns into a bare 502. So both are built first: an event Mangum cannot
    read gets a 400 proxy response the gateway passes on, with a JSON-RPC error as its body.
    """
    if not isinstance(event, dict):
        return not_http_response()
    try:
        reader = adapter.infer(event, context)
    except RuntimeError:  # no known shape
        return not_http_response()
    except Exception as exc:  # a shape Mangum recognises, with a mangled requestContext
        return _refused(400, "Malformed HTTP event: its request context cannot be read", exc)
    try:
        _check_scope(reader.scope)
    except Exception as exc:
        return _refused(400, "Malformed HTTP event: its headers, path or request context cannot be read", exc)
    try:
        _ = reader.body  # decodes base64 here
    except Exception as exc:
        return _refused(400, "Malformed HTTP event: its body is not a string, or not valid base64", exc)
    try:
        return adapter(event, context)
    except Exception as exc:  # Mangum failed on the app's answer: a bug of ours, said as one
        return _refused(500, "Internal error in the proxy", exc)


def _check_scope(scope: dict[str, Any]) -> None:
    """What Mangum copies from the event unchecked and Starlette needs to be text."""
    for key in ("method", "path", "scheme"):
        if not isinstance(scope[key], str):
            raise TypeError(f"{key} is not a string")


def not_http_response() -> dict[str, Any]:
    """For a direct invoke or a console test event: no gateway reads it, the person does."""
    logger.warning(NOT_HTTP_EVENT)
    return {"statusCode": 400, "error": NOT_HTTP_EVENT}


def _refused(status: int, message: str, exc: Exception) -> dict[str, Any]:
    # The exception's type only: its text may quote the event, which carries the caller's token.
    log = logger.error if status >= 500 else logger.warning
    log("HTTP event refused", extra={"status": status, "error": type(exc).__name__})
    code = P.INTERNAL_ERROR if status >= 500 else P.INVALID_REQUEST
    body = P.error_response(None, P.RpcError(code, message))
    # The keys every gateway shape accepts (a REST API answers 502 to any other key).
    return {
        "statusCode": status,
        "headers": {"content-type": "application/json"},
        "body": json.dumps(body, separators=(",", ":")),
        "isBase64Encoded": False,
    }


def catalog_tier(
    settings: Settings, telemetry: Telemetry, *, clock: Callable[[], float] = time.time
) -> DynamoSharedTier | None:
    """The DynamoDB tier when `dynamodb_table` is set, else None (memory only).

    Items live as long as a catalog may be served (`catalog_max_age`), not only while it is fresh:
    while one environment lists a stale catalog again, the others serve the shared copy instead
    of listing too. Readers judge freshness by `fetched_at`. `clock` is for tests.
    """
    if not settings.catalog.dynamodb_table:
        return None
    # boto3 (in the Lambda runtime) is slow to import (docs/deploy.md, "Cold starts"): pay it at
    # init rather than in the first request, so SnapStart or provisioned concurrency can hold it too.
    import boto3  # noqa: F401

    from toolsearch.catalogs.cache.dynamo import DynamoSharedTier

    count: Callable[[str], None] = lambda name: telemetry.count("catalog", event=name)  # noqa: E731
    catalog = settings.catalog
    lifetime = max(catalog.max_age, catalog.ttl, 1.0)
    return DynamoSharedTier(catalog.dynamodb_table, ttl_seconds=lifetime, on_event=count, clock=clock)
