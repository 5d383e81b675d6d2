"""Every setting of the proxy, defined once, grouped by the part that uses it.

Each group is a frozen dataclass that its component takes as it is (`Upstream` an `UpstreamConfig`,
`CatalogStore` a `CatalogConfig`, ...), and `Settings` holds one of each (`settings.upstream.timeout`,
`settings.tools.max_query_chars`). Each field is a setting: a command-line flag (`--upstream-timeout`)
and an environment variable (`TOOLSEARCH_UPSTREAM_TIMEOUT`) named by its flat name (the field's
name, or the `name=` it gives when its group would make the field's own name ambiguous), and a row of
`docs/configuration.md`, generated from these fields (`toolsearch docs`); a test fails when it is
stale. Precedence: flag, then environment, then default. A new setting is one field in its group.

Past 400 lines on purpose: it is the one list of every setting, each with its help text.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

ENV_PREFIX = "TOOLSEARCH_"


def _setting(
    default: Any,
    help: str,
    *,
    name: str = "",
    choices: Sequence[str] = (),
    metavar: str = "",
    secret: bool = False,
) -> Any:
    """One setting; `name` is its flat name (flag and variable) when it is not the field's own."""
    meta = {"help": help, "name": name, "choices": tuple(choices), "metavar": metavar}
    if isinstance(default, list):
        return field(default_factory=lambda: list(default), metadata=meta)
    # A secret stays out of repr(): settings may be printed or logged whole.
    return field(default=default, metadata=meta, repr=not secret)


@dataclass(frozen=True)
class UpstreamConfig:
    """Upstream: the proxy's client of its upstream (`upstream.Upstream`)."""

    TITLE: ClassVar[str] = "Upstream"

    url: str = _setting(
        "",
        "URL of the upstream MCP server (streamable HTTP). Empty: `serve` runs the built-in demo upstream.",
        name="upstream",
        metavar="URL",
    )
    connect_timeout: float = _setting(
        5.0,
        "Seconds to wait for a connection to the upstream.",
        name="upstream_connect_timeout",
        metavar="SECONDS",
    )
    timeout: float = _setting(
        30.0,
        "Deadline in seconds for one upstream tool call, and for listing a caller's tools (every "
        "page, retry and backoff wait of tools/list together).",
        name="upstream_timeout",
        metavar="SECONDS",
    )
    list_retries: int = _setting(
        2,
        "Retries, with backoff and jitter, of a failed tools/list (calls are never retried).",
        metavar="N",
    )
    era_ttl: float = _setting(
        300.0,
        "Seconds the upstream's protocol era (2026-07-28, or the initialize handshake), learnt from "
        "server/discover, holds before it is checked again.",
        name="upstream_era_ttl",
        metavar="SECONDS",
    )
    max_list_pages: int = _setting(100, "Most pages of tools/list followed for one catalog.", metavar="N")
    max_catalog_bytes: int = _setting(
        10_000_000,
        "Largest tool list one caller may have, in bytes of tools/list JSON (all pages together); "
        "a larger one fails that caller's listing with `too_large`. Each MB listed costs about "
        "14 MiB of memory at its peak (docs/reliability.md).",
        metavar="BYTES",
    )
    max_catalog_tools: int = _setting(
        10_000,
        "Most tools one caller's tool list may have (all pages together); more fail that caller's "
        "listing with `too_large`.",
        metavar="N",
    )
    max_result_bytes: int = _setting(
        5_000_000,
        "Largest answer of the five tools passed on, in bytes of JSON as the answer carries it (on "
        "Lambda: as the runtime serialises the response, where quotes and backslashes count twice); "
        "a larger one is cut, with a note. On Lambda no answer passes 6 MB serialised, whatever this says.",
        metavar="BYTES",
    )


@dataclass(frozen=True)
class FairUseConfig:
    """Fair use: what one caller may send the shared upstream (`fairness.FairUse`)."""

    TITLE: ClassVar[str] = "Fair use"

    rate: float = _setting(
        60.0,
        "Calls a minute one caller (one Authorization) may send the upstream, on average; a call "
        "beyond it is not sent, and that caller alone gets `rate_limited` with `retryAfterSeconds`. "
        "Listings do not count. Per process (on Lambda, per execution environment). 0: no bound.",
        name="caller_rate",
        metavar="N",
    )
    burst: int = _setting(
        20,
        "Calls one caller may send the upstream at once after a pause, within `caller_rate`.",
        name="caller_burst",
        metavar="N",
    )
    concurrency: int = _setting(
        4,
        "Calls of one caller in flight at the upstream at once; more wait for a slot within the "
        "call's deadline (`upstream_timeout`), and are refused unsent as `rate_limited` if none "
        "frees. 0: no bound.",
        name="caller_concurrency",
        metavar="N",
    )


@dataclass(frozen=True)
class CatalogConfig:
    """Catalog: callers' catalogs (`catalog_store.CatalogStore`, `catalog_routes`, the DynamoDB tier)."""

    TITLE: ClassVar[str] = "Catalog"

    ttl: float = _setting(
        600.0,
        "Seconds a caller's catalog is fresh; after that it is listed again in the background "
        "while the old one is still served. New upstream tools show up within this time; "
        "`toolsearch catalog --refresh` (POST /catalog/refresh) lists a caller's catalog at once.",
        name="catalog_ttl",
        metavar="SECONDS",
    )
    max_age: float = _setting(
        3600.0,
        "Seconds after which a stale catalog is no longer served while it is being refreshed.",
        name="catalog_max_age",
        metavar="SECONDS",
    )
    refresh_interval: float = _setting(
        5.0,
        "Fewest seconds between two on-demand refreshes (POST /catalog/refresh) of one caller's "
        "catalog, so the endpoint cannot be used to hammer the upstream.",
        name="catalog_refresh_interval",
        metavar="SECONDS",
    )
    memory_entries: int = _setting(
        256,
        "Most catalogs kept in warm memory (least recently used go first).",
        name="catalog_memory_entries",
        metavar="N",
    )
    memory_per_caller: int = _setting(
        8,
        "Most of those one caller may hold: in exchange mode one verified subject (issuer and sub), "
        "whatever tokens it signs in with; else one Authorization. Past it the caller's own oldest "
        "goes, never another caller's.",
        name="catalog_memory_per_caller",
        metavar="N",
    )
    write_tools: list[str] = _setting(
        [],
        "Comma-separated upstream tools always treated as writes, whatever their annotations say.",
        metavar="NAMES",
    )
    read_tools: list[str] = _setting(
        [],
        "Comma-separated upstream tools treated as read-only even though the upstream does not mark "
        "them so. Risky: a model may then call them without asking (see docs/security.md).",
        metavar="NAMES",
    )
    dynamodb_table: str = _setting(
        "",
        "DynamoDB table that shares catalogs between execution environments; empty keeps them in "
        "memory only.",
        metavar="NAME",
    )
    unauthorized_ttl: float = _setting(
        5.0,
        "Seconds a request without Authorization whose tool listing the upstream refused with 401 "
        "gets that 401 again without the upstream being asked (clients send several before they sign "
        "in). A request with a token is asked, within `stranger_refusals`. 0 asks the upstream "
        "every time.",
        metavar="SECONDS",
    )
    stranger_refusals: int = _setting(
        20,
        "Tokens this process never held a catalog for that the upstream may refuse (401) within "
        "`stranger_window`; past them, such tokens get the last refusal again, challenge and all, "
        "without the upstream being asked, until the window ends, so made-up tokens cannot become a "
        "flood of listings from the proxy's address. Callers with a catalog are never held back. "
        "0: no bound.",
        metavar="N",
    )
    stranger_window: float = _setting(
        60.0, "Seconds of the window `stranger_refusals` counts in.", metavar="SECONDS"
    )


@dataclass(frozen=True)
class ToolsConfig:
    """Tools: the tools shown to the model (`service.ToolService`, `calling.UpstreamCalls`)."""

    TITLE: ClassVar[str] = "Tools"

    search_schemas: int = _setting(
        3, "How many of search_tools' best matches carry their input schema.", metavar="N"
    )
    max_batch_calls: int = _setting(
        10, "Most calls in one call_read_tools; 0 removes that tool.", metavar="N"
    )
    validation_timeout: float = _setting(
        5.0,
        "Seconds to check a call's arguments against the upstream tool's input schema (in a worker "
        "thread); a check that does not finish in time refuses the call as `validation_timeout`.",
        metavar="SECONDS",
    )
    max_instructions: int = _setting(
        10_000,
        "Most characters of the upstream's instructions passed on to clients; longer ones are cut, "
        "with a note.",
        metavar="CHARS",
    )
    max_query_chars: int = _setting(
        500,
        "Most characters of one search_tools query that are searched; a longer query is searched on "
        "its start (cut at a space near the end), and the answer's note says so. Models write a few "
        "words; 500 holds a long sentence in any language (a Chinese or Japanese character counts as one).",
        metavar="CHARS",
    )
    pinned_tools: list[str] = _setting(
        [],
        "Comma-separated upstream tools listed directly beside the five (for the few a model uses "
        "all the time).",
        metavar="NAMES",
    )
    always_load_tools: int = _setting(
        10,
        'Most upstream tools marked `_meta["anthropic/alwaysLoad"]: true` listed beside the five, as '
        "pinned tools are (the first by name); 0 ignores the mark.",
        metavar="COUNT",
    )


@dataclass(frozen=True)
class SearchConfig:
    """Search: how a catalog is indexed and ranked (`search.index.make_indexer`, the model)."""

    TITLE: ClassVar[str] = "Search"

    search_words_file: str = _setting(
        "",
        'A JSON file of the operator\'s own search words per tool, `{"tool name": "extra words"}`, '
        "indexed with each tool (at most 2,000 tools, 500 characters each, 256 KiB); a file that "
        "cannot be read or is of another shape stops start-up. Empty: none.",
        metavar="PATH",
    )
    embedder: str = _setting(
        "auto",
        "`model2vec` needs a model; `none` searches by words only; `auto` uses a model when one is found.",
        choices=("auto", "model2vec", "none"),
    )
    ranker: str = _setting(
        "learned",
        "How candidates are put in order: `learned`, a linear ranker over per-field BM25, term "
        "coverage, name and cosine features, trained on public data (`tools/searchbench`); "
        "`fusion`, the weighted sum of BM25 and cosine that `lexical_weight` sets.",
        choices=("learned", "fusion"),
    )
    lexical_weight: float = _setting(
        0.4,
        "With `ranker fusion`: the share of BM25 in hybrid ranking (0 to 1; the embedding gets the "
        "rest). Measure yours with `toolsearch eval --fusion all`.",
        metavar="WEIGHT",
    )
    model_dir: str = _setting(
        "",
        "Folder of a model2vec model. Empty: the Lambda layer's /opt/model if present, else the "
        "bundled development model.",
        metavar="DIR",
    )


@dataclass(frozen=True)
class ModelConfig:
    """Model: the model download (`toolsearch fetch-model`)."""

    TITLE: ClassVar[str] = "Model"

    hub_endpoint: str = _setting(
        "https://huggingface.co",
        "Hugging Face hub (or a mirror with the same URL layout) that `fetch-model` downloads the "
        "model from.",
        metavar="URL",
    )


@dataclass(frozen=True)
class EndpointConfig:
    """Endpoint: what `POST /mcp` accepts (`endpoint.McpEndpoint`, `http_edge.HttpEdge`)."""

    TITLE: ClassVar[str] = "Endpoint"

    allowed_origins: list[str] = _setting(
        [],
        "Comma-separated Origin values allowed to call the endpoint; requests with any other Origin "
        "get 403. Requests without Origin are allowed. `*` allows all.",
        metavar="ORIGINS",
    )
    max_body_bytes: int = _setting(1_000_000, "Largest request body accepted, in bytes.", metavar="BYTES")
    request_read_timeout: float = _setting(
        15.0,
        "Seconds a client has to send a request's headers, and again its body. A slower body gets 408 "
        "and the connection is closed; so are slow headers, and a new connection silent that long "
        "(`serve` only: uvicorn bounds neither), so trickling clients cannot hold connections open.",
        metavar="SECONDS",
    )


@dataclass(frozen=True)
class ServerConfig:
    """Server: the process: `toolsearch serve` and the Lambda handler."""

    TITLE: ClassVar[str] = "Server"

    host: str = _setting("127.0.0.1", "Address `serve` binds.", metavar="HOST")
    port: int = _setting(8080, "Port `serve` listens on.", metavar="PORT")
    allowed_hosts: list[str] = _setting(
        [],
        "`serve` only, against DNS rebinding: comma-separated Host values (`name` or `name:port`) answered "
        "besides the server's own. Bound to a loopback address, `serve` answers only 127.0.0.1, localhost "
        "and [::1] with its port, and these; any other Host gets 421 on every route. Bound elsewhere, "
        "empty means any Host. `*` allows all. Not checked on Lambda (the Host is the gateway's).",
        metavar="HOSTS",
    )
    api_gateway_timeout: float = _setting(
        29.0,
        "Lambda only: seconds a request that came through API Gateway has, from its arrival, to be "
        "answered (the HTTP API gives up at 30 s). Upstream work is cut in time to answer a `timeout` "
        "result instead of the gateway's 503. Function URL requests have the function's own timeout.",
        metavar="SECONDS",
    )
    log_level: str = _setting("INFO", "Log level.", choices=("DEBUG", "INFO", "WARNING", "ERROR"))


@dataclass(frozen=True)
class OAuthConfig:
    """OAuth metadata: the proxy's protected-resource metadata (`oauth.ProtectedResource`)."""

    TITLE: ClassVar[str] = "OAuth metadata"

    public_url: str = _setting(
        "",
        "The proxy's own public URL, for OAuth protected-resource metadata; empty derives it from "
        "each request. Required in exchange mode: callers' tokens must name `<public_url>/mcp` as audience.",
        metavar="URL",
    )
    authorization_servers: list[str] = _setting(
        [],
        "Comma-separated OAuth authorization servers to advertise; empty reads them from the "
        "upstream's protected-resource metadata.",
        metavar="URLS",
    )
    metadata_timeout: float = _setting(
        5.0,
        "Deadline in seconds for reading the upstream's protected-resource metadata (connecting and "
        "the whole body, every candidate URL together); a failed read is retried after 5 s at the "
        "earliest.",
        name="oauth_metadata_timeout",
        metavar="SECONDS",
    )


@dataclass(frozen=True)
class AuthConfig:
    """OAuth: how callers' tokens reach the upstream (`app.exchange_mode`).

    docs/security.md, "Which mode for which upstream", says which to choose.
    """

    TITLE: ClassVar[str] = "OAuth"

    mode: str = _setting(
        "forward",
        "`forward` passes each caller's Authorization header to the upstream as it is (for an upstream "
        "behind static tokens, or one that accepts tokens issued for the proxy). `exchange` validates "
        "each caller's token as issued for the proxy (`public_url`) and exchanges it (RFC 8693) at "
        "`oauth_token_url` for one issued for the upstream: for an upstream that checks the audience.",
        name="auth_mode",
        choices=("forward", "exchange"),
    )
    issuer: str = _setting(
        "",
        "Exchange mode: the authorization server's issuer; callers' tokens must name it (`iss`). Also "
        "advertised in the proxy's metadata when `authorization_servers` is empty.",
        name="oauth_issuer",
        metavar="URL",
    )
    jwks_url: str = _setting(
        "",
        "Exchange mode: the issuer's JSON Web Key Set, to validate callers' JWT access tokens locally. "
        "Give this or `oauth_introspection_url`.",
        name="oauth_jwks_url",
        metavar="URL",
    )
    introspection_url: str = _setting(
        "",
        "Exchange mode: the issuer's RFC 7662 introspection endpoint, asked (with the proxy's client "
        "credentials) whether a caller's token is active; sees revocation, unlike a JWT. Used instead of "
        "`oauth_jwks_url` when both are set.",
        name="oauth_introspection_url",
        metavar="URL",
    )
    introspection_cache_ttl: float = _setting(
        30.0,
        "Exchange mode: seconds an introspection answer is reused for the same token (never past the "
        "token's expiry); a revoked token is refused at most this long after its revocation. 0 asks "
        "every time.",
        metavar="SECONDS",
    )
    token_url: str = _setting(
        "",
        "Exchange mode: the authorization server's token endpoint, where callers' tokens are exchanged.",
        name="oauth_token_url",
        metavar="URL",
    )
    client_id: str = _setting(
        "",
        "Exchange mode: the proxy's own client id at the authorization server.",
        name="oauth_client_id",
        metavar="ID",
    )
    client_secret: str = _setting(
        "",
        "Exchange mode: the proxy's client secret. Set it in the environment, never on a command line; "
        "on Lambda leave it empty and name the secret with `oauth_client_secret_arn`.",
        name="oauth_client_secret",
        metavar="SECRET",
        secret=True,
    )
    client_secret_arn: str = _setting(
        "",
        "Exchange mode: ARN of a Secrets Manager secret or an SSM SecureString parameter holding the "
        "proxy's client secret, read once when first needed (the Lambda template grants reading only it).",
        name="oauth_client_secret_arn",
        metavar="ARN",
    )
    client_auth: str = _setting(
        "client_secret_basic",
        "Exchange mode: how the proxy authenticates at the token and introspection endpoints.",
        name="oauth_client_auth",
        choices=("client_secret_basic", "client_secret_post"),
    )
    resource: str = _setting(
        "",
        "Exchange mode: the `resource` (RFC 8707) asked for in each exchange: the upstream as its "
        "authorization server knows it. Empty: the upstream's URL.",
        name="exchange_resource",
        metavar="URL",
    )
    audience: str = _setting(
        "",
        "Exchange mode: an `audience` to ask for as well, for servers that name APIs by a logical name.",
        name="exchange_audience",
        metavar="NAME",
    )
    scope: str = _setting(
        "",
        "Exchange mode: the scope to ask for the upstream token; empty lets the authorization server decide.",
        name="exchange_scope",
        metavar="SCOPES",
    )
    timeout: float = _setting(
        5.0,
        "Exchange mode: seconds for one request to the authorization server (key set, introspection, "
        "exchange), connecting and the whole answer.",
        name="oauth_timeout",
        metavar="SECONDS",
    )


# The groups in the order docs/configuration.md and `--help` show them, by their attribute in `Settings`.
GROUPS: dict[str, type] = {
    "upstream": UpstreamConfig,
    "fair_use": FairUseConfig,
    "catalog": CatalogConfig,
    "tools": ToolsConfig,
    "search": SearchConfig,
    "model": ModelConfig,
    "endpoint": EndpointConfig,
    "server": ServerConfig,
    "oauth": OAuthConfig,
    "auth": AuthConfig,
}


@dataclass(frozen=True)
class Setting:
    """One setting as the outside sees it: its flat `name`, and where it lives (`group`, `attr`)."""

    name: str
    group: str
    attr: str
    field: dataclasses.Field[Any]

    @property
    def metadata(self) -> Mapping[str, Any]:
        return self.field.metadata

    @property
    def title(self) -> str:
        return str(GROUPS[self.group].TITLE)  # type: ignore[attr-defined]

    @property
    def default(self) -> Any:
        f = self.field
        return f.default if f.default_factory is dataclasses.MISSING else f.default_factory()


def _collect() -> tuple[Setting, ...]:
    found = tuple(
        Setting(f.metadata.get("name") or f.name, group, f.name, f)
        for group, cls in GROUPS.items()
        for f in dataclasses.fields(cls)
    )
    names = [s.name for s in found]
    duplicated = sorted({n for n in names if names.count(n) > 1})
    if duplicated or any("help" not in s.metadata for s in found):
        raise TypeError(f"every group field must be a _setting with its own flat name: {duplicated}")
    return found


_SETTINGS = _collect()
_BY_NAME = {s.name: s for s in _SETTINGS}


class Settings:
    """One group per component (`settings.upstream`, `settings.catalog`, ...), built from flat names.

    `Settings(upstream_timeout=10.0, embedder="none")` and `replace(...)` take the flat names that
    flags and variables carry; a flat name also reads its value (`settings.caller_rate` is
    `settings.fair_use.rate`), except `upstream`, which is the group (its URL is `settings.upstream.url`).
    """

    __slots__ = tuple(GROUPS)

    upstream: UpstreamConfig
    fair_use: FairUseConfig
    catalog: CatalogConfig
    tools: ToolsConfig
    search: SearchConfig
    model: ModelConfig
    endpoint: EndpointConfig
    server: ServerConfig
    oauth: OAuthConfig
    auth: AuthConfig

    def __init__(self, **values: Any) -> None:
        by_group: dict[str, dict[str, Any]] = {group: {} for group in GROUPS}
        for name, value in values.items():
            setting = _BY_NAME.get(name)
            if setting is None:
                raise TypeError(f"Settings() got an unexpected keyword argument {name!r}")
            by_group[setting.group][setting.attr] = value
        for group, cls in GROUPS.items():
            object.__setattr__(self, group, cls(**by_group[group]))

    def __getattr__(self, name: str) -> Any:
        setting = _BY_NAME.get(name)
        if setting is None:
            raise AttributeError(f"'Settings' object has no attribute {name!r}")
        return getattr(getattr(self, setting.group), setting.attr)

    def __setattr__(self, name: str, value: Any) -> None:
        raise dataclasses.FrozenInstanceError(f"cannot assign to field {name!r}")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Settings) and self.values() == other.values()

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return "Settings(" + ", ".join(f"{group}={getattr(self, group)!r}" for group in GROUPS) + ")"

    def values(self) -> dict[str, Any]:
        """Every setting by its flat name."""
        return {s.name: getattr(getattr(self, s.group), s.attr) for s in _SETTINGS}

    def replace(self, **changes: Any) -> Settings:
        return Settings(**{**self.values(), **changes})


def env_name(field_name: str) -> str:
    return ENV_PREFIX + field_name.upper()


def flag_name(field_name: str) -> str:
    return "--" + field_name.replace("_", "-")


def _parse(f: Setting, raw: str) -> Any:
    kind = f.field.type
    if kind in ("list[str]", list):
        return [item.strip() for item in raw.split(",") if item.strip()]
    if kind in ("int", int):
        return int(raw)
    if kind in ("float", float):
        return float(raw)
    return raw


def fields() -> tuple[Setting, ...]:
    """Every setting, group by group."""
    return _SETTINGS


def from_env(environ: Mapping[str, str] | None = None, **overrides: Any) -> Settings:
    """Settings from environment variables, then keyword overrides (by flat name)."""
    environ = os.environ if environ is None else environ
    values: dict[str, Any] = {}
    for f in fields():
        raw = environ.get(env_name(f.name))
        if raw is not None:
            values[f.name] = _validate(f, _parse(f, raw))
    values.update(overrides)
    return Settings(**values)


def _validate(f: Setting, value: Any) -> Any:
    choices = f.metadata.get("choices") or ()
    if choices and value not in choices:
        raise ValueError(f"{f.name}: expected one of {', '.join(choices)}, got {value!r}")
    return value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add a flag for every setting; unset flags stay None so the environment applies."""
    groups: dict[str, argparse._ArgumentGroup] = {}
    for f in fields():
        group = groups.get(f.group) or parser.add_argument_group(f.title)
        groups[f.group] = group
        kwargs: dict[str, Any] = {
            "dest": f.name,
            "default": None,
            "help": f"{f.metadata['help']} [env {env_name(f.name)}]",
        }
        if f.metadata.get("choices"):
            kwargs["choices"] = f.metadata["choices"]
        if f.metadata.get("metavar"):
            kwargs["metavar"] = f.metadata["metavar"]
        kwargs["type"] = lambda raw, _f=f: _parse(_f, raw)
        group.add_argument(flag_name(f.name), **kwargs)


def from_args(args: argparse.Namespace, environ: Mapping[str, str] | None = None) -> Settings:
    overrides = {f.name: getattr(args, f.name) for f in fields() if getattr(args, f.name, None) is not None}
    return from_env(environ, **overrides)


def render_markdown() -> str:
    """docs/configuration.md, generated from the fields above: one section per group."""
    lines = [
        "# Configuration",
        "",
        "<!-- Generated by `toolsearch docs`; edit shared/toolsearch/settings.py instead. -->",
        "",
        "Every setting is a flag of `toolsearch serve` and an environment variable; a flag wins over "
        "the variable, the variable over the default. Lists are comma-separated. In Lambda, set the "
        "variables in `template.yaml` (most are parameters of the stack).",
        "",
    ]
    for group in GROUPS:
        lines += [f"## {GROUPS[group].TITLE}", "", "| Flag | Environment variable | Default | Meaning |"]  # type: ignore[attr-defined]
        lines.append("|---|---|---|---|")
        for f in (s for s in fields() if s.group == group):
            default = f.default
            if isinstance(default, list):
                default = ",".join(default)
            shown = f"`{default}`" if default != "" else "(empty)"
            meaning = f.metadata["help"]
            if f.metadata.get("choices"):
                meaning += " One of: " + ", ".join(f"`{c}`" for c in f.metadata["choices"]) + "."
            lines.append(f"| `{flag_name(f.name)}` | `{env_name(f.name)}` | {shown} | {meaning} |")
        lines.append("")
    return "\n".join(lines)
