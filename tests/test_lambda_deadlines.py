"""When a Lambda request's answer is due: the function's remaining time, and API Gateway's clock.

A request through API Gateway (HTTP or REST API) is due `api_gateway_timeout` after the gateway
received it (`timeEpoch` / `requestTimeEpoch`), so a cold start's init counts against it; a
function URL's event has the same shape but no such gateway limit.
"""

from __future__ import annotations

import asyncio
import time

import pytest

from fixtures.lambda_events import FakeContext, event
from toolsearch.aws.lambda_support import LAMBDA_MARGIN, _due, through_api_gateway
from toolsearch.settings import Settings

SETTINGS = Settings(api_gateway_timeout=29.0)


@pytest.mark.parametrize(
    ("name", "gateway"),
    [
        ("http-api-search-tools.json", True),
        ("rest-api-search-tools.json", True),
        ("function-url-search-tools.json", False),
    ],
)
def test_api_gateway_is_told_apart_from_a_function_url(name, gateway):
    assert through_api_gateway(event(name)) is gateway


def arrived(name: str, seconds_ago: float) -> dict:
    evt = event(name)
    key = "timeEpoch" if "timeEpoch" in evt["requestContext"] else "requestTimeEpoch"
    evt["requestContext"][key] = int((time.time() - seconds_ago) * 1000)
    return evt


def due_in(evt: dict, remaining_ms: int = 900_000) -> float:
    context = FakeContext()
    context.remaining_ms = remaining_ms
    due = _due({"aws.event": evt, "aws.context": context}, SETTINGS)
    assert due is not None
    return due - asyncio.get_running_loop().time()


@pytest.mark.parametrize("name", ["http-api-search-tools.json", "rest-api-search-tools.json"])
async def test_time_spent_before_the_function_ran_counts_against_the_gateways_limit(name):
    assert due_in(arrived(name, 10.0)) == pytest.approx(19.0, abs=0.5)  # 29 s less the 10 s waited
    assert due_in(arrived(name, 0.0)) == pytest.approx(29.0, abs=0.5)


@pytest.mark.parametrize("seconds_ago", [-60.0, 3600.0])
async def test_a_gateway_clock_that_disagrees_with_ours_is_not_trusted(seconds_ago):
    # In the future, or older than the gateway's whole limit: clocks apart, so nothing is taken off.
    assert due_in(arrived("http-api-search-tools.json", seconds_ago)) == pytest.approx(29.0, abs=0.5)


async def test_a_function_url_is_due_only_by_the_functions_remaining_time():
    assert due_in(arrived("function-url-search-tools.json", 10.0), remaining_ms=55_000) == pytest.approx(
        55.0 - LAMBDA_MARGIN, abs=0.5
    )


async def test_the_sooner_of_the_two_limits_wins():
    assert due_in(arrived("http-api-search-tools.json", 0.0), remaining_ms=12_000) == pytest.approx(
        12.0 - LAMBDA_MARGIN, abs=0.5
    )
