"""Counters and timings: tool names, outcomes and milliseconds, nothing else.

Nothing a caller sends (queries, arguments, tokens) or gets back (results) is
ever a metric name or dimension. Sinks receive each event; the Lambda handler
adds one that writes CloudWatch EMF through Powertools, tests add a recorder.
"""

from __future__ import annotations

import logging
import threading
from collections import defaultdict
from collections.abc import Callable
from typing import Any

logger = logging.getLogger(__name__)

Sink = Callable[[str, float, dict[str, str]], None]


class Telemetry:
    def __init__(self) -> None:
        self.counts: defaultdict[tuple[str, tuple[tuple[str, str], ...]], float] = defaultdict(float)
        self._sinks: list[Sink] = []
        self._lock = threading.Lock()

    def add_sink(self, sink: Sink) -> None:
        self._sinks.append(sink)

    def count(self, name: str, value: float = 1, **dimensions: str) -> None:
        key = (name, tuple(sorted(dimensions.items())))
        with self._lock:
            self.counts[key] += value
        for sink in self._sinks:
            try:
                sink(name, value, dimensions)
            except Exception:  # a broken sink must never fail a request
                logger.warning("metrics sink failed", exc_info=True)

    def timing(self, name: str, milliseconds: float, **dimensions: str) -> None:
        for sink in self._sinks:
            try:
                sink(name + "_ms", milliseconds, dimensions)
            except Exception:
                logger.warning("metrics sink failed", exc_info=True)

    def total(self, name: str, **dimensions: Any) -> float:
        wanted = set(dimensions.items())
        return sum(v for (n, dims), v in self.counts.items() if n == name and wanted <= set(dims))
