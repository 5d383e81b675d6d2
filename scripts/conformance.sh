#!/usr/bin/env bash
# Run the MCP conformance suite's server scenarios against the proxy, and summarise.
#
# Two proxies on 127.0.0.1, each a real `toolsearch serve`:
#   direct  the demo upstream; the five tools as a model sees them.
#   pinned  in front of scripts/conformance_upstream.py with the suite's fixture tools pinned,
#           so the tools-call scenarios measure what the proxy does to content, errors, schemas
#           and Mcp-Param headers on the way through.
# Each leg runs at 2026-07-28 (stateless, per-request _meta) and at the handshake versions.
# Node 22 (the suite needs it) and the suite are installed under .cache/ on first use, from the
# npm registry. Results land in .cache/conformance-results/<time>/; the summary says for each
# scenario pass, fail, n/a or known gap, and why (scripts/conformance_summary.py). Exit status 1
# when an applicable scenario fails.
#
# Usage: scripts/conformance.sh            (about 30 s once installed)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE="$ROOT/.cache"
PY="$ROOT/.venv/bin/python"
SUITE_VERSION="0.2.0-alpha.12"
SUITE_DIR="$CACHE/conformance"
SUITE="$SUITE_DIR/node_modules/@modelcontextprotocol/conformance/dist/index.js"
OUT="${CONFORMANCE_OUT:-$CACHE/conformance-results/$(date -u +%Y%m%dT%H%M%SZ)}"
PINNED="test_simple_text,test_image_content,test_audio_content,test_embedded_resource"
PINNED="$PINNED,test_multiple_content_types,test_error_handling,test_tool_with_progress"
PINNED="$PINNED,json_schema_2020_12_tool,test_header_param"

# -- Node 22: the system one if new enough, else the npm registry's node-linux-<arch> package.
node_bin() {
    if command -v node >/dev/null && [ "$(node -p 'process.versions.node.split(".")[0]')" -ge 22 ]; then
        command -v node
        return
    fi
    local arch
    case "$(uname -m)" in
        x86_64) arch=x64 ;;
        aarch64 | arm64) arch=arm64 ;;
        *) echo "no Node 22 package for $(uname -m)" >&2; exit 2 ;;
    esac
    local bin="$CACHE/node22/node_modules/node-linux-$arch/bin/node"
    if [ ! -x "$bin" ]; then
        npm install --silent --no-audit --no-fund --prefix "$CACHE/node22" "node-linux-$arch@22" >&2
    fi
    echo "$bin"
}
NODE="$(node_bin)"
if [ ! -f "$SUITE" ] || ! grep -q "\"version\": \"$SUITE_VERSION\"" "$SUITE_DIR/node_modules/@modelcontextprotocol/conformance/package.json"; then
    npm install --silent --no-audit --no-fund --prefix "$SUITE_DIR" "@modelcontextprotocol/conformance@$SUITE_VERSION" >&2
fi

# -- servers, all on loopback; stopped on exit by the ids we started.
PIDS=()
cleanup() { for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done; }
trap cleanup EXIT
free_port() { "$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
wait_ready() {  # a legacy ping answers once the server listens
    for _ in $(seq 100); do
        if curl -sf -o /dev/null -X POST "$1" -H 'Content-Type: application/json' \
            -d '{"jsonrpc":"2.0","id":1,"method":"ping"}'; then return 0; fi
        sleep 0.2
    done
    echo "server at $1 did not start" >&2
    exit 2
}
mkdir -p "$OUT"
UP_PORT="$(free_port)"
"$PY" "$ROOT/scripts/conformance_upstream.py" "$UP_PORT" >"$OUT/upstream.log" 2>&1 &
PIDS+=($!)
DIRECT_PORT="$(free_port)"
"$ROOT/.venv/bin/toolsearch" serve --demo --host 127.0.0.1 --port "$DIRECT_PORT" --embedder none \
    >"$OUT/direct-proxy.log" 2>&1 &
PIDS+=($!)
PINNED_PORT="$(free_port)"
"$ROOT/.venv/bin/toolsearch" serve --upstream "http://127.0.0.1:$UP_PORT/mcp" --host 127.0.0.1 \
    --port "$PINNED_PORT" --embedder none --pinned-tools "$PINNED" >"$OUT/pinned-proxy.log" 2>&1 &
PIDS+=($!)
DIRECT="http://127.0.0.1:$DIRECT_PORT/mcp"
PINNED_URL="http://127.0.0.1:$PINNED_PORT/mcp"
wait_ready "http://127.0.0.1:$UP_PORT/mcp"
wait_ready "$DIRECT"
wait_ready "$PINNED_URL"

# -- the runs. The suite's own exit status is ignored: scenarios for features the proxy does not
# offer fail by design; the summary decides.
cd "$SUITE_DIR"  # the suite writes nothing into the repository
suite() { "$NODE" "$SUITE" server "$@" >>"$OUT/suite.log" 2>&1 || true; }
for revision in 2026-07-28 2025-11-25; do
    suite --url "$DIRECT" --requirements "$revision" -o "$OUT/direct-$revision"
done
for scenario in sep-2640-skills-directory sep-2640-skills-enumeration sep-2640-skills-manifest; do
    suite --url "$DIRECT" --scenario "$scenario" -o "$OUT/direct-2026-07-28"  # in no requirement set
done
for version in 2025-06-18 2025-03-26; do  # older handshake versions: the scenarios that still apply
    for scenario in server-initialize ping tools-list dns-rebinding-protection server-session-lifecycle; do
        suite --url "$DIRECT" --scenario "$scenario" --spec-version "$version" --force -o "$OUT/direct-$version"
    done
done
PINNED_SCENARIOS="tools-list tools-call-simple-text tools-call-image tools-call-audio
    tools-call-embedded-resource tools-call-mixed-content tools-call-error tools-call-with-progress
    json-schema-2020-12"
for version in 2026-07-28 2025-11-25; do
    for scenario in $PINNED_SCENARIOS; do
        suite --url "$PINNED_URL" --scenario "$scenario" --spec-version "$version" -o "$OUT/pinned-$version"
    done
done
suite --url "$PINNED_URL" --scenario http-custom-header-server-validation -o "$OUT/pinned-2026-07-28"

echo "results: $OUT"
"$PY" "$ROOT/scripts/conformance_summary.py" "$OUT"
