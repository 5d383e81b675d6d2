"""`ToolsearchError`: the one base of every exception the package defines, and the tree under it.

Each class stays beside the code that raises it; what they share is this base, so `except
ToolsearchError` tells the proxy's own failures from a bug or a library's. Builtin bases that
callers or libraries rely on are kept beside it (`ValueError`, `TimeoutError`).
`tests/test_errors.py` holds every exception class of the package under this base and named
in this tree.

    ToolsearchError
    ├── UpstreamError          upstream/errors.py            the upstream failed; its `kind` says how
    ├── CallerRefused          callers/refusal.py            the upstream refused the caller (401/403)
    ├── HttpRefusal            server/http_refusal.py        a request refused at the HTTP edge
    ├── RpcError               mcp/protocol.py               a JSON-RPC error to answer with
    ├── UnknownTool            service/tool_service.py       a tools/call of a tool nobody lists
    ├── CallerLimited          service/fairness.py           past the caller's fair share
    ├── SchemaUnusable         validation/arguments.py       an upstream schema that cannot be checked
    ├── Uncheckable            validation/arguments.py       arguments that could not be checked
    ├── TimeUp                 validation/schema_keywords.py a keyword check ran out of time
    ├── PatternError           validation/patterns.py        (also ValueError) an uncompilable pattern
    ├── PatternTimeout         validation/patterns.py        (also TimeoutError) a match ran out of time
    ├── MalformedAuthorization callers/credentials.py        (also ValueError) an unforwardable header
    ├── InvalidHeaderAnnotation mcp/param_headers.py          (also ValueError) a bad x-mcp-header mark
    ├── SearchWordsError       catalogs/search_words.py      (also ValueError) the operator's words
    ├── EventTooLarge          upstream/sse.py               one SSE event past its bound
    ├── _Unusable              auth/metadata_relay.py        upstream metadata not worth relaying
    ├── InvalidToken           auth/tokens.py                a token that does not validate
    ├── ValidationUnavailable  auth/tokens.py                the issuer could not be asked
    ├── AuthServerError        auth/http_json.py             the authorization server failed
    ├── SecretUnavailable      auth/client_credentials.py    the proxy's client secret
    ├── ExchangeRefused        auth/exchange.py              the token exchange refused
    ├── ExchangeUnavailable    auth/exchange.py              the token exchange could not be made
    ├── _Corrupt               catalogs/cache/dynamo.py      a shared-tier item that does not read
    ├── _Unavailable           catalogs/cache/dynamo.py      DynamoDB could not be asked
    ├── EmbedderUnavailable    search/embedder.py            no model to embed with
    ├── ModelLoadError         model/load.py                 a model folder that does not load
    │   ├── PrepareError       model/build/prepare.py
    │   └── FineTuneError      model/build/finetune.py
    ├── ModelFetchError        model/build/lock.py           a model that could not be fetched
    │   └── DigestMismatchError model/build/lock.py
    ├── Transient              model/build/hub.py            a download worth retrying
    ├── NotFound               model/build/hub.py            a file the model host lacks
    ├── NotUnigram             model/unigram.py              not a unigram model
    ├── CatalogCliError        cli/catalog.py                `toolsearch catalog` cannot go on
    └── CatalogFileError       cli/explain.py                a catalog file that does not read

Where they are translated, once per boundary:

- into our errors: an upstream's answers (HTTP statuses, JSON-RPC error objects, httpx's
  failures) become `UpstreamError` in `upstream/` only (`answers.py`, `wire.py`), and a deadline
  passing becomes a `timeout` through `upstream.errors.timed_out` only;
- into a tool result: `results.upstream_failure` (the service's one catch site, and each call
  upstream in `service/upstream_calls.py`); the upstream's refusal of the caller is never a tool result: the
  service raises it as `CallerRefused`, and `CatalogStore.drop_refused` alone drops the
  caller's catalog for it;
- into an HTTP or JSON-RPC answer: `HttpEdge.answer_for` (`server/http_edge.py`), for /mcp and
  /catalog alike.
"""

from __future__ import annotations

__all__ = ["ToolsearchError"]


class ToolsearchError(Exception):
    """The base of every exception the package defines."""
