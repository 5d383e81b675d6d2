"""The proxy's client of its upstream MCP server (both protocol eras)."""

from ..settings import UpstreamConfig
from .client import Listing, Upstream
from .errors import UpstreamError, answer_by, timed_out

__all__ = ["Listing", "Upstream", "UpstreamConfig", "UpstreamError", "answer_by", "timed_out"]
