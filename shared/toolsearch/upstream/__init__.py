"""The proxy's client of its upstream MCP server (both protocol eras)."""

from .client import Listing, Upstream
from .config import UpstreamConfig
from .errors import UpstreamError, answer_by, timed_out

__all__ = ["Listing", "Upstream", "UpstreamConfig", "UpstreamError", "answer_by", "timed_out"]
