"""What bounds the proxy's client of its upstream: time, retries, and the size of what it reads."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class UpstreamConfig:
    timeout: float = 30.0  # seconds for one call, and for one whole listing (pages, retries, waits)
    connect_timeout: float = 5.0
    list_retries: int = 2  # retries of a failed listing; calls are never retried
    max_list_pages: int = 100
    max_result_bytes: int = 5_000_000  # the largest result passed on; an answer may hold a little more
    max_catalog_bytes: int = 10_000_000  # bytes of every tools/list page of one catalog together
    max_catalog_tools: int = 10_000
    era_ttl: float = 300.0  # seconds before the upstream's protocol era is checked again
