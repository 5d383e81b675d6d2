"""A source's catalog served as the proxy's users meet it: a real upstream, the proxy in front.

The upstream is the official MCP SDK's server (tests/fixtures/catalog_upstream.py, as
bench/bench_tasks.py serves a catalog) on 127.0.0.1, listing the tool definitions given. In front
of it, `toolsearch serve --upstream URL` in a process of its own, as a user starts it locally:
default settings, the bundled model, the default learned ranker. Its log (JSON lines on stderr)
goes to a file, read afterwards for the tools it dropped while listing, and checked for text that
must never be there (queries).
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

import toolsearch
from toolsearch.cli.catalog import fetch_catalog

ROOT = Path(__file__).resolve().parents[2]
TOKEN = "searchbench-proxy"  # made up: the upstream asks for none; the proxy keys the caller's catalog by it
AUTHORIZATION = {"Authorization": f"Bearer {TOKEN}"}
DROPPED = "upstream tool dropped"  # the proxy's log message for a listed tool it leaves out


@dataclass(frozen=True)
class Served:
    base: str  # http://127.0.0.1:PORT of the proxy
    log: Path  # its stderr

    @property
    def url(self) -> str:
        return self.base + "/mcp"

    def log_records(self) -> list[dict[str, Any]]:
        records = []
        for line in self.log.read_text(encoding="utf-8", errors="replace").splitlines():
            with contextlib.suppress(json.JSONDecodeError):
                record = json.loads(line)
                if isinstance(record, dict):
                    records.append(record)
        return records

    def dropped(self) -> dict[str, str]:
        """The tools the proxy left out while listing, with the reason it logged."""
        return {
            str(r.get("tool")): str(r.get("reason"))
            for r in self.log_records()
            if r.get("message") == DROPPED
        }

    def catalog_names(self) -> set[str]:
        """The names of the caller's catalog as the proxy holds it (`GET /catalog`, every page, read
        as `toolsearch catalog` reads it)."""
        with httpx.Client(timeout=120, headers=AUTHORIZATION) as http:
            listing = fetch_catalog(http, self.base, None)
        if listing.stopped:
            raise RuntimeError(f"GET /catalog: {listing.stopped}")
        return {str(row.get("name")) for row in listing.rows}


def _tests_on_path() -> None:
    """The upstream fixture lives under tests/ (tests/fixtures), as pytest and bench/ import it."""
    tests = str(ROOT / "tests")
    if tests not in sys.path:
        sys.path.insert(0, tests)


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait_until_up(base: str, process: subprocess.Popen[bytes], seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the proxy exited ({process.returncode}) before serving")
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(base + "/healthz", timeout=2).status_code == 200:
                return
        time.sleep(0.1)
    raise RuntimeError(f"the proxy did not answer within {seconds:g} s")


@contextlib.contextmanager
def served(tools: Sequence[dict[str, Any]], folder: Path) -> Iterator[Served]:
    """The upstream serving `tools` and the proxy in front of it, while the block runs."""
    _tests_on_path()
    from fixtures.catalog_upstream import catalog_upstream

    # The proxy imports the same toolsearch as this process, so both sides run the same code.
    package_root = str(Path(toolsearch.__file__).resolve().parents[1])
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [package_root, os.environ.get("PYTHONPATH")])),
    }
    with catalog_upstream(tools) as upstream:
        port = _free_port()
        log = folder / f"proxy-{port}.log"
        command = [sys.executable, "-m", "toolsearch.cli.main", "serve", "--upstream", upstream.url]
        with log.open("wb") as sink:
            process = subprocess.Popen(
                [*command, "--port", str(port)], stdout=subprocess.DEVNULL, stderr=sink, env=env
            )
        base = f"http://127.0.0.1:{port}"
        try:
            _wait_until_up(base, process)
            yield Served(base, log)
        finally:
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
