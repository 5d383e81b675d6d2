"""`ToolsearchError`: the one base of every exception the package defines, and the tree under it.

Each class stays beside the code that raises it; what they share is this base, so `except
ToolsearchError` tells the proxy's own failures from a bug or a library's. Builtin bases that
callers or libraries rely on are kept beside it (`ValueError`, `TimeoutError`).
`tests/test_errors.py` holds every exception class of the package under this base and named
in this tree.

    ToolsearchError
    ├── UpstreamError            upstream/errors.py     the upstream failed; its `kind` says how
    ├── CallerRefused            refusal.py             the upstream refused the caller (401/403)
    ├── HttpRefusal              http_refusal.py        a request refused at the HTTP edge
    ├── RpcError                 protocol.py            a JSON-RPC error to answer with
    ├── UnknownTool              service.py             a tools/call of a tool nobody lists
    ├── CallerLimited            fairness.py            past the caller's fair share of the upstream
    ├── SchemaUnusable           validation.py          an upstream schema that cannot be checked
    ├── Uncheckable              validation.py          arguments that could not be checked
    ├── TimeUp                   schema_keywords.py     a keyword check ran out of time
    ├── PatternError             patterns.py            (also ValueError) a pattern that cannot compile
    ├── PatternTimeout           patterns.py            (also TimeoutError) a match ran out of time
    ├── MalformedAuthorization   credentials.py         (also ValueError) an unforwardable header
    ├── InvalidHeaderAnnotation  param_headers.py       (also ValueError) a bad x-mcp-header mark
    ├── SearchWordsError         search_words.py        (also ValueError) the operator's search words
    ├── EventTooLarge            upstream/sse.py        one SSE event past its bound
    ├── _Unusable                metadata_relay.py      upstream metadata not worth relaying
    ├── InvalidToken             auth/tokens.py         a token that does not validate
    ├── ValidationUnavailable    auth/tokens.py         the issuer could not be asked
    ├── AuthServerError          auth/http_json.py      the authorization server failed
    ├── SecretUnavailable        auth/client_credentials.py  the proxy's client secret
    ├── ExchangeRefused          auth/exchange.py       the token exchange refused
    ├── ExchangeUnavailable      auth/exchange.py       the token exchange could not be made
    ├── _Corrupt                 cache/dynamo.py        a shared-tier item that does not read
    ├── _Unavailable             cache/dynamo.py        DynamoDB could not be asked
    ├── EmbedderUnavailable      search/embedder.py     no model to embed with
    ├── ModelLoadError           model/load.py          a model folder that does not load
    │   ├── PrepareError         model/prepare.py
    │   └── FineTuneError        model/finetune.py
    ├── ModelFetchError          model/fetch.py         a model that could not be fetched
    │   └── DigestMismatchError  model/fetch.py
    ├── _Transient               model/fetch.py         a download worth retrying
    ├── _NotFound                model/fetch.py         a file the model host lacks
    ├── NotUnigram               model/unigram.py       not a unigram model
    ├── CatalogCliError          catalog_cli.py         `toolsearch catalog` cannot go on
    └── CatalogFileError         explain_cli.py         a catalog file that does not read

Where they are translated, once per boundary:

- into our errors: an upstream's answers (HTTP statuses, JSON-RPC error objects, httpx's
  failures) become `UpstreamError` in `upstream/` only (`answers.py`, `wire.py`), and a deadline
  passing becomes a `timeout` through `upstream.errors.timed_out` only;
- into a tool result: `results.upstream_failure` (the service's one catch site, and each call
  upstream in `calling.py`); the upstream's refusal of the caller is never a tool result: the
  service raises it as `CallerRefused`, and `CatalogStore.drop_refused` alone drops the
  caller's catalog for it;
- into an HTTP or JSON-RPC answer: `HttpEdge.answer_for` (`http_edge.py`), for /mcp and
  /catalog alike.
"""

from __future__ import annotations

__all__ = ["ToolsearchError"]


class ToolsearchError(Exception):
    """The base of every exception the package defines."""
