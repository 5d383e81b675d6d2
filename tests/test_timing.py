"""`Span` (ops/timing.py): the one timer every timed place uses, read on an injected clock."""

from __future__ import annotations

import re
from pathlib import Path

from toolsearch.ops.timing import Span

PACKAGE = Path(__file__).resolve().parents[1] / "shared" / "toolsearch"


class Clock:
    def __init__(self, now: float = 100.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def test_a_span_reads_milliseconds_since_it_was_made():
    clock = Clock()
    span = Span(clock)
    assert span.ms == 0.0
    clock.now += 0.25
    assert span.ms == 250.0
    clock.now += 0.001
    assert abs(span.ms - 251.0) < 1e-9


def test_a_log_line_carries_the_span_to_a_tenth_of_a_millisecond():
    clock = Clock()
    span = Span(clock)
    clock.now += 0.012_345
    assert span.logged_ms == 12.3
    clock.now += 0.000_06
    assert span.logged_ms == 12.4


def test_a_span_is_read_as_often_as_asked_and_keeps_its_start():
    clock = Clock()
    span = Span(clock)
    clock.now += 1.0
    first = span.ms
    clock.now += 1.0
    assert (first, span.ms) == (1000.0, 2000.0)


def test_a_span_on_the_real_counter_never_runs_backwards():
    span = Span()
    first = span.ms
    assert 0.0 <= first <= span.ms


def test_no_module_of_the_package_times_by_hand():
    """Every run-time span (the upstream exchange, the `tool call` log, the `tool_call` and `request`
    metrics, listings, exchanges, catalog routes) is a `Span`: no module reads the counter itself."""
    by_hand = re.compile(r"perf_counter\(\)|monotonic\(\) - |\) - started")
    found = [
        str(path.relative_to(PACKAGE))
        for path in PACKAGE.rglob("*.py")
        if path.name != "timing.py" and "build" not in path.parts and by_hand.search(path.read_text("utf-8"))
    ]
    assert found == []
