"""The DynamoDB tier of the catalog cache: opaque bytes shared between execution environments.

A cold execution environment reads a catalog that another one listed instead of
listing the upstream again. The store knows nothing of catalogs: it keeps bytes
(`Catalog.to_json()`) under an opaque key that is already a hash, never a token.

Table: partition key `pk` (S) only; TTL on `expires_at` (N, epoch seconds).
Items (all carry `expires_at`; reads treat an item whose time has passed as absent,
because DynamoDB deletes expired items late and dynalite never does):

  head   pk=<key>                   kind="head", version (S, random hex), codec ("zlib"|"lzma"),
                                    chunks (N; 0 when the data is inline), data (B; inline only),
                                    sha256 (S, hex of the compressed bytes), size (N, bytes before
                                    compression), fetched_at (N: when the listing began)
  chunk  pk=<key>#v#<version>#<n>   kind="chunk", data (B; part n of the compressed bytes)
  lease  pk=<key>#lease             kind="lease", holder (S)
  gone   pk=<key>                   kind="forgotten", fetched_at (N): the upstream refused the caller at
                                    that time; read as absent, and only a newer listing replaces it

Writing: compress; if the result fits one item it goes inline in the head,
otherwise chunks are written first under a fresh version, and only then is the
head flipped to name that version (a conditional put that never replaces a
newer catalog with an older one). Chunks of a version are never rewritten, so a
reader that follows a head sees exactly that version or, when something is
missing or does not match the checksum, nothing. Old chunks expire by TTL.

Failures never fail the request: an unreachable or throttled table, or a corrupt
item, makes `get` return None and `put` do nothing, with a WARNING (a key prefix
at most, never data) and an event for metrics. Events passed to `on_event`:
dynamo_hit, dynamo_miss, dynamo_put, dynamo_put_superseded, dynamo_too_large,
dynamo_corrupt, dynamo_throttled, dynamo_error, dynamo_forgotten.

One module on purpose, past 400 lines: heads, chunks and leases are one protocol over
one table, and the argument that a reader never sees a torn catalog reads as a whole.

boto3 is imported only when the first call needs a client, so the local server
runs without it.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import lzma
import math
import secrets
import threading
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from toolsearch.errors import ToolsearchError

logger = logging.getLogger(__name__)

CODECS = ("zlib", "lzma")
_THROTTLE_CODES = frozenset(
    {"ProvisionedThroughputExceededException", "ThrottlingException", "RequestLimitExceeded"}
)
_BATCH_GET_KEYS = 100  # DynamoDB's limit per BatchGetItem
_BATCH_WRITE_ITEMS = 25  # DynamoDB's limit per BatchWriteItem
_BATCH_ROUNDS = 8  # rounds of Unprocessed* retries before a read or write gives up


@dataclass(frozen=True)
class StoredCatalog:
    data: bytes  # Catalog.to_json() output
    fetched_at: float  # unix seconds


class _Corrupt(ToolsearchError):
    """An item that this store cannot have written, or a set of chunks that does not add up."""


class _Unavailable(ToolsearchError):
    """The table did not complete a batch after several rounds (throttled or overloaded)."""


def _compress(data: bytes, codec: str) -> bytes:
    if codec == "lzma":
        return lzma.compress(data, preset=6)
    return zlib.compress(data, 6)


def _decompress(blob: bytes, codec: str, size: int) -> bytes:
    # Bounded by the size the head promises, so a corrupt item cannot inflate without limit.
    try:
        if codec == "zlib":
            inflater = zlib.decompressobj()
            data = inflater.decompress(blob, size + 1)
            done = inflater.eof
        elif codec == "lzma":
            decoder = lzma.LZMADecompressor()
            data = decoder.decompress(blob, max_length=size + 1)
            done = decoder.eof
        else:
            raise _Corrupt(f"unknown codec {codec!r}")
    except (zlib.error, lzma.LZMAError) as exc:
        raise _Corrupt("data does not decompress") from exc
    if not done or len(data) != size:
        raise _Corrupt("data is not the size the head names")
    return data


class DynamoSharedTier:
    """Catalog bytes in one DynamoDB table, split across items when large.

    `ttl_seconds` is how long written items live. `chunk_bytes` is the most bytes
    of compressed data in one item (items hold at most 400 KB with their names).
    `client` is a boto3 DynamoDB client; without one, a client is made on first use
    with bounded timeouts and two attempts, so a dead table costs about a second.
    The endpoint and region come from the usual AWS settings (AWS_REGION,
    AWS_ENDPOINT_URL_DYNAMODB) unless given. `clock` is for tests.
    """

    def __init__(
        self,
        table_name: str,
        *,
        client: Any = None,
        ttl_seconds: float,
        chunk_bytes: int = 350_000,
        codec: str = "zlib",
        max_chunks: int = 64,
        endpoint_url: str | None = None,
        region_name: str | None = None,
        connect_timeout: float = 0.5,
        read_timeout: float = 1.0,
        on_event: Callable[[str], None] | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if not table_name:
            raise ValueError("table_name is empty")
        if codec not in CODECS:
            raise ValueError(f"codec must be one of {CODECS}")
        if not 1 <= chunk_bytes <= 350_000:
            raise ValueError("chunk_bytes must be between 1 and 350000 (items hold at most 400 KB)")
        if ttl_seconds <= 0:
            raise ValueError("ttl_seconds must be positive")
        self.table_name = table_name
        self.ttl_seconds = ttl_seconds
        self.chunk_bytes = chunk_bytes
        self.codec = codec
        self.max_chunks = max_chunks
        self._client = client
        self._client_lock = threading.Lock()
        self._endpoint_url = endpoint_url
        self._region_name = region_name
        self._connect_timeout = connect_timeout
        self._read_timeout = read_timeout
        self._on_event = on_event
        self._clock = clock

    # -- public, async: each runs its blocking boto3 calls in one worker thread

    async def get(self, key: str) -> StoredCatalog | None:
        _check_key(key)
        return await asyncio.to_thread(self._guarded, "get", key, None, self._get, key)

    async def put(self, key: str, data: bytes, fetched_at: float) -> bool | None:
        """Store a catalog listed from `fetched_at` (when its listing began). False when a refusal
        recorded after that forbids it (the tombstone stays); None when the table could not be asked."""
        _check_key(key)
        return await asyncio.to_thread(
            self._guarded, "put", key, None, self._put, key, bytes(data), fetched_at
        )

    async def try_lease(self, key: str, holder: str, seconds: float) -> bool:
        """True when `holder` may refresh `key` for `seconds` (it already held it, or nobody does).

        Fails open: when the table cannot be asked, every environment refreshes on its own.
        """
        _check_key(key)
        return await asyncio.to_thread(
            self._guarded, "lease", key, True, self._try_lease, key, holder, seconds
        )

    async def release_lease(self, key: str, holder: str) -> None:
        _check_key(key)
        await asyncio.to_thread(self._guarded, "release", key, None, self._release_lease, key, holder)

    async def forget(self, key: str, at: float) -> None:
        """Stop serving `key`'s catalog: a tombstone head that no copy listed before `at` replaces."""
        _check_key(key)
        await asyncio.to_thread(self._guarded, "forget", key, None, self._forget, key, at)

    # -- error boundary

    def _guarded(
        self, operation: str, key: str, fallback: Any, function: Callable[..., Any], *args: Any
    ) -> Any:
        try:
            return function(*args)
        except _Corrupt as exc:
            self._event("dynamo_corrupt")
            logger.warning(
                "dynamo: corrupt catalog ignored",
                extra={"operation": operation, "key_prefix": key[:8], "reason": str(exc)},
            )
        except Exception as exc:  # the cache must never fail a request
            code = _error_code(exc)
            throttled = code in _THROTTLE_CODES or isinstance(exc, _Unavailable)
            self._event("dynamo_throttled" if throttled else "dynamo_error")
            # The error's type and code only: botocore messages can quote request values.
            logger.warning(
                "dynamo operation failed",
                extra={"operation": operation, "key_prefix": key[:8], "error": code},
            )
        return fallback

    def _event(self, name: str) -> None:
        if self._on_event is None:
            return
        try:
            self._on_event(name)
        except Exception:  # a broken metrics hook must not break the cache
            logger.exception("on_event hook failed")

    # -- blocking work

    def _client_or_make(self) -> Any:
        with self._client_lock:
            if self._client is None:
                import boto3  # only here: the local server runs without AWS libraries
                from botocore.config import Config

                config = Config(
                    connect_timeout=self._connect_timeout,
                    read_timeout=self._read_timeout,
                    retries={"max_attempts": 2, "mode": "standard"},
                )
                self._client = boto3.session.Session().client(
                    "dynamodb", endpoint_url=self._endpoint_url, region_name=self._region_name, config=config
                )
            return self._client

    def _get(self, key: str) -> StoredCatalog | None:
        client = self._client_or_make()
        now = self._clock()
        # An eventually consistent head is fine: an older head still names chunks that exist.
        head = client.get_item(TableName=self.table_name, Key={"pk": {"S": key}}).get("Item")
        if head is None or _expired(head, now) or head.get("kind", {}).get("S") == "forgotten":
            self._event("dynamo_miss")
            return None
        version, codec, chunks, checksum, size, fetched_at = _parse_head(head)
        if chunks == 0:
            blob = _binary(head, "data")
        else:
            if chunks > self.max_chunks:
                raise _Corrupt("head names too many chunks")
            blob = b"".join(self._read_chunks(client, key, version, chunks, now))
        if hashlib.sha256(blob).hexdigest() != checksum:
            raise _Corrupt("checksum does not match")
        data = _decompress(blob, codec, size)
        self._event("dynamo_hit")
        return StoredCatalog(data=data, fetched_at=fetched_at)

    def _read_chunks(self, client: Any, key: str, version: str, chunks: int, now: float) -> list[bytes]:
        wanted = {_chunk_pk(key, version, n): n for n in range(chunks)}
        parts: dict[int, bytes] = {}
        pending = list(wanted)
        rounds = 0
        while pending:
            batch, pending = pending[:_BATCH_GET_KEYS], pending[_BATCH_GET_KEYS:]
            # Chunks are read consistently: the head that names them may be newer than an
            # eventually consistent read of them.
            response = client.batch_get_item(
                RequestItems={
                    self.table_name: {"Keys": [{"pk": {"S": pk}} for pk in batch], "ConsistentRead": True}
                }
            )
            for item in response.get("Responses", {}).get(self.table_name, []):
                pk = item.get("pk", {}).get("S")
                if pk not in wanted or _expired(item, now):
                    raise _Corrupt("chunk missing or expired")
                parts[wanted[pk]] = _binary(item, "data")
            unprocessed = response.get("UnprocessedKeys", {}).get(self.table_name, {}).get("Keys", [])
            processed = set(batch) - {k["pk"]["S"] for k in unprocessed}
            if any(wanted[pk] not in parts for pk in processed):
                raise _Corrupt("chunk missing")
            if unprocessed:
                rounds = _next_round(rounds, made_progress=len(unprocessed) < len(batch))
                pending = [k["pk"]["S"] for k in unprocessed] + pending
        return [parts[n] for n in range(chunks)]

    def _put(self, key: str, data: bytes, fetched_at: float) -> bool:
        blob = _compress(data, self.codec)
        chunk_count = 0 if len(blob) <= self.chunk_bytes else math.ceil(len(blob) / self.chunk_bytes)
        if chunk_count > self.max_chunks:
            self._event("dynamo_too_large")
            logger.warning(
                "dynamo put: catalog too large to share",
                extra={"key_prefix": key[:8], "compressed_bytes": len(blob)},
            )
            return True
        client = self._client_or_make()
        expires_at = {"N": str(math.ceil(self._clock() + self.ttl_seconds))}
        version = secrets.token_hex(8)
        head: dict[str, Any] = {
            "pk": {"S": key},
            "kind": {"S": "head"},
            "version": {"S": version},
            "codec": {"S": self.codec},
            "chunks": {"N": str(chunk_count)},
            "sha256": {"S": hashlib.sha256(blob).hexdigest()},
            "size": {"N": str(len(data))},
            "fetched_at": {"N": repr(float(fetched_at))},
            "expires_at": expires_at,
        }
        if chunk_count == 0:
            head["data"] = {"B": blob}
        else:
            self._write_chunks(client, key, version, blob, expires_at)
        try:
            # Replace a head only with a catalog at least as new, unless it expired or is not ours.
            client.put_item(
                TableName=self.table_name,
                Item=head,
                ConditionExpression=(
                    "attribute_not_exists(pk) OR NOT attribute_type(fetched_at, :n) "
                    "OR NOT attribute_type(expires_at, :n) OR fetched_at <= :fetched_at OR expires_at <= :now"
                ),
                ExpressionAttributeValues={
                    ":n": {"S": "N"},
                    ":fetched_at": head["fetched_at"],
                    ":now": {"N": repr(self._clock())},
                },
            )
        except Exception as exc:
            if _error_code(exc) != "ConditionalCheckFailedException":
                raise
            self._event("dynamo_put_superseded")  # a newer catalog, or a refusal since this one began
            return not self._refused_since(client, key, fetched_at)
        self._event("dynamo_put")
        return True

    def _refused_since(self, client: Any, key: str, fetched_at: float) -> bool:
        """Whether the head is a tombstone newer than a listing begun at `fetched_at` (read once a
        put's condition failed, to tell a newer catalog from a refusal)."""
        head = client.get_item(TableName=self.table_name, Key={"pk": {"S": key}}, ConsistentRead=True).get(
            "Item"
        )
        if head is None or head.get("kind", {}).get("S") != "forgotten":
            return False
        try:
            return float(head["fetched_at"]["N"]) > fetched_at
        except (KeyError, TypeError, ValueError):
            return False

    def _write_chunks(self, client: Any, key: str, version: str, blob: bytes, expires_at: dict) -> None:
        requests = [
            {
                "PutRequest": {
                    "Item": {
                        "pk": {"S": _chunk_pk(key, version, n)},
                        "kind": {"S": "chunk"},
                        "data": {"B": blob[start : start + self.chunk_bytes]},
                        "expires_at": expires_at,
                    }
                }
            }
            for n, start in enumerate(range(0, len(blob), self.chunk_bytes))
        ]
        rounds = 0
        while requests:
            batch, requests = requests[:_BATCH_WRITE_ITEMS], requests[_BATCH_WRITE_ITEMS:]
            response = client.batch_write_item(RequestItems={self.table_name: batch})
            unprocessed = response.get("UnprocessedItems", {}).get(self.table_name, [])
            if unprocessed:
                rounds = _next_round(rounds, made_progress=len(unprocessed) < len(batch))
                requests = unprocessed + requests

    def _forget(self, key: str, at: float) -> None:
        client = self._client_or_make()
        tombstone = {
            "pk": {"S": key},
            "kind": {"S": "forgotten"},
            "fetched_at": {"N": repr(float(at))},
            "expires_at": {"N": str(math.ceil(self._clock() + self.ttl_seconds))},
        }
        try:
            # A put's condition compares fetched_at: a listing that started before the refusal, finishing
            # late, cannot bring the catalog back. A newer listing (the upstream admitted the token again)
            # is left in place.
            client.put_item(
                TableName=self.table_name,
                Item=tombstone,
                ConditionExpression="attribute_not_exists(pk) OR NOT attribute_type(fetched_at, :n) "
                "OR fetched_at <= :at",
                ExpressionAttributeValues={":n": {"S": "N"}, ":at": tombstone["fetched_at"]},
            )
        except Exception as exc:
            if _error_code(exc) != "ConditionalCheckFailedException":
                raise
            return
        self._event("dynamo_forgotten")

    def _try_lease(self, key: str, holder: str, seconds: float) -> bool:
        client = self._client_or_make()
        now = self._clock()
        try:
            client.put_item(
                TableName=self.table_name,
                Item={
                    "pk": {"S": _lease_pk(key)},
                    "kind": {"S": "lease"},
                    "holder": {"S": holder},
                    "expires_at": {"N": str(math.ceil(now + seconds))},
                },
                ConditionExpression="attribute_not_exists(pk) OR expires_at <= :now OR holder = :holder",
                ExpressionAttributeValues={":now": {"N": repr(now)}, ":holder": {"S": holder}},
            )
        except Exception as exc:
            if _error_code(exc) == "ConditionalCheckFailedException":
                return False
            raise
        return True

    def _release_lease(self, key: str, holder: str) -> None:
        client = self._client_or_make()
        try:
            client.delete_item(
                TableName=self.table_name,
                Key={"pk": {"S": _lease_pk(key)}},
                ConditionExpression="holder = :holder",
                ExpressionAttributeValues={":holder": {"S": holder}},
            )
        except Exception as exc:
            if _error_code(exc) != "ConditionalCheckFailedException":
                raise  # else: the lease expired and someone else holds it now; leave theirs alone


# -- helpers


def _check_key(key: str) -> None:
    # '#' separates the key from item suffixes; a key holding one could reach another key's items.
    if not isinstance(key, str) or not key or "#" in key or len(key.encode()) > 1024:
        raise ValueError("cache key must be a non-empty string without '#', at most 1024 bytes")


def _chunk_pk(key: str, version: str, n: int) -> str:
    return f"{key}#v#{version}#{n}"


def _lease_pk(key: str) -> str:
    return f"{key}#lease"


def _expired(item: dict, now: float) -> bool:
    try:
        return float(item["expires_at"]["N"]) <= now
    except (KeyError, TypeError, ValueError) as exc:
        raise _Corrupt("item has no expiry") from exc


def _parse_head(head: dict) -> tuple[str, str, int, str, int, float]:
    try:
        version = head["version"]["S"]
        codec = head["codec"]["S"]
        chunks = int(head["chunks"]["N"])
        checksum = head["sha256"]["S"]
        size = int(head["size"]["N"])
        fetched_at = float(head["fetched_at"]["N"])
    except (KeyError, TypeError, ValueError) as exc:
        raise _Corrupt("head lacks a field") from exc
    if head.get("kind", {}).get("S") != "head" or chunks < 0 or size < 0 or codec not in CODECS:
        raise _Corrupt("head has an unknown shape")
    return version, codec, chunks, checksum, size, fetched_at


def _binary(item: dict, name: str) -> bytes:
    value = item.get(name, {}).get("B")
    if not isinstance(value, bytes | bytearray):
        raise _Corrupt(f"item lacks binary {name}")
    return bytes(value)


def _next_round(rounds: int, *, made_progress: bool) -> int:
    """Back off before retrying unprocessed batch entries; give up after a few rounds."""
    rounds += 1
    if rounds > _BATCH_ROUNDS:
        raise _Unavailable("batch left unprocessed")
    if not made_progress:
        time.sleep(min(0.05 * 2**rounds, 0.5))
    return rounds


def _error_code(exc: BaseException) -> str:
    response = getattr(exc, "response", None)
    if isinstance(response, dict):
        code = response.get("Error", {}).get("Code")
        if code:
            return str(code)
    return type(exc).__name__
