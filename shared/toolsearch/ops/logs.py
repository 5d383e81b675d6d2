"""Structured JSON logs, the same locally and in Lambda (Powertools' formatter).

Log records carry tool names, outcomes, status codes and timings as `extra`
fields. Never a query, an argument, a result or a token: the privacy tests
capture every record and look for them.

Other libraries are held at WARNING whatever the level, because their DEBUG
lines carry what ours never may: botocore prints each signed request (the
access key id in `Authorization`, the session token in `X-Amz-Security-Token`)
and each response body (catalog bytes); httpx and uvicorn's access log print
request URLs.
"""

from __future__ import annotations

import logging
import sys

from aws_lambda_powertools.logging.formatter import LambdaPowertoolsFormatter


def configure_logging(level: str = "INFO", service: str = "toolsearch") -> None:
    root = logging.getLogger()
    for handler in list(root.handlers):
        if getattr(handler, "_toolsearch", False):
            root.removeHandler(handler)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(LambdaPowertoolsFormatter(service=service))
    handler._toolsearch = True  # type: ignore[attr-defined]
    root.addHandler(handler)
    root.setLevel(level)
    for name in QUIET_LIBRARIES:
        logging.getLogger(name).setLevel(logging.WARNING)


# Their loggers' children (botocore.endpoint, botocore.auth...) inherit the level.
QUIET_LIBRARIES = ("botocore", "boto3", "s3transfer", "urllib3", "httpx", "httpcore", "uvicorn.access")


def format_other_records_with(formatter: logging.Formatter) -> None:
    """Format the records that reach our root handler (other libraries') with `formatter`.

    On Lambda that is the Powertools Logger's formatter, which carries the invocation's context,
    so Mangum's request line has the request id like every `toolsearch.*` line.
    """
    for handler in logging.getLogger().handlers:
        if getattr(handler, "_toolsearch", False):
            handler.setFormatter(formatter)
