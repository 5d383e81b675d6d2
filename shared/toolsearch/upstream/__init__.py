"""The proxy's client of its upstream MCP server (both protocol eras)."""

from ..settings import UpstreamConfig
from .client import Listing, Upstream
from .errors import UpstreamError

__all__ = ["Listing", "Upstream", "UpstreamConfig", "UpstreamError"]
