"""A tiny real model2vec model, and a loopback server with the Hugging Face hub's URL layout."""

from __future__ import annotations

import hashlib
import json
import socket
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote, urlsplit

import numpy as np
from safetensors.numpy import save_file
from tokenizers import Tokenizer, models, normalizers, pre_tokenizers

WORDS = [
    "search",
    "tools",
    "find",
    "create",
    "delete",
    "update",
    "list",
    "read",
    "write",
    "calendar",
    "event",
    "meeting",
    "ticket",
    "user",
    "invoice",
    "payment",
    "customer",
    "order",
    "report",
    "email",
    "send",
    "message",
    "file",
    "folder",
    "project",
    "task",
    "labas",
    "rytas",
    "kalendorius",
    "įvykis",
    "susitikimas",
    "sąskaita",
    "mokėjimas",
    "klientas",
    "užsakymas",
    "žinutė",
]


def make_tokenizer(words: tuple[str, ...] | list[str] = WORDS) -> Tokenizer:
    """A Unigram tokenizer like potion's: Metaspace words, single characters, an unknown token."""
    letters = sorted({ch for w in words for ch in w})
    vocab = [("<unk>", 0.0)]
    vocab += [("▁" + w, -2.0) for w in words]
    vocab += [(ch, -8.0) for ch in letters] + [("▁", -6.0)]
    tokenizer = Tokenizer(models.Unigram(vocab, unk_id=0, byte_fallback=False))
    tokenizer.normalizer = normalizers.Sequence([normalizers.NFKC(), normalizers.Lowercase()])
    tokenizer.pre_tokenizer = pre_tokenizers.Metaspace()
    return tokenizer


def make_model(folder: Path, dim: int = 16, seed: int = 0, tokenizer: Tokenizer | None = None) -> Path:
    """Write a model2vec folder: vectors of very different lengths, as in trained potion models."""
    folder.mkdir(parents=True, exist_ok=True)
    tokenizer = tokenizer or make_tokenizer()
    rng = np.random.default_rng(seed)
    rows = tokenizer.get_vocab_size()
    # Decaying column scales, like a PCA'd model, and row norms spread over two orders of magnitude.
    columns = np.linspace(3.0, 0.3, dim)
    embeddings = rng.normal(size=(rows, dim)) * columns * rng.uniform(0.05, 5.0, size=(rows, 1))
    save_file({"embeddings": embeddings.astype(np.float32)}, folder / "model.safetensors")
    tokenizer.save(str(folder / "tokenizer.json"))
    config = {"model_type": "model2vec", "hidden_dim": dim, "normalize": True, "max_length": 512}
    (folder / "config.json").write_text(json.dumps(config))
    (folder / "README.md").write_text("---\nlicense: mit\nlibrary_name: model2vec\n---\n# tiny test model\n")
    return folder


def git_blob_sha1(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


@dataclass
class FakeHub:
    """The hub's resolve/API layout on 127.0.0.1, with faults a test can switch on."""

    repo: str
    revision: str
    files: dict[str, bytes]
    lfs: set[str] = field(default_factory=lambda: {"model.safetensors", "tokenizer.json"})
    api_enabled: bool = True
    drop_after: dict[str, int] = field(default_factory=dict)  # file -> bytes sent before hanging up, once
    fail_with: dict[str, list[int]] = field(default_factory=dict)  # file -> statuses to answer first
    corrupt: set[str] = field(default_factory=set)  # files whose served bytes differ from the published ones
    requests: list[tuple[str, str, str | None]] = field(default_factory=list)  # method, path, Range

    def sha256(self, name: str) -> str:
        return hashlib.sha256(self.files[name]).hexdigest()

    def served(self, name: str) -> bytes:
        data = self.files[name]
        if name in self.corrupt:
            return bytes([data[0] ^ 0xFF]) + data[1:]
        return data

    def start(self) -> str:
        hub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):  # keep test output quiet
                pass

            def do_HEAD(self):
                self._handle(head=True)

            def do_GET(self):
                self._handle(head=False)

            def _send(self, status: int, headers: dict[str, str], body: bytes = b"", head: bool = False):
                self.send_response(status)
                for k, v in headers.items():
                    self.send_header(k, v)
                if "Content-Length" not in headers:
                    self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if not head:
                    self.wfile.write(body)

            def _handle(self, head: bool):
                path = unquote(urlsplit(self.path).path)
                hub.requests.append((self.command, path, self.headers.get("Range")))
                api = f"/api/models/{hub.repo}/revision/{hub.revision}"
                resolve = f"/{hub.repo}/resolve/{hub.revision}/"
                if path == api:
                    return self._api(head)
                if path.startswith(resolve):
                    return self._resolve(path.removeprefix(resolve), head)
                if path.startswith("/cdn/"):
                    return self._bytes(path.removeprefix("/cdn/"), head)
                return self._send(404, {"X-Error-Code": "RepoNotFound"}, b"not found", head)

            def _api(self, head: bool):
                if not hub.api_enabled:
                    return self._send(404, {}, b"no api here", head)
                siblings = []
                for name, data in hub.files.items():
                    entry = {"rfilename": name, "size": len(data), "blobId": git_blob_sha1(data)}
                    if name in hub.lfs:
                        entry["lfs"] = {"sha256": hub.sha256(name), "size": len(data), "pointerSize": 134}
                    siblings.append(entry)
                body = json.dumps({"id": hub.repo, "sha": hub.revision, "siblings": siblings}).encode()
                self._send(200, {"Content-Type": "application/json"}, body, head)

            def _resolve(self, name: str, head: bool):
                if name not in hub.files:
                    return self._send(404, {"X-Error-Code": "EntryNotFound"}, b"entry not found", head)
                data = hub.files[name]
                common = {"X-Repo-Commit": hub.revision}
                if name in hub.lfs:
                    common |= {
                        "Location": f"/cdn/{name}",
                        "X-Linked-Etag": f'"{hub.sha256(name)}"',
                        "X-Linked-Size": str(len(data)),
                        "ETag": f'"{git_blob_sha1(data)}"',
                    }
                    return self._send(302, common, b"", head)
                common["ETag"] = f'"{git_blob_sha1(data)}"'
                return self._bytes(name, head, common)

            def _bytes(self, name: str, head: bool, headers: dict[str, str] | None = None):
                headers = dict(headers or {})
                if name not in hub.files:
                    return self._send(404, {}, b"", head)
                if not head and hub.fail_with.get(name):
                    return self._send(hub.fail_with[name].pop(0), {}, b"try later", head)
                data = hub.served(name)
                start, status = 0, 200
                wanted = self.headers.get("Range")
                if wanted and wanted.startswith("bytes=") and wanted.endswith("-"):
                    start = int(wanted[len("bytes=") : -1])
                    if start >= len(data):
                        return self._send(416, {"Content-Range": f"bytes */{len(data)}"}, b"", head)
                    status = 206
                    headers["Content-Range"] = f"bytes {start}-{len(data) - 1}/{len(data)}"
                body = data[start:]
                cut = None if head else hub.drop_after.pop(name, None)
                if cut is None:
                    return self._send(status, headers | {"Accept-Ranges": "bytes"}, body, head)
                # Promise the whole body, send part of it, hang up.
                self.send_response(status)
                for k, v in (headers | {"Content-Length": str(len(body))}).items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(body[:cut])
                self.wfile.flush()
                self.connection.shutdown(socket.SHUT_RDWR)
                self.close_connection = True

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def paths(self, method: str | None = None) -> list[str]:
        return [p for m, p, _ in self.requests if method is None or m == method]
