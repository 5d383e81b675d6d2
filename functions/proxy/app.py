"""AWS Lambda entry point: the Starlette app of `toolsearch serve`, adapted by Mangum.

Everything is built at import, once per execution environment: settings from
TOOLSEARCH_* variables, the model (from the layer at /opt/model), the proxy
with its catalog caches, and the DynamoDB tier when TOOLSEARCH_DYNAMODB_TABLE
is set. Invocations reuse it all. Works for API Gateway HTTP API (v2), REST API
(v1) and function URL events alike; Mangum reads the shape from the event. An
event it cannot read gets a 400 proxy response instead of an exception (which the
gateway would turn into a bare 502); anything else, a 400 saying it is not HTTP.

Logs are Powertools JSON with the Lambda context (request id) and `cold_start`;
the event itself is never logged (it carries the caller's Authorization header).
With SnapStart, an after-restore hook re-seeds `random` and makes the first
invocation log "restored from a snapshot" instead of the snapshot's cold start.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable

_import_started = time.perf_counter()

from aws_lambda_powertools import Logger  # noqa: E402
from mangum import Mangum  # noqa: E402

try:  # SnapStart's runtime hooks: part of Lambda's Python runtime (snapshot-restore-py)
    from snapshot_restore_py import register_after_restore
except ImportError:  # elsewhere there is no snapshot to restore from

    def register_after_restore(func: Callable[[], None]) -> Callable[[], None]:
        return func


from toolsearch.app import build_proxy  # noqa: E402
from toolsearch.aws.lambda_support import (  # noqa: E402
    EmfMetrics,
    InvocationLoop,
    answer_event,
    answer_in_time,
    catalog_tier,
)
from toolsearch.ops.logs import configure_logging, format_other_records_with  # noqa: E402
from toolsearch.ops.telemetry import Telemetry  # noqa: E402
from toolsearch.search.embedder import load_configured_embedder  # noqa: E402
from toolsearch.server.response_size import ResponseSize  # noqa: E402
from toolsearch.settings import from_env  # noqa: E402

settings = from_env()
configure_logging(settings.server.log_level)
# Named like the package, so every `toolsearch.*` log record carries the Lambda context.
logger = Logger(service="toolsearch", level=settings.server.log_level)
# Other libraries' records (Mangum's request line) carry it too: the request id on every line.
format_other_records_with(logger.registered_formatter)

loop = InvocationLoop()  # before Mangum, which adopts the current loop
telemetry = Telemetry()
metrics = EmfMetrics()
telemetry.add_sink(metrics)
embedder = load_configured_embedder(settings.search.embedder, settings.search.model_dir)
proxy = build_proxy(
    settings,
    shared=catalog_tier(settings, telemetry),
    embedder=embedder,
    telemetry=telemetry,
    # Answers are counted as the runtime serialises them: Lambda's 6 MB limit applies to that.
    response_size=ResponseSize.lambda_runtime(),
)
# Each request is answered before the function times out and, through API Gateway, before the gateway.
adapter = Mangum(answer_in_time(proxy.app, settings), lifespan="off")

init_ms = round((time.perf_counter() - _import_started) * 1000, 1)
_first = True  # the first invocation of this environment, whether it ran init or was restored
_restored = False


@register_after_restore
def _after_restore() -> None:
    """SnapStart: this environment was restored from a snapshot taken after another one's init.

    Everything in memory is the snapshot's, shared by every environment restored from it: the
    `random` state (listing retries' jitter) is drawn again here, and the first invocation says
    it was restored rather than repeat the snapshot's cold start and init time.
    """
    global _first, _restored
    random.seed()  # from os.urandom, different in each restored environment
    _first, _restored = True, True


@logger.inject_lambda_context(log_event=False)
def handler(event: dict, context: object) -> dict:
    global _first
    if _first:
        _first = False
        facts = {
            "search": "hybrid" if embedder is not None else "lexical",
            "catalog_tier": "dynamodb" if settings.catalog.dynamodb_table else "memory",
        }
        if _restored:
            telemetry.count("restore")
            logger.info("restored from a snapshot", extra={"snapshot_init_ms": init_ms, **facts})
        else:
            telemetry.timing("init", init_ms)
            logger.info("cold start", extra={"init_ms": init_ms, **facts})
    loop.make_current()
    try:
        return answer_event(adapter, event, context)
    finally:
        metrics.flush()
